"""`eddy export` and `eddy predict` end to end: a short PINN run exported and evaluated at points
from HDF5 files gives the solver's own predictions; eddy.Predictor gives the same as the CLI; an
operator run exported and evaluated on a data file gives the trainer's own predictions, also from
datasets of other names (--input)."""

import json
import pathlib
import subprocess

import h5py
import numpy as np
import pytest

import eddy

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Two fields, one through a hard constraint with a learnable parameter, so the export has to
# carry the output transform and the parameter as well as the network.
PROBLEM = """
dtype: float32
geometry:
  space: {type: interval, min: 0, max: 1}
  time: {min: 0, max: 0.5}
fields: [u, v]
parameters: {kappa: {learnable: true, initial: 0.2}}
conditions:
  pde: {type: interior, equation: u_t - kappa*u_xx, points: 64}
  pair: {type: interior, equation: v - u*u, points: 64}
  start: {type: initial, field: u, value: sin(pi*x), points: 16}
model: {width: 8, depth: 2, output_transform: {u: x*(1 - x)*net_u + kappa*t}}
training:
  adam: {steps: 20, learning_rate: 0.01}
output: {grid: [13, 7], vtk: false}
"""


def run(*args):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def solved(tmp_path_factory, eddy_cli):
    folder = tmp_path_factory.mktemp("export")
    config = folder / "problem.yaml"
    config.write_text(PROBLEM)
    result = run(eddy_cli, "solve", config, f"output.dir={folder / 'run'}", "--quiet")
    assert result.returncode == 0, result.stderr
    return folder


@pytest.fixture(scope="module")
def artifact(solved, eddy_cli):
    # 16 rows per batch: the 91 grid points take five full batches and a padded one.
    result = run(eddy_cli, "export", solved / "run", "--batch", 16)
    assert result.returncode == 0, result.stderr
    assert "points [N, 2] (x, t) -> u, v" in result.stdout
    return solved / "run" / "export"


def test_export_writes_graph_weights_and_meta(artifact):
    meta = json.loads((artifact / "meta.json").read_text())
    assert meta["format"] == "eddy.predictor" and meta["version"] == 1
    assert meta["batch_size"] == 16 and meta["dtype"] == "float32"
    assert meta["inputs"] == [{"name": "points", "columns": ["x", "t"]}]
    assert [output["name"] for output in meta["outputs"]] == ["u", "v"]
    graph = json.loads((artifact / "graph.json").read_text())
    sources = {value["source"] for value in graph["values"]}
    assert {"input", "parameter", "node"} <= sources

    from safetensors.numpy import load_file

    weights = load_file(str(artifact / "weights.safetensors"))
    named = {value["tensor"] for value in graph["values"] if "tensor" in value}
    assert set(weights) == named


