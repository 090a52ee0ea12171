"""Every example config in examples/ loads and runs through the `eddy` command, for a few steps
and at a small size: `eddy check` and `eddy solve` for each PINN problem, `eddy generate` for
each dataset, and `eddy train` on the generated Navier-Stokes data for the FNO that needs it. The
operator examples with data in data/ train in test_solvers_api.py, the language model in
test_lm.py; examples/README-level accuracy is checked by the ctest `examples` label."""

import pathlib
import subprocess

import h5py
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PINN_EXAMPLES = sorted((ROOT / "examples" / "pinn").glob("*.yaml"))
DATASET_EXAMPLES = sorted((ROOT / "examples" / "operator").glob("*_data.yaml"))
# Small versions of each dataset: two samples on a coarse grid, a few time steps.
SMALL_DATASET = {
    "burgers_data": ["resolution=32", "batch=2", "time.final=0.01", "time.records=2"],
    "cahn_hilliard_data": ["resolution=16", "batch=2", "time.final=1.0e-4", "time.records=2"],
    "darcy_data": ["resolution=16"],
    "ns2d_data": ["resolution=16", "batch=2", "time.final=0.1", "time.records=2"],
    "phase_field_data": ["resolution=16", "batch=2", "time.final=0.1", "time.records=2"],
}


def eddy(eddy_cli, *arguments):
    """Runs the `eddy` command; fails the test with its output unless it exits with 0."""
    run = subprocess.run([str(eddy_cli), *map(str, arguments)], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, f"eddy {' '.join(map(str, arguments))} exited {run.returncode}:\n{run.stderr}"
    return run


def test_every_example_is_covered():
    assert len(PINN_EXAMPLES) >= 6 and len(DATASET_EXAMPLES) >= 5
    assert {path.stem for path in DATASET_EXAMPLES} == set(SMALL_DATASET)


@pytest.mark.parametrize("example", PINN_EXAMPLES, ids=lambda path: path.stem)
def test_pinn_example_checks_and_trains(eddy_cli, tmp_path, example):
    checked = eddy(eddy_cli, "check", example)
    assert checked.stdout.startswith(f"{example}: valid.")
    eddy(eddy_cli, "solve", example, "--eager", "--quiet", "training.adam.steps=2", "training.lbfgs.iterations=1",
         "validation.every=0", "output.checkpoint_every=0", f"output.dir={tmp_path}")
    with h5py.File(tmp_path / "solution.h5") as results:
        assert results["history/step"][-1] == 3  # two Adam steps and one L-BFGS iteration
        assert "inside" in results["fields"] and len(results["fields"]) >= 2  # the mask and a field


@pytest.mark.parametrize("example", DATASET_EXAMPLES, ids=lambda path: path.stem)
def test_dataset_example_generates(eddy_cli, tmp_path, example):
    output = tmp_path / "data.h5"
    eddy(eddy_cli, "generate", example, "--quiet", "samples=2", *SMALL_DATASET[example.stem],
         f"output.path={output}", "output.vtk=false")
    with h5py.File(output) as data:
        leading = {data[name].shape[0] for name in ("a", "u") if name in data}
        assert leading == {2}, f"datasets of {example.name}: {list(data)}"


def test_ns2d_fno_trains_on_generated_data(eddy_cli, tmp_path):
    data = tmp_path / "ns2d.h5"
    eddy(eddy_cli, "generate", ROOT / "examples/operator/ns2d_data.yaml", "--quiet", "samples=4",
         *SMALL_DATASET["ns2d_data"], f"output.path={data}", "output.vtk=false")
    eddy(eddy_cli, "train", ROOT / "examples/operator/ns2d_fno.yaml", "--quiet", "training.epochs=1",
         "training.batch_size=2", "model.width=4", "model.layers=1", "model.projection_width=4", "model.modes=[2, 2]",
         f"data.train.file={data}", f'data.test=[{{name: "16", file: "{data}", input: a, output: u}}]',
         f"output.dir={tmp_path / 'run'}")
    assert (tmp_path / "run" / "predictions.h5").exists()
