"""A small `eddy solve` run, its results read back with h5py."""

import subprocess

import h5py
import numpy as np

PROBLEM = """
dtype: float64
geometry:
  space: {type: interval, min: 0, max: 1}
  time: {min: 0, max: 0.5}
fields: [u]
parameters: {kappa: 0.1}
conditions:
  pde: {type: interior, equation: u_t - kappa*u_xx, points: 64}
  start: {type: initial, field: u, value: sin(pi*x), points: 16}
  ends: {type: dirichlet, faces: [left, right], field: u, points: 16}
model: {width: 8, depth: 2}
training:
  adam: {steps: 30, learning_rate: 0.01}
  log_every: 10
validation:
  every: 15
  reference: {expressions: {u: exp(-kappa*pi^2*t)*sin(pi*x)}}
output: {grid: [11, 6]}
"""


def test_solution_file_reads_back_with_h5py(tmp_path, eddy_cli):
    config = tmp_path / "heat.yaml"
    config.write_text(PROBLEM)
    run = tmp_path / "run"
    result = subprocess.run([str(eddy_cli), "solve", str(config), f"output.dir={run}", "--quiet"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "relative L2 error" in result.stdout

    with h5py.File(run / "solution.h5", "r") as f:
        x, t = f["coordinates/x"][:], f["coordinates/t"][:]
        np.testing.assert_allclose(x, np.linspace(0, 1, 11))
        np.testing.assert_allclose(t, np.linspace(0, 0.5, 6))
        u = f["fields/u"][:]
        assert u.shape == (11, 6) and np.isfinite(u).all()
        assert f["fields/inside"][:].all()
        steps, loss = f["history/step"][:], f["history/loss"][:]
        np.testing.assert_array_equal(steps, [1, 10, 20, 30, 30])
        assert loss[-1] < loss[0]
        assert f["metrics/step"][:].tolist() == [15, 30]  # the final measurement is step 30's
        l2 = f["metrics/u_relative_l2"][:]
        assert np.isfinite(l2).all() and f.attrs["u_relative_l2"] == l2[-1]
        assert f["points/pde/coordinates"].shape == (64, 2)
        assert b"kappa: 0.1" in f["config"][()]
        assert len(f.attrs["config_hash"]) == 16

    # The checkpoint next to it loads in the reference safetensors package.
    from safetensors.numpy import load_file

    tensors = load_file(str(run / "checkpoint.safetensors"))
    assert any(name.startswith("model.") for name in tensors)
    assert "optimizer.adam.step" in tensors


def test_bad_config_exits_with_a_located_message(tmp_path, eddy_cli):
    config = tmp_path / "bad.yaml"
    config.write_text(PROBLEM.replace("width: 8", "widht: 8"))
    result = subprocess.run([str(eddy_cli), "check", str(config)], capture_output=True, text=True)
    assert result.returncode == 1
    assert f"{config}:12:9: " in result.stderr
    assert "unknown key 'widht' in model (did you mean 'width'?)" in result.stderr