def test_predict_matches_the_solver_on_its_grid_and_points(solved, artifact, eddy_cli):
    with h5py.File(solved / "run" / "solution.h5", "r") as f:
        x, t = f["coordinates/x"][:], f["coordinates/t"][:]
        grid_fields = {name: f[f"fields/{name}"][:].ravel() for name in ("u", "v")}
        sampled = f["points/pde/coordinates"][:]
        sampled_fields = {name: f[f"points/pde/{name}"][:] for name in ("u", "v")}
    grid_x, grid_t = np.meshgrid(x, t, indexing="ij")  # the solver's C order, last axis fastest

    columns = solved / "columns.h5"  # one 1-D dataset per coordinate, of two dtypes (concat refused them)
    with h5py.File(columns, "w") as f:
        f["x"], f["t"] = grid_x.ravel(), grid_t.ravel().astype(np.float32)
    result = run(eddy_cli, "predict", artifact, columns)
    assert result.returncode == 0, result.stderr
    with h5py.File(solved / "columns.predictions.h5", "r") as f:
        assert set(f) == {"u", "v"}
        for name in ("u", "v"):
            assert f[name].dtype == np.float32 and f[name].shape == (91,)
            np.testing.assert_allclose(f[name][:], grid_fields[name], rtol=0, atol=1e-6)

    # The solution file itself: its points/pde/coordinates renamed into the artifact's `points`,
    # and columns from datasets of other names.
    result = run(eddy_cli, "predict", artifact, solved / "run" / "solution.h5", "--input",
                 "points=points/pde/coordinates", "--output", solved / "from_solution.h5")
    assert result.returncode == 0, result.stderr
    with h5py.File(solved / "from_solution.h5", "r") as f:
        for name in ("u", "v"):
            np.testing.assert_allclose(f[name][:], sampled_fields[name], rtol=0, atol=1e-6)
    renamed_columns = solved / "renamed_columns.h5"
    with h5py.File(renamed_columns, "w") as f:
        f["grid/x"], f["grid/t"] = grid_x.ravel(), grid_t.ravel()
    result = run(eddy_cli, "predict", artifact, renamed_columns, "--input", "x=grid/x", "--input", "t=grid/t")
    assert result.returncode == 0, result.stderr
    with h5py.File(solved / "renamed_columns.predictions.h5", "r") as f:
        np.testing.assert_allclose(f["u"][:], grid_fields["u"], rtol=0, atol=1e-6)

    points = solved / "points.h5"  # one 2-D dataset "points" [N, 2]
    with h5py.File(points, "w") as f:
        f["points"] = sampled
    out = solved / "at_points.h5"
    result = run(eddy_cli, "predict", artifact, points, "--output", out)
    assert result.returncode == 0, result.stderr
    with h5py.File(out, "r") as f:
        for name in ("u", "v"):
            np.testing.assert_allclose(f[name][:], sampled_fields[name], rtol=0, atol=1e-6)


def test_python_predictor_equals_the_cli(solved, artifact, eddy_cli):
    points = np.random.default_rng(0).uniform([0, 0], [1, 0.5], size=(50, 2))
    with h5py.File(solved / "random.h5", "w") as f:
        f["points"] = points
    result = run(eddy_cli, "predict", artifact, solved / "random.h5")
    assert result.returncode == 0, result.stderr

    predictor = eddy.Predictor.load(artifact)
    assert predictor.input_names == ["points"] and predictor.input_columns == [["x", "t"]]
    assert predictor.output_names == ["u", "v"] and predictor.batch_size == 16
    assert predictor.dtype == eddy.float32
    fields = predictor.predict(points)  # float64 NumPy rows take the model's dtype
    assert len(fields) == 2
    with h5py.File(solved / "random.predictions.h5", "r") as f:
        for name, values in zip(predictor.output_names, fields):
            np.testing.assert_array_equal(values.numpy(), f[name][:])
    expected = r"input 'points' must be \[N, 2\] float32 \(columns x, t\) for any N, got \[50, 2\] float64"
    with pytest.raises(eddy.Error, match=expected):
        predictor.predict(eddy.tensor(points))
    # As `eddy predict` reads a dataset: the imaginary parts were dropped, and a 0/255 byte mask
    # was read as 255 where the trainers read such data as bool.
    with pytest.raises(eddy.Error, match="predict: input 'points' is complex"):
        predictor.predict(points + 1j)
    with pytest.raises(eddy.Error, match="input 'points' holds 255 at element 1; a 1-byte integer input is read as bool"):
        predictor.predict(np.array([[0, 255], [1, 0]], dtype=np.uint8))
    # NaN coordinates gave NaN fields with nothing said, where training refuses such data.
    with pytest.raises(eddy.Error, match=r"input 'points' holds a non-finite value \(NaN or infinity, or a value "
                                         r"past float32's range cast to it\) at \[1, 0\] \(column x\)"):
        predictor.predict(np.array([[0.5, 0.25], [np.nan, 0.25]], dtype=np.float32))
    ones = predictor.predict(np.array([[0, 1], [1, 0]], dtype=np.uint8))
    np.testing.assert_array_equal(np.asarray(ones[0]), np.asarray(predictor.predict(np.array([[0.0, 1.0], [1.0, 0.0]]))[0]))


