"""Every geometry type and every condition type of a PINN config (docs/config.md), written in
YAML and run through `eddy solve` for two steps: the run must finish, report each condition's
loss term, and have sampled its points where the config says (inside the shape, on the selected
boundary), as read back from solution.h5."""

import pathlib
import subprocess

import h5py
import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

RECTANGLE = "{type: rectangle, min: [0, 0], max: [2, 1]}"
# name -> (space, coordinates or None, output grid, inside(points) and on_boundary(points) tests)
GEOMETRIES = {
    "interval": ("{type: interval, min: -1, max: 3}", None, [9],
                 lambda p: (p[:, 0] >= -1) & (p[:, 0] <= 3), lambda p: np.isclose(p[:, 0], -1) | np.isclose(p[:, 0], 3)),
    "rectangle": (RECTANGLE, None, [5, 5],
                  lambda p: (p >= 0).all(1) & (p[:, 0] <= 2) & (p[:, 1] <= 1),
                  lambda p: np.isclose(p[:, 0], 0) | np.isclose(p[:, 0], 2) | np.isclose(p[:, 1], 0) | np.isclose(p[:, 1], 1)),
    "box": ("{type: box, min: [0, 0, 0], max: [1, 1, 1]}", None, [3, 3, 3],
            lambda p: ((p >= 0) & (p <= 1)).all(1), lambda p: (np.isclose(p, 0) | np.isclose(p, 1)).any(1)),
    "hypercube": ("{type: hypercube, min: [0, 0, 0, 0], max: [1, 1, 1, 1]}", "[a, b, c, e]", [2, 2, 2, 2],
                  lambda p: ((p >= 0) & (p <= 1)).all(1), lambda p: (np.isclose(p, 0) | np.isclose(p, 1)).any(1)),
    "disk": ("{type: disk, center: [1, 0], radius: 2}", None, [5, 5],
             lambda p: np.hypot(p[:, 0] - 1, p[:, 1]) <= 2 + 1e-5, lambda p: np.isclose(np.hypot(p[:, 0] - 1, p[:, 1]), 2)),
    "sphere": ("{type: sphere, center: [0, 0, 0], radius: 1}", None, [3, 3, 3],
               lambda p: np.linalg.norm(p, axis=1) <= 1 + 1e-5, lambda p: np.isclose(np.linalg.norm(p, axis=1), 1)),
    "polygon": ("{type: polygon, vertices: [[0, 0], [2, 0], [0, 2]]}", None, [5, 5],
                lambda p: (p >= -1e-5).all(1) & (p.sum(1) <= 2 + 1e-5),
                lambda p: np.isclose(p[:, 0], 0) | np.isclose(p[:, 1], 0) | np.isclose(p.sum(1), 2)),
    "union": ("{type: union, a: {type: rectangle, min: [0, 0], max: [1, 1]}, b: {type: disk, center: [1, 1], radius: 0.5}}",
              None, [5, 5], lambda p: ((p >= 0).all(1) & (p <= 1).all(1)) | (np.hypot(p[:, 0] - 1, p[:, 1] - 1) <= 0.5 + 1e-5),
              None),
    "intersection": ("{type: intersection, a: {type: rectangle, min: [0, 0], max: [1, 1]}, b: {type: disk, center: [0, 0], radius: 1}}",
                     None, [5, 5], lambda p: (p >= -1e-5).all(1) & (np.hypot(p[:, 0], p[:, 1]) <= 1 + 1e-5), None),
    "difference": ("{type: difference, a: {type: rectangle, min: [-1, -1], max: [1, 1]}, b: {type: rectangle, min: [0, 0], max: [1, 1]}}",
                   None, [5, 5], lambda p: ((p >= -1) & (p <= 1)).all(1) & ~((p > 1e-5).all(1)), None),
}


