"""Every example config in examples/ loads and runs through the `eddy` command, for a few steps
and at a small size: `eddy check` and `eddy solve` for each PINN problem, `eddy generate` for
each dataset, and `eddy train` on the generated Navier-Stokes data for the FNO that needs it;
`eddy check` for every operator, dataset and language-model file too, each read as its kind. The
operator examples with data in data/ train in test_solvers_api.py, the language model in
test_lm.py; examples/README-level accuracy is checked by the ctest `examples` label."""

import pathlib
import shutil
import subprocess

import h5py
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PINN_EXAMPLES = sorted((ROOT / "examples" / "pinn").glob("*.yaml"))
DATASET_EXAMPLES = sorted((ROOT / "examples" / "operator").glob("*_data.yaml"))
# ns2d_fno.yaml trains on data that ns2d_data.yaml generates: it is checked after generating it.
OPERATOR_EXAMPLES = sorted(set((ROOT / "examples" / "operator").glob("*.yaml")) - set(DATASET_EXAMPLES)
                           - {ROOT / "examples" / "operator" / "ns2d_fno.yaml"})
LM_EXAMPLES = sorted((ROOT / "examples" / "lm").glob("*.yaml"))
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
    # The first-order optimiser's section is the one the file trains with (adam, or soap).
    optimizer = "soap" if "\n  optimizer: soap\n" in checked.stdout else "adam"
    eddy(eddy_cli, "solve", example, "--eager", "--quiet", f"training.{optimizer}.steps=2",
         "training.lbfgs.iterations=1", "validation.every=0", "output.checkpoint_every=0", f"output.dir={tmp_path}")
    with h5py.File(tmp_path / "solution.h5") as results:
        assert results["history/step"][-1] == 3  # two Adam steps and one L-BFGS iteration
        assert "inside" in results["fields"] and len(results["fields"]) >= 2  # the mask and a field


@pytest.mark.parametrize("example", OPERATOR_EXAMPLES, ids=lambda path: path.stem)
def test_operator_example_checks(eddy_cli, example):
    checked = eddy(eddy_cli, "check", example)
    first_line = checked.stdout.splitlines()[0]
    assert first_line.startswith(f"{example}: valid. ") and " training samples (model input [N, " in first_line
    assert "\ntraining:\n" in checked.stdout  # the config, resolved


@pytest.mark.parametrize("example", DATASET_EXAMPLES, ids=lambda path: path.stem)
def test_dataset_example_checks(eddy_cli, example):
    checked = eddy(eddy_cli, "check", example)
    assert checked.stdout.startswith(f"{example}: valid. ") and " samples at resolution " in checked.stdout


@pytest.mark.parametrize("example", LM_EXAMPLES, ids=lambda path: path.stem)
def test_language_model_example_checks(eddy_cli, example):
    checked = eddy(eddy_cli, "check", example)
    assert checked.stdout.startswith(f"{example}: a GPT-2 language model, context ")
    assert " corpus file" in checked.stdout.splitlines()[0]
    # A pattern that matches nothing fails the check, as it would fail training.
    run = subprocess.run([str(eddy_cli), "lm", "check", str(example), "data.files=nothing-here*"],
                         capture_output=True, text=True)
    assert run.returncode == 1 and "nothing-here*' matches no file" in run.stderr, run.stderr


def test_check_reads_each_kind_with_its_own_reader(eddy_cli, tmp_path):
    # A misspelt key is reported by the reader of the file's kind, not as a missing geometry.
    operator = "data: {file: a.h5, train: {input: a, output: u}, test: {input: a, output: u}}\nmodel: {modes: [4]}\n"
    (tmp_path / "operator.yaml").write_text(operator + "trainig: {}\n")
    (tmp_path / "dataset.yaml").write_text("solver: darcy\noutput: {path: d.h5}\nsamples: 2\nsedd: 1\n")
    for name, key in (("operator.yaml", "trainig"), ("dataset.yaml", "sedd")):
        run = subprocess.run([str(eddy_cli), "check", str(tmp_path / name)], capture_output=True, text=True)
        assert run.returncode == 1 and f"unknown key '{key}'" in run.stderr, run.stderr
    # The check opens the training file, as `eddy train` does before its first epoch.
    (tmp_path / "operator.yaml").write_text(operator)
    run = subprocess.run([str(eddy_cli), "check", str(tmp_path / "operator.yaml")], capture_output=True, text=True,
                         cwd=tmp_path)
    assert run.returncode == 1 and "data.train: cannot open HDF5 file " in run.stderr, run.stderr
    (tmp_path / "nothing.yaml").write_text("fields: [u]\n")
    run = subprocess.run([str(eddy_cli), "check", str(tmp_path / "nothing.yaml")], capture_output=True, text=True)
    assert run.returncode == 1 and "missing required key 'geometry'" in run.stderr


def test_files_are_read_beside_the_yaml_and_written_in_the_working_directory(eddy_cli, tmp_path):
    def run(*arguments, cwd):
        return subprocess.run([str(eddy_cli), *map(str, arguments)], cwd=cwd, capture_output=True, text=True,
                              timeout=600)

    for example, data_file in (("pinn/burgers.yaml", "burgers1d.h5"), ("operator/darcy16.yaml", "darcy16.h5")):
        checked = run("check", ROOT / "examples" / example, cwd=tmp_path)
        assert checked.returncode == 0, checked.stderr
        assert f"file: {ROOT / 'data' / data_file}\n" in checked.stdout  # resolved, absolute
    # A path on the command line is relative to where it was typed (and the file must be there).
    reference = "validation.reference.file=data/burgers1d.h5"
    (tmp_path / "data").mkdir()
    shutil.copy(ROOT / "data/burgers1d.h5", tmp_path / "data")
    for cwd in (ROOT, tmp_path):
        checked = run("check", ROOT / "examples/pinn/burgers.yaml", reference, cwd=cwd)
        assert checked.returncode == 0 and f"file: {cwd / 'data/burgers1d.h5'}\n" in checked.stdout
    # The run folder (output.dir's default runs/burgers) is in the working directory, and eddy eval
    # reads the reference again from its config.yaml.
    solved = run("solve", ROOT / "examples/pinn/burgers.yaml", "--eager", "--quiet", "training.adam.steps=2",
                 "training.lbfgs.iterations=0", "conditions.pde.points=64", "validation.every=0", "output.grid=[8, 4]",
                 "output.vtk=false", cwd=tmp_path)
    assert solved.returncode == 0, solved.stderr
    assert (tmp_path / "runs/burgers/solution.h5").exists()
    evaluated = run("eval", "runs/burgers", cwd=tmp_path)
    assert evaluated.returncode == 0 and "u: relative L2 error" in evaluated.stdout, evaluated.stderr


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
    # Three samples to train on and the fourth held out.
    data_files = [f"data.train.file={data}", "data.train.samples=3",
                  f'data.test=[{{name: "16", file: "{data}", input: a, output: u, first: 3}}]']
    # The example's 12 modes need its 32-point grid; this small dataset's 16 points hold 8.
    checked = eddy(eddy_cli, "check", ROOT / "examples/operator/ns2d_fno.yaml", "model.modes=[8, 8]", *data_files)
    assert "valid. FNO from " in checked.stdout
    eddy(eddy_cli, "train", ROOT / "examples/operator/ns2d_fno.yaml", "--quiet", "training.epochs=1",
         "training.batch_size=2", "model.width=4", "model.layers=1", "model.projection_width=4", "model.modes=[2, 2]",
         *data_files, f"output.dir={tmp_path / 'run'}")
    assert (tmp_path / "run" / "predictions.h5").exists()