def test_errors_name_what_is_missing(solved, artifact, eddy_cli):
    with h5py.File(solved / "only_x.h5", "w") as f:
        f["x"] = np.zeros(3)
    result = run(eddy_cli, "predict", artifact, solved / "only_x.h5")
    assert result.returncode == 1
    assert ("has no dataset 'points' [N, 2] and no 1-D dataset t (the model's inputs are x, t); it holds: x"
            in result.stderr)

    with h5py.File(solved / "wide.h5", "w") as f:
        f["points"] = np.zeros((3, 3))
    result = run(eddy_cli, "predict", artifact, solved / "wide.h5")
    assert result.returncode == 1
    assert ("wide.h5: dataset 'points' has shape [3, 3], but the artifact's input 'points' takes [N, 2] (columns x, t)"
            in result.stderr)

    operator_run = solved / "operator_run"
    operator_run.mkdir()
    (operator_run / "config.yaml").write_text("data: {file: a.h5, train: {input: u, output: v}}\nmodel: {type: fno}\n")
    result = run(eddy_cli, "export", operator_run)  # read as an operator config, with its place
    assert result.returncode == 1 and "operator_run/config.yaml:1:7: data: missing required key 'test'" in result.stderr

    lm_run = solved / "lm_run"  # read as a language-model config: its own export command is named
    lm_run.mkdir()
    (lm_run / "config.yaml").write_text("data: {files: corpus.txt}\n")
    result = run(eddy_cli, "export", lm_run)
    assert result.returncode == 1 and "is a language-model run (`eddy lm train`); export it with `eddy lm export" \
        in result.stderr

    result = run(eddy_cli, "export", solved)
    assert result.returncode == 1 and "has no config.yaml" in result.stderr


