"""Observations and validation references read from CSV and NPY files written by NumPy: the same
values as from HDF5 give the same losses and metrics, and bad files fail naming file and column."""

import subprocess

import h5py
import numpy as np
import pytest

PROBLEM = """
dtype: float64
geometry:
  space: {{type: interval, min: 0, max: 1}}
  time: {{min: 0, max: 0.5}}
fields: [u, v]
conditions:
  pde: {{type: interior, equation: u_t - 0.1*u_xx, points: 32}}
  observed: {{type: data, file: {data_file}, {data_keys}}}
model: {{width: 8, depth: 2}}
training:
  adam: {{steps: 3, learning_rate: 0.01}}
  log_every: 1
validation:
  reference: {{file: {reference_file}, {reference_keys}}}
output: {{grid: [5, 3], vtk: false}}
"""

# Key syntax per format: HDF5 datasets, CSV column names, NPY column indices (docs/config.md).
KEYS = {
    "h5": ("fields: {u: u, v: v}", "points: points, fields: {u: u}"),
    "csv": ("fields: {u: u, v: v}", "points: 'x,t', fields: {u: u}"),
    "npy": ("fields: {u: 2, v: 3}", "points: '0:2', fields: {u: 2}"),
}


@pytest.fixture(scope="module")
def observations():
    rng = np.random.default_rng(3)
    points = np.column_stack([rng.uniform(0, 1, 40), rng.uniform(0, 0.5, 40)])
    u = np.exp(-0.1 * np.pi**2 * points[:, 1]) * np.sin(np.pi * points[:, 0])
    v = np.cos(points[:, 0]) + 1e-3 * rng.standard_normal(40)
    return points, u, v


def write(directory, kind, points, u, v):
    if kind == "h5":
        path = directory / "obs.h5"
        with h5py.File(path, "w") as f:
            f["points"], f["u"], f["v"] = points, u, v
    elif kind == "csv":
        path = directory / "obs.csv"
        np.savetxt(path, np.column_stack([points, u, v]), delimiter=",", header="x,t,u,v", comments="",
                   fmt="%.17g")
    else:
        path = directory / "obs.npy"
        np.save(path, np.column_stack([points, u, v]))
    return path


def solve(tmp_path, eddy_cli, data_file, reference_file, kind, reference_kind=None):
    reference_kind = reference_kind or kind
    config = tmp_path / f"problem_{kind}_{reference_kind}.yaml"
    config.write_text(PROBLEM.format(data_file=data_file, data_keys=KEYS[kind][0], reference_file=reference_file,
                                     reference_keys=KEYS[reference_kind][1]))
    run = tmp_path / f"run_{kind}_{reference_kind}"
    return subprocess.run([str(eddy_cli), "solve", str(config), f"output.dir={run}", "--quiet"],
                          capture_output=True, text=True), run


@pytest.mark.parametrize("kind", ["csv", "npy"])
def test_csv_and_npy_give_the_same_losses_and_metrics_as_hdf5(tmp_path, eddy_cli, observations, kind):
    runs = {}
    for k in ("h5", kind):
        path = write(tmp_path, k, *observations)
        result, run = solve(tmp_path, eddy_cli, path, path, k)
        assert result.returncode == 0, result.stderr
        runs[k] = run / "solution.h5"
    with h5py.File(runs["h5"]) as a, h5py.File(runs[kind]) as b:
        assert a["history/loss_observed"].shape == (4,)  # steps 1..3 and the final
        np.testing.assert_array_equal(a["history/loss_observed"][:], b["history/loss_observed"][:])
        np.testing.assert_array_equal(a["metrics/u_relative_l2"][:], b["metrics/u_relative_l2"][:])
        assert a.attrs["u_relative_l2"] > 0


def test_float32_npy_is_read_and_cast_to_the_problem_dtype(tmp_path, eddy_cli, observations):
    points, u, v = observations
    reference = write(tmp_path, "h5", points, u, v)
    single = tmp_path / "single.npy"
    np.save(single, np.column_stack([points, u, v]).astype(np.float32))
    runs = {}
    for kind, path in (("h5", reference), ("npy", single)):
        result, runs[kind] = solve(tmp_path, eddy_cli, path, reference, kind, "h5")
        assert result.returncode == 0, result.stderr
    with h5py.File(runs["h5"] / "solution.h5") as a, h5py.File(runs["npy"] / "solution.h5") as b:
        exact, rounded = a["history/loss_observed"][:], b["history/loss_observed"][:]
        np.testing.assert_allclose(rounded, exact, rtol=1e-5)
        assert not np.array_equal(rounded, exact)  # the float32 rounding is there, so the file was used