def solve(eddy_cli, tmp_path, config):
    path = tmp_path / "problem.yaml"
    path.write_text(config)
    run = subprocess.run([str(eddy_cli), "solve", str(path), "--eager", "--quiet", "training.adam.steps=2",
                          "training.lbfgs.iterations=0", f"output.dir={tmp_path / 'run'}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"{config}\n{run.stderr}"
    return h5py.File(tmp_path / "run" / "solution.h5")


@pytest.mark.parametrize("name", GEOMETRIES)
def test_geometry_samples_inside_and_on_its_boundary(eddy_cli, tmp_path, name):
    space, coordinates, grid, inside, on_boundary = GEOMETRIES[name]
    names = f"\n  coordinates: {coordinates}" if coordinates else ""  # an empty key is refused
    config = f"""
geometry:
  space: {space}{names}
fields: [u]
equations:
  pde: laplacian(u) + 1
conditions:
  pde: {{type: interior, equation: pde, points: 64}}
  edge: {{type: dirichlet, field: u, value: 0, points: 64}}
model: {{architecture: mlp, width: 8, depth: 2, activation: tanh}}
output: {{grid: {grid}, checkpoint_every: 0, vtk: false}}
"""
    with solve(eddy_cli, tmp_path, config) as results:
        assert np.isfinite(results["history/loss_pde"][()]).all() and np.isfinite(results["history/loss_edge"][()]).all()
        interior = results["points/pde/coordinates"][()]
        boundary = results["points/edge/coordinates"][()]
        assert interior.shape == (64, len(grid)) and boundary.shape == (64, len(grid))
        assert inside(interior).all(), interior[~inside(interior)][:5]
        assert inside(boundary).all(), boundary[~inside(boundary)][:5]
        if on_boundary is not None:
            assert on_boundary(boundary).all(), boundary[~on_boundary(boundary)][:5]


def test_every_condition_type(eddy_cli, tmp_path):
    observations = tmp_path / "observed.csv"
    rng = np.random.default_rng(3)
    xyt = rng.uniform([0, 0, 0], [2, 1, 1], (20, 3))
    np.savetxt(observations, np.column_stack([xyt, np.sin(xyt[:, 0])]), delimiter=",", header="x,y,t,u",
               comments="")
    config = f"""
geometry:
  space: {RECTANGLE}
  time: {{min: 0, max: 1}}
fields: [u]
equations:
  heat: u_t - 0.1*laplacian(u)
conditions:
  interior: {{type: interior, equation: heat, points: 64}}
  start: {{type: initial, field: u, value: sin(x), points: 32}}
  left: {{type: dirichlet, field: u, value: 0, faces: [left], points: 16}}
  right: {{type: neumann, field: u, value: 0, on: x == 2, points: 16}}
  bottom: {{type: robin, field: u, alpha: 1, beta: 2, value: 0, faces: [bottom], points: 16}}
  top: {{type: boundary, equation: u_y + n_y*u, on: y == 1, points: 16}}
  wrap: {{type: periodic, axis: y, points: 16}}
  observed: {{type: data, file: {observations}, fields: {{u: u}}}}
model: {{architecture: mlp, width: 8, depth: 2, activation: tanh}}
output: {{grid: [4, 4, 3], checkpoint_every: 0, vtk: false}}
"""
    with solve(eddy_cli, tmp_path, config) as results:
        for name in ("interior", "start", "left", "right", "bottom", "top", "wrap", "observed"):
            assert np.isfinite(results[f"history/loss_{name}"][()]).all(), name
        start = results["points/start/coordinates"][()]
        assert np.allclose(start[:, 2], 0)  # t = t0
        assert np.allclose(results["points/left/coordinates"][()][:, 0], 0)
        assert np.allclose(results["points/right/coordinates"][()][:, 0], 2)
        assert np.allclose(results["points/bottom/coordinates"][()][:, 1], 0)
        assert np.allclose(results["points/top/coordinates"][()][:, 1], 1)
        assert results["points/observed/coordinates"].shape[0] == 20