def test_operator_run_exports_and_predicts_from_a_data_file(tmp_path, eddy_cli):
    # FNO-1D on Burgers: u0 [N, 16] -> u [N, 17, 16] (17 times as channels), one short epoch.
    run_dir = tmp_path / "fno"
    result = run(eddy_cli, "train", ROOT / "examples/operator/burgers_fno1d.yaml", "training.epochs=1",
                 f"data.file={ROOT / 'data/burgers_operator16.h5'}", f"output.dir={run_dir}", "output.vtk=false",
                 "--quiet")
    assert result.returncode == 0, result.stderr
    result = run(eddy_cli, "export", run_dir, "--batch", 64)
    assert result.returncode == 0, result.stderr
    assert "train/u0 [N, 16] -> train/u; traced at 64 rows per batch" in result.stdout

    # The test inputs, under the training input's name, as a data file of that layout holds them.
    with h5py.File(run_dir / "predictions.h5") as f:
        test_input = np.asarray(f["test/16/input"])
        trainer_prediction = np.asarray(f["test/16/prediction"])
    with h5py.File(tmp_path / "inputs.h5", "w") as f:
        f["train/u0"] = test_input
    result = run(eddy_cli, "predict", run_dir / "export", tmp_path / "inputs.h5", "--output", tmp_path / "out.h5")
    assert result.returncode == 0, result.stderr
    with h5py.File(tmp_path / "out.h5") as f:
        predicted = np.asarray(f["train/u"])
    assert predicted.shape == trainer_prediction.shape == (400, 17, 16)
    np.testing.assert_allclose(predicted, trainer_prediction, rtol=1e-4, atol=1e-5 * np.abs(trainer_prediction).max())

    # The same inputs where another file keeps them (test/u0): --input maps the artifact's input.
    with h5py.File(tmp_path / "elsewhere.h5", "w") as f:
        f["test/u0"] = test_input
        f["test/u0_wide"] = np.zeros((4, 17))
    result = run(eddy_cli, "predict", run_dir / "export", tmp_path / "elsewhere.h5", "--input", "train/u0=test/u0",
                 "--output", tmp_path / "renamed.h5")
    assert result.returncode == 0, result.stderr
    with h5py.File(tmp_path / "renamed.h5") as f:
        np.testing.assert_array_equal(np.asarray(f["train/u"]), predicted)

    result = run(eddy_cli, "predict", run_dir / "export", tmp_path / "elsewhere.h5", "--input", "train/u0=test/a")
    assert result.returncode == 1
    assert ("predict: --input train/u0=test/a: " + str(tmp_path / "elsewhere.h5") +
            " has no dataset 'test/a'; it holds: test/u0, test/u0_wide") in result.stderr
    result = run(eddy_cli, "predict", run_dir / "export", tmp_path / "elsewhere.h5", "--input", "train/u0=test/u0_wide")
    assert result.returncode == 1
    assert ("elsewhere.h5: dataset 'test/u0_wide' has shape [4, 17], but the artifact's input 'train/u0' takes "
            "[N, 16]") in result.stderr
    result = run(eddy_cli, "predict", run_dir / "export", tmp_path / "elsewhere.h5", "--input", "train/uo=test/u0")
    assert result.returncode == 1
    assert "'train/uo' is not an input of the artifact (did you mean 'train/u0'?); it takes: train/u0" in result.stderr
    result = run(eddy_cli, "predict", run_dir / "export", tmp_path / "elsewhere.h5", "--input", "test/u0")
    assert result.returncode == 2 and "expected NAME=DATASET, got 'test/u0'" in result.stderr

    # --output over the run's checkpoint or into the artifact replaced them without a word.
    checkpoint = (run_dir / "checkpoint.safetensors").read_bytes()
    result = run(eddy_cli, "predict", run_dir / "export", tmp_path / "inputs.h5", "--output",
                 run_dir / "checkpoint.safetensors")
    assert result.returncode == 1 and "exists and is not an HDF5 file" in result.stderr
    assert (run_dir / "checkpoint.safetensors").read_bytes() == checkpoint
    result = run(eddy_cli, "predict", run_dir / "export", tmp_path / "inputs.h5", "--output",
                 run_dir / "export" / "graph.json")
    assert result.returncode == 1 and "is inside the artifact" in result.stderr
    # An earlier predictions file is written over, as asked.
    result = run(eddy_cli, "predict", run_dir / "export", tmp_path / "inputs.h5", "--output", tmp_path / "out.h5")
    assert result.returncode == 0, result.stderr
    # Another HDF5 file (the run's results) only with --overwrite: it was replaced without a word.
    results = (run_dir / "predictions.h5").read_bytes()
    result = run(eddy_cli, "predict", run_dir / "export", tmp_path / "inputs.h5", "--output", run_dir / "predictions.h5")
    assert result.returncode == 1 and "exists and is not an earlier prediction of this artifact" in result.stderr
    assert (run_dir / "predictions.h5").read_bytes() == results
    # Nor a user's file whose datasets are named as the outputs are.
    with h5py.File(tmp_path / "out.h5") as f, h5py.File(tmp_path / "mine.h5", "w") as mine:
        f.copy(f["train"], mine, "train")
    mine_bytes = (tmp_path / "mine.h5").read_bytes()
    result = run(eddy_cli, "predict", run_dir / "export", tmp_path / "inputs.h5", "--output", tmp_path / "mine.h5")
    assert result.returncode == 1 and "exists and is not an earlier prediction of this artifact" in result.stderr
    assert (tmp_path / "mine.h5").read_bytes() == mine_bytes
    result = run(eddy_cli, "predict", run_dir / "export", tmp_path / "inputs.h5", "--output", tmp_path / "elsewhere.h5",
                 "--overwrite")
    assert result.returncode == 0, result.stderr
    with h5py.File(tmp_path / "elsewhere.h5") as f:
        assert list(f) == ["train"] and list(f["train"]) == ["u"]


