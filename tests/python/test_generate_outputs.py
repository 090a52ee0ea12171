"""`eddy generate` for every classical solver: the files open in h5py with the documented layout,
and a generated Darcy set trains with `eddy train` as it is."""

import subprocess

import h5py
import numpy as np
import pytest

import eddy

CONFIGS = {
    "burgers": """solver: burgers
resolution: 32
samples: 3
batch: 2
nu: 0.05
time: {dt: 0.01, final: 0.1, records: 2}
output: {path: PATH}
""",
    "navier_stokes": """solver: navier_stokes
resolution: 16
samples: 2
nu: 1.0e-3
time: {dt: 0.01, final: 0.1, records: 2}
output: {path: PATH, dtype: float64}
""",
    "darcy": """solver: darcy
resolution: 12
samples: 4
coefficient: {high: 12, low: 3}
output: {path: PATH}
""",
}

SHAPES = {  # a, u, x
    "burgers": ((3, 32), (3, 2, 32), (32,)),
    "navier_stokes": ((2, 16, 16), (2, 2, 16, 16), (16,)),
    "darcy": ((4, 12, 12), (4, 12, 12), (12,)),
}


def generate(eddy_cli, tmp_path, solver, *overrides, name=None):
    config = tmp_path / f"{solver}.yaml"
    path = tmp_path / f"{name or solver}.h5"
    config.write_text(CONFIGS[solver].replace("PATH", str(path)))
    result = subprocess.run([str(eddy_cli), "generate", str(config), *overrides, "--quiet"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert f"wrote {path}" in result.stdout
    return path


@pytest.mark.parametrize("solver", CONFIGS)
def test_generated_dataset_opens_in_h5py(tmp_path, eddy_cli, solver):
    path = generate(eddy_cli, tmp_path, solver)
    a_shape, u_shape, x_shape = SHAPES[solver]
    with h5py.File(path, "r") as f:
        a, u, x = f["a"][:], f["u"][:], f["x"][:]
        assert (a.shape, u.shape, x.shape) == (a_shape, u_shape, x_shape)
        assert a.dtype == u.dtype == (np.float64 if solver == "navier_stokes" else np.float32)
        assert np.isfinite(a).all() and np.isfinite(u).all()
        assert f.attrs["solver"] == solver.encode()  # fixed-length HDF5 strings read as bytes
        assert f.attrs["resolution"] == x_shape[0] and f.attrs["samples"] == a_shape[0]
        assert f.attrs["seed"] == 0
        # Whole numbers are stored as integers: a seed of 2^53 + 1 came back as 2^53 in a float64.
        assert all(f.attrs[key].dtype == np.int64 for key in ("resolution", "samples", "seed"))
        assert f"solver: {solver}".encode() in f["config"][()]
        n = x_shape[0]
        if solver == "darcy":
            np.testing.assert_allclose(x, np.arange(n) / (n - 1), rtol=1e-6)
            assert set(np.unique(a)) <= {3.0, 12.0}
            assert (u[:, 1:-1, 1:-1] > 0).all()
            assert not u[:, [0, -1], :].any() and not u[:, :, [0, -1]].any()
            assert f.attrs["a_high"] == 12 and f.attrs["a_low"] == 3
        else:
            np.testing.assert_allclose(x, np.arange(n) / n, rtol=1e-6)
            np.testing.assert_allclose(f["t"][:], [0.05, 0.1], rtol=1e-6)
            assert f.attrs["nu"] > 0 and f.attrs["final_time"] == 0.1
            # The solution moved away from the initial condition.
            assert np.abs(u[:, -1] - a).max() > 1e-4


def test_generated_darcy_set_trains(tmp_path, eddy_cli):
    train = generate(eddy_cli, tmp_path, "darcy", "samples=8")
    test = generate(eddy_cli, tmp_path, "darcy", "seed=1", "samples=2", name="test")
    config = tmp_path / "fno.yaml"
    config.write_text(f"""data:
  train: {{file: {train}, input: a, output: u}}
  test: {{name: "12", file: {test}, input: a, output: u}}
model: {{type: fno, modes: [4, 4], width: 8, layers: 1, projection_width: 8}}
training: {{epochs: 1, batch_size: 4}}
output: {{dir: {tmp_path / "run"}}}
""")
    result = subprocess.run([str(eddy_cli), "train", str(config)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "test set 12: relative L2 error" in result.stdout


def test_a_dataset_is_regenerated_in_place_but_another_hdf5_file_is_kept(tmp_path, eddy_cli):
    # A reference dataset or a run's results at output.path were replaced without a word; a
    # dataset of eddy generate is replaced as before, and an earlier one's image goes with it.
    path = generate(eddy_cli, tmp_path, "darcy", "output.vtk=true")
    image = tmp_path / "darcy_sample0.vti"
    assert image.exists()
    generate(eddy_cli, tmp_path, "darcy", "seed=3")
    assert not image.exists()  # the earlier dataset's image, which output.vtk=false does not replace
    assert "solver: darcy" in eddy.read_hdf5(path, "config")  # a string dataset reads as a str

    reference = tmp_path / "reference.h5"
    with h5py.File(reference, "w") as f:
        f["u"] = np.ones(3)
    config = tmp_path / "darcy.yaml"
    refused = subprocess.run([str(eddy_cli), "generate", str(config), f"output.path={reference}", "--quiet"],
                             capture_output=True, text=True)
    assert refused.returncode != 0
    assert "exists and is not a dataset of eddy generate" in refused.stderr and "--overwrite" in refused.stderr
    with h5py.File(reference, "r") as f:
        np.testing.assert_array_equal(f["u"][:], np.ones(3))
    replaced = subprocess.run([str(eddy_cli), "generate", str(config), f"output.path={reference}", "--overwrite",
                               "--quiet"], capture_output=True, text=True)
    assert replaced.returncode == 0, replaced.stderr
    with h5py.File(reference, "r") as f:
        assert "a" in f and "u" in f