BAD_FILES = [
    # (file name, contents or array, data keys, message fragments)
    ("bad.csv", "x,t,u\n0.1,0.2,0.3\n0.4,0.5\n", "fields: {u: u}",
     ["bad.csv:3: 2 values, but the header names 3 columns (x, t, u)"]),
    ("word.csv", "x,t,u\n0.1,0.2,abc\n", "fields: {u: u}", ["word.csv:2: column 'u' holds 'abc', which is not a number"]),
    ("nocol.csv", "x,t,w\n0.1,0.2,0.3\n", "fields: {u: u}", ["nocol.csv: no column 'u' (columns: x, t, w)",
                                                             "conditions.observed.fields.u"]),
    ("nox.csv", "y,t,u\n0.1,0.2,0.3\n", "fields: {u: u}", ["nox.csv: no column 'x' (columns: y, t, u)"]),
    ("complex.npy", np.ones((4, 3), dtype=np.complex128), "fields: {u: 2}",
     ["complex.npy: dtype '<c16' is not supported"]),
    ("fortran.npy", np.asfortranarray(np.ones((4, 3))), "fields: {u: 2}",
     ["fortran.npy: Fortran-ordered arrays are not supported"]),
    ("big.npy", np.ones((4, 3), dtype=">f8"), "fields: {u: 2}", ["big.npy: dtype '>f8' is big-endian"]),
    ("cube.npy", np.ones((4, 3, 2)), "fields: {u: 2}", ["cube.npy: the array is 3-D with shape [4, 3, 2]"]),
    ("empty.npy", np.ones((0, 4)), "fields: {u: 2}", ["empty.npy: no rows of values (the array has shape [0, 4])"]),
    ("empty.csv", "x,t,u\n", "fields: {u: u}", ["empty.csv: no rows of values below the header"]),
    ("range.npy", np.ones((4, 3)), "fields: {u: 5}",
     ["range.npy: column 5 (in '5') is out of range; the array has 3 columns", "conditions.observed.fields.u"]),
    ("syntax.npy", np.ones((4, 3)), "fields: {u: u}", ["syntax.npy: 'u' does not select columns"]),
    ("obs.txt", "x,t,u\n", "fields: {u: u}", ["obs.txt: unknown file type '.txt' (supported: .h5/.hdf5, .csv, .npy)",
                                              "conditions.observed.file"]),
]


@pytest.mark.parametrize("name,contents,keys,messages", BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_bad_files_fail_naming_file_and_column(tmp_path, eddy_cli, name, contents, keys, messages):
    path = tmp_path / name
    if isinstance(contents, str):
        path.write_text(contents)
    else:
        np.save(path, contents)
    config = tmp_path / "problem.yaml"
    config.write_text(PROBLEM.format(data_file=path, data_keys=keys, reference_file=path,
                                     reference_keys="fields: {u: u}"))
    result = subprocess.run([str(eddy_cli), "check", str(config)], capture_output=True, text=True)
    assert result.returncode == 1
    for message in messages:
        assert message in result.stderr, result.stderr


def test_a_reference_with_values_outside_the_domain_is_refused(tmp_path, eddy_cli, observations):
    # It was scored there: a reference on [0, 2] for a problem on [0, 1] reported 0.61 for 1.2e-5.
    data = write(tmp_path, "h5", *observations)
    points, u, _ = observations
    wide = points.copy()
    wide[:5, 1] += 1.0  # t past geometry.time's 0.5
    reference = tmp_path / "wide.h5"
    with h5py.File(reference, "w") as f:
        f["points"], f["u"] = wide, u
    result, _ = solve(tmp_path, eddy_cli, data, reference, "h5")
    assert result.returncode == 1
    assert "5 of the reference's 40 points with values lie outside the domain" in result.stderr, result.stderr
    # eddy check finds it too (it passed the file), at the key.
    checked = subprocess.run([str(eddy_cli), "check", str(tmp_path / "problem_h5_h5.yaml")], capture_output=True,
                             text=True)
    assert checked.returncode == 1
    assert "validation.reference.file: " in checked.stderr and "lie outside the domain" in checked.stderr, checked.stderr
    # Marked NaN there, they are left out, as documented.
    u_marked = u.copy()
    u_marked[:5] = np.nan
    with h5py.File(reference, "w") as f:
        f["points"], f["u"] = wide, u_marked
    result, _ = solve(tmp_path, eddy_cli, data, reference, "h5")
    assert result.returncode == 0, result.stderr


def test_a_bad_reference_file_fails_naming_file_and_column(tmp_path, eddy_cli, observations):
    data = write(tmp_path, "h5", *observations)
    reference = tmp_path / "ref.csv"
    reference.write_text("x,t,w\n0.1,0.2,0.3\n")
    result, _ = solve(tmp_path, eddy_cli, data, reference, "h5", "csv")
    assert result.returncode == 1
    assert "ref.csv: no column 'u' (columns: x, t, w)" in result.stderr