def test_a_column_named_by_input_is_read_even_where_the_file_holds_points(solved, artifact, eddy_cli):
    # `--input x=...` was dropped silently when the file also held `points`: the prediction was at
    # the file's points.
    with h5py.File(solved / "run" / "solution.h5", "r") as f:
        sampled = f["points/pde/coordinates"][:5]
    mixed = solved / "mixed.h5"
    with h5py.File(mixed, "w") as f:
        f["points"] = sampled
        f["x_elsewhere"], f["t"] = sampled[::-1, 0], sampled[:, 1]
    wanted = solved / "wanted.h5"
    with h5py.File(wanted, "w") as f:
        f["points"] = np.stack([sampled[::-1, 0], sampled[:, 1]], axis=1)
    for inputs, options in ((mixed, ["--input", "x=x_elsewhere"]), (wanted, [])):
        result = run(eddy_cli, "predict", artifact, inputs, *options, "--output", solved / f"{inputs.stem}_out.h5")
        assert result.returncode == 0, result.stderr
    with h5py.File(solved / "mixed_out.h5", "r") as got, h5py.File(solved / "wanted_out.h5", "r") as expected:
        np.testing.assert_array_equal(got["u"][:], expected["u"][:])
    result = run(eddy_cli, "predict", artifact, mixed, "--input", "x=x_elsewhere", "--input", "points=points")
    assert result.returncode == 1
    assert "predict: --input names both the input 'points' and some of its columns (x, t)" in result.stderr


def test_export_to_a_file_names_the_option(solved, eddy_cli):
    # Writing into it failed with the file system's words alone.
    taken = solved / "taken.txt"
    taken.write_text("not a folder")
    result = run(eddy_cli, "export", solved / "run", "--output", taken)
    assert result.returncode != 0
    assert f"export: --output {taken} is a file, not a folder" in result.stderr
    # An artifact in the run folder outlived the run: the next run there left it, with old weights.
    result = run(eddy_cli, "export", solved / "run", "--output", solved / "run" / ".")
    assert result.returncode != 0
    assert "is the run folder itself, where a later run in that folder would leave it" in result.stderr
    result = run(eddy_cli, "export", solved / "run", "--output", solved / "run" / "new" / "..")
    assert "is the run folder itself" in result.stderr
    result = run(eddy_cli, "export", solved / "run", "--output", solved / "run" / "art")
    assert "is inside the run folder" in result.stderr
    # Under RUN_DIR/export it goes with that folder when a later run removes it.
    result = run(eddy_cli, "export", solved / "run", "--output", solved / "run" / "export" / "sub")
    assert result.returncode == 0, result.stderr


def test_a_one_coordinate_model_reads_points_stored_as_a_1d_array(tmp_path, eddy_cli):
    # The run's own coordinates/x, [N], was refused for a model taking [N, 1].
    config = tmp_path / "line.yaml"
    config.write_text("""
geometry: {space: {type: interval, min: 0, max: 1}}
fields: [u]
conditions:
  pde: {type: interior, equation: u_xx + pi^2*sin(pi*x), points: 32}
  ends: {type: dirichlet, on: x == 0 || x == 1, field: u, value: 0, points: 2}
model: {width: 8, depth: 2}
training: {adam: {steps: 5}}
output: {grid: [9], vtk: false}
""")
    assert run(eddy_cli, "solve", config, f"output.dir={tmp_path / 'run'}", "--quiet").returncode == 0
    assert run(eddy_cli, "export", tmp_path / "run").returncode == 0
    solution = tmp_path / "run" / "solution.h5"
    result = run(eddy_cli, "predict", tmp_path / "run" / "export", solution, "--input", "points=coordinates/x",
                 "--output", tmp_path / "line_out.h5")
    assert result.returncode == 0, result.stderr
    with h5py.File(tmp_path / "line_out.h5", "r") as got, h5py.File(solution, "r") as solved:
        np.testing.assert_allclose(got["u"][:], solved["fields/u"][:], rtol=1e-6, atol=1e-7)
