"""The ParaView files of a small `eddy solve` run, read back with VTK's own readers (the `vtk`
wheel, a newer VTK than the one that wrote them) and checked against solution.h5 read with h5py."""

import subprocess

import h5py
import numpy as np
import pytest

vtk = pytest.importorskip("vtk", reason="the vtk wheel is missing: pip install -r tests/python/requirements.txt")
from vtk.util.numpy_support import vtk_to_numpy  # noqa: E402

PROBLEM = """
dtype: float64
geometry:
  space: {{type: rectangle, min: [0, -1], max: [2, 1]}}
  {time}
fields: [u, v]
conditions:
  pde: {{type: interior, equation: {equation}, points: 48}}
  walls: {{type: dirichlet, field: u, points: 24}}
  {initial}
model: {{width: 8, depth: 2}}
training:
  adam: {{steps: 5, learning_rate: 0.01}}
output: {{grid: {grid}}}
"""


def solve(tmp_path, eddy_cli, name, time):
    text = PROBLEM.format(
        time="time: {min: 0.5, max: 1.5}" if time else "",
        equation="u_t - laplacian(u) + v" if time else "laplacian(u) + v",
        initial="start: {type: initial, field: u, value: x*y, points: 16}" if time else "",
        grid="[5, 4, 3]" if time else "[7, 6]")
    config = tmp_path / f"{name}.yaml"
    config.write_text(text)
    run = tmp_path / name
    result = subprocess.run([str(eddy_cli), "solve", str(config), f"output.dir={run}", "--quiet"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return run


def read_image(path):
    reader = vtk.vtkXMLImageDataReader()
    reader.SetFileName(str(path))
    reader.Update()
    assert reader.GetErrorCode() == 0, path
    return reader.GetOutput()


def point_arrays(data):
    values = data.GetPointData()
    return {values.GetArrayName(i): vtk_to_numpy(values.GetArray(i)) for i in range(values.GetNumberOfArrays())}


def check_image(image, h5, fields, shape):
    """`fields` maps a name to its values on the h5 grid, [nx, ny] (C order: y fastest)."""
    assert image.GetDimensions() == (shape[0], shape[1], 1)
    x, y = h5["coordinates/x"][:], h5["coordinates/y"][:]
    np.testing.assert_allclose(image.GetOrigin()[:2], [x[0], y[0]])
    np.testing.assert_allclose(image.GetSpacing()[:2], [x[1] - x[0], y[1] - y[0]])
    arrays = point_arrays(image)
    assert set(arrays) == set(fields)
    for name, expected in fields.items():
        assert arrays[name].shape == (shape[0] * shape[1],), name
        # VTK images run x fastest, the HDF5 grid runs its last axis fastest.
        np.testing.assert_allclose(arrays[name].reshape(shape[1], shape[0]).T, expected, rtol=1e-12, atol=1e-14,
                                   err_msg=name)


def check_points(path, h5, conditions, columns):
    reader = vtk.vtkXMLPolyDataReader()
    reader.SetFileName(str(path))
    reader.Update()
    cloud = reader.GetOutput()
    coordinates = np.concatenate([h5[f"points/{c}/coordinates"][:] for c in conditions])
    assert cloud.GetNumberOfPoints() == len(coordinates) == cloud.GetNumberOfVerts()
    points = vtk_to_numpy(cloud.GetPoints().GetData())
    np.testing.assert_allclose(points[:, :columns], coordinates, rtol=1e-12)
    assert not points[:, columns:].any()  # padded with zeros up to 3-D
    arrays = point_arrays(cloud)
    # Every coordinate as an array of its own too, t included (a point holds at most three).
    names = ["x", "y", "t"][:columns]
    assert set(arrays) == {"u", "v", "condition", *names}
    for k, name in enumerate(names):
        np.testing.assert_allclose(arrays[name], coordinates[:, k], rtol=1e-12, err_msg=name)
    tags = np.concatenate([np.full(len(h5[f"points/{c}/coordinates"]), k) for k, c in enumerate(conditions)])
    np.testing.assert_array_equal(arrays["condition"], tags)
    for field in ("u", "v"):
        expected = np.concatenate([h5[f"points/{c}/{field}"][:] for c in conditions])
        np.testing.assert_allclose(arrays[field], expected, rtol=1e-12, atol=1e-14, err_msg=field)


def test_steady_problem_image_and_points_match_the_hdf5_file(tmp_path, eddy_cli):
    run = solve(tmp_path, eddy_cli, "steady", time=False)
    with h5py.File(run / "solution.h5") as h5:
        fields = {name: h5[f"fields/{name}"][:] for name in ("u", "v")}
        fields["inside"] = h5["fields/inside"][:].astype(float)
        check_image(read_image(run / "solution.vti"), h5, fields, (7, 6))
        check_points(run / "points.vtp", h5, ["pde", "walls"], columns=2)
    assert not (run / "solution.pvd").exists()


def test_time_series_is_a_pvd_collection_of_images_one_per_time(tmp_path, eddy_cli):
    run = solve(tmp_path, eddy_cli, "evolving", time=True)
    parser = vtk.vtkXMLDataParser()
    parser.SetFileName(str(run / "solution.pvd"))
    assert parser.Parse() == 1
    root = parser.GetRootElement()
    assert root.GetName() == "VTKFile" and root.GetAttribute("type") == "Collection"
    collection = root.GetNestedElement(0)
    assert collection.GetName() == "Collection"
    entries = [collection.GetNestedElement(i) for i in range(collection.GetNumberOfNestedElements())]
    with h5py.File(run / "solution.h5") as h5:
        t = h5["coordinates/t"][:]
        np.testing.assert_allclose(t, [0.5, 1.0, 1.5])
        assert len(entries) == len(t)
        for k, entry in enumerate(entries):
            assert entry.GetName() == "DataSet"
            np.testing.assert_allclose(float(entry.GetAttribute("timestep")), t[k])
            fields = {name: h5[f"fields/{name}"][:, :, k] for name in ("u", "v")}
            fields["inside"] = h5["fields/inside"][:, :, k].astype(float)
            check_image(read_image(run / entry.GetAttribute("file")), h5, fields, (5, 4))
        check_points(run / "points.vtp", h5, ["pde", "walls", "start"], columns=3)


def test_more_than_three_space_dimensions_write_no_paraview_files(tmp_path, eddy_cli):
    # VTK images have at most three axes: a 4-D problem trained, then failed writing its image and
    # lost its metrics and points.vtp.
    config = tmp_path / "hypercube.yaml"
    config.write_text("""
geometry:
  space: {type: hypercube, min: [0, 0, 0, 0], max: [1, 1, 1, 1]}
  coordinates: [a, b, c, d]
fields: [u]
conditions:
  pde: {type: interior, equation: laplacian(u) + 1, points: 64}
  walls: {type: dirichlet, field: u, value: 0, points: 32}
model: {width: 8, depth: 2}
training: {adam: {steps: 2}}
output: {grid: 3}
""")
    run = tmp_path / "run"
    result = subprocess.run([str(eddy_cli), "solve", str(config), f"output.dir={run}", "--quiet"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "(no ParaView files for 4 spatial dimensions)" in result.stdout
    assert sorted(p.name for p in run.iterdir()) == ["checkpoint.safetensors", "config.yaml", "solution.h5"]


def test_a_new_run_in_a_used_folder_leaves_none_of_the_old_runs_paraview_files(tmp_path, eddy_cli):
    # A run into a folder holding a longer series left its extra slices, which ParaView reads as
    # one series with the new ones; a run without VTK output left every old file beside solution.h5.
    run = solve(tmp_path, eddy_cli, "reused", time=True)
    (run / "solution_7.vti").write_text("an earlier run's slice")
    (run / "solution_1_piece3.vti").write_text("an earlier run's piece")
    (run / "notes.txt").write_text("the user's own file")
    config = tmp_path / "reused.yaml"
    subprocess.run([str(eddy_cli), "solve", str(config), f"output.dir={run}", "--quiet"], check=True,
                   capture_output=True)
    assert sorted(p.name for p in run.glob("solution*")) == [
        "solution.h5", "solution.pvd", "solution_0.vti", "solution_1.vti", "solution_2.vti"]
    subprocess.run([str(eddy_cli), "solve", str(config), f"output.dir={run}", "output.vtk=false", "--quiet"],
                   check=True, capture_output=True)
    assert not list(run.glob("*.vt?")) and not list(run.glob("*.pvd"))
    assert (run / "notes.txt").exists() and (run / "solution.h5").exists()
