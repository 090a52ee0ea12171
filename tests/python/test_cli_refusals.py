"""Inputs that used to crash `eddy` or fail far from their cause (issue #25) are refused with exit
status 1 and a message naming the key, the file, line and column, and what is wrong."""

import pathlib
import resource
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

ONE_D = """
dtype: float64
geometry:
  space: {type: interval, min: -1, max: 1}
fields: [u]
equations:
  eq: EQUATION
conditions:
  pde: {type: interior, equation: eq, points: POINTS}
  walls: {type: dirichlet, on: x == -1 || x == 1, field: u, value: 0, points: 10}
model: {width: 20, depth: 3}
training:
  adam: {steps: 2, learning_rate: 1.0e-3}
"""


def problem(tmp_path, text, **replacements):
    for key, value in replacements.items():
        text = text.replace(key, str(value))
    config = tmp_path / "problem.yaml"
    config.write_text(text + f"output: {{dir: {tmp_path / 'run'}}}\n")
    return config


def run(eddy_cli, *arguments, address_space=None):
    def limit():
        if address_space is not None:
            resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    return subprocess.run([str(eddy_cli), *map(str, arguments)], capture_output=True, text=True,
                          preexec_fn=limit, timeout=300)


@pytest.mark.parametrize("command", [["solve", "--quiet"], ["solve", "--quiet", "--eager"], ["check"]])
def test_a_derivative_order_that_cannot_fit_in_memory_is_refused_before_allocating(tmp_path, eddy_cli, command):
    # Nested reverse mode about triples the graph per order: d(u, x, 16) used to end in an uncaught
    # std::bad_alloc thrown while freeing memory. Under a 3 GiB address space it stops at a low order.
    # `eddy check` differentiates on a few of the points and takes the bound for all 1000.
    config = problem(tmp_path, ONE_D, EQUATION="d(u, x, 16)", POINTS=1000)
    result = run(eddy_cli, command[0], config, *command[1:], address_space=3 << 30)
    assert result.returncode == 1, result.stderr
    assert "problem.yaml:7:7: equations.eq: differentiating to order" in result.stderr
    assert "would take a training step about" in result.stderr
    assert "(ulimit -v). Use a lower order or fewer points" in result.stderr
    assert "d(u, x, 16)\n  ^~~~~~~~~~~" in result.stderr


def test_an_operator_split_without_samples_is_refused_when_the_data_loads(tmp_path, eddy_cli):
    # It used to train on the mean of nothing: NaN losses, and exit status 0 or 3 after the run.
    import h5py
    import numpy as np

    data = tmp_path / "empty.h5"
    with h5py.File(data, "w") as f:
        f["train/a"], f["train/u"] = np.zeros((0, 8, 8)), np.zeros((0, 8, 8))
        f["test/a"], f["test/u"] = np.ones((2, 8, 8)), np.ones((2, 8, 8))
    config = tmp_path / "fno.yaml"
    config.write_text(f"""
data:
  file: {data}
  train: {{input: train/a, output: train/u}}
  test: {{input: test/a, output: test/u}}
model: {{type: fno, modes: [2, 2], width: 4, layers: 1}}
training: {{epochs: 1, batch_size: 2}}
output: {{dir: {tmp_path / 'run'}}}
""")
    result = run(eddy_cli, "train", config, "--quiet")
    assert result.returncode == 1, result.stderr
    assert (f"fno.yaml:4:10: data.train: {data}: input 'train/a' [0, 8, 8] and output 'train/u' [0, 8, 8] "
            "hold no samples; the train split needs at least one") in result.stderr


def test_a_step_too_large_to_compile_runs_eagerly_and_the_log_says_why(tmp_path, eddy_cli):
    # An 8th-order residual traces to about 130,000 nodes, whose kernels took minutes to build;
    # its eager step takes a second.
    config = problem(tmp_path, ONE_D.replace("  space: {type: interval, min: -1, max: 1}\n",
                                             "  space: {type: interval, min: -1, max: 1}\n"
                                             "  time: {min: 0, max: 1}\n"),
                     EQUATION="u_xxxxtttt", POINTS=50)
    result = run(eddy_cli, "solve", config, "training.adam.steps=1")
    assert result.returncode == 0, result.stderr
    log = result.stdout + result.stderr
    assert "training step runs eagerly: compile: the traced graph has" in log
    assert "nodes, more than the 10000 this function compiles in reasonable time" in log


def test_eval_of_a_folder_that_is_no_run_says_what_to_give(tmp_path, eddy_cli):
    # It said only "cannot open .../config.yaml".
    result = run(eddy_cli, "eval", tmp_path)
    assert result.returncode == 1
    assert f"eval: {tmp_path} has no config.yaml; give a run folder written by `eddy solve`" in result.stderr


@pytest.mark.parametrize("arguments, message", [
    (["xyz"], "eddy: unknown command 'xyz'; commands are solve, check, eval, train, generate, export, predict, lm"),
    (["slove", "p.yaml"], "eddy: unknown command 'slove' (did you mean 'solve'?); commands are solve, check,"),
    (["lm", "trian"], "eddy lm: unknown command 'trian' (did you mean 'train'?); commands are train, check,"),
])
def test_an_unknown_command_is_named_with_the_commands_there_are(eddy_cli, arguments, message):
    # CLI11 said only "A subcommand is required".
    result = run(eddy_cli, *arguments)
    assert result.returncode == 2  # a command line that does not parse
    assert message in result.stderr


@pytest.mark.parametrize("command", [["check", ROOT / "examples/pinn/burgers.yaml"],
                                     ["lm", "check", ROOT / "examples/lm/fortunes_gpt.yaml"]])
def test_an_override_without_a_value_is_a_usage_error(eddy_cli, command):
    # It exited 1, as a run that failed does, where docs/config.md gives 2 for an invalid argument.
    result = run(eddy_cli, *command, "model.width")
    assert result.returncode == 2, result.stderr
    assert "expected key.path=value, got 'model.width'" in result.stderr


def test_an_operator_width_beyond_memory_is_refused_at_its_key(tmp_path, eddy_cli):
    # It ended in a bare std::bad_alloc while the model was built.
    import h5py
    import numpy as np

    data = tmp_path / "data.h5"
    with h5py.File(data, "w") as f:
        f["a"], f["u"] = np.ones((2, 8, 8)), np.ones((2, 8, 8))
    config = tmp_path / "fno.yaml"
    config.write_text(f"""
data: {{file: {data}, train: {{input: a, output: u}}, test: {{input: a, output: u}}}}
model: {{type: fno, modes: [2, 2], width: 100000000, layers: 1}}
output: {{dir: {tmp_path / 'run'}}}
""")
    result = run(eddy_cli, "train", config, "--quiet")
    assert result.returncode == 1, result.stderr
    assert ("fno.yaml:3:42: model.width: a model of width 100000000, layers 1, modes [2, 2] and projection_width 128 "
            "has at least 1.7e+17 weights, which with their gradient and AdamW's two moments need at least"
            ) in result.stderr


@pytest.mark.parametrize("command, example, message", [
    (["train"], "pinn/burgers.yaml",
     "train: {file} is a PINN problem (it has `geometry`), not a neural-operator run; run it with `eddy solve {file}`"),
    (["lm", "train"], "operator/darcy16.yaml",
     "lm train: {file} is a neural-operator run (its `data` names a `train` split), not a language-model run; "
     "run it with `eddy train {file}`"),
    (["solve"], "lm/fortunes_gpt.yaml",
     "solve: {file} is a language-model run (it has a `tokenizer` or its `data` names text `files`), "
     "not a PINN problem; run it with `eddy lm train {file}`"),
    (["train"], "operator/darcy_data.yaml",
     "train: {file} is a dataset to generate (it names a `solver`), not a neural-operator run; "
     "run it with `eddy generate {file}`"),
])
def test_a_file_of_another_kind_names_the_command_that_reads_it(eddy_cli, command, example, message):
    # Each reader used to report the first key of its own kind that the file lacks (`geometry`).
    file = ROOT / "examples" / example
    result = run(eddy_cli, *command, file, "--quiet")
    assert result.returncode == 1, result.stderr
    assert message.format(file=file) in result.stderr, result.stderr


def test_eval_of_an_operator_run_says_it_takes_pinn_runs(tmp_path, eddy_cli):
    # It reported that the config.yaml eddy had written lacked `geometry`.
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text((ROOT / "examples" / "operator" / "darcy16.yaml").read_text())
    result = run(eddy_cli, "eval", run_dir)
    assert result.returncode == 1
    assert f"eval: {run_dir} is not a run of `eddy solve` (its config.yaml has no `geometry`)" in result.stderr


@pytest.mark.parametrize("command", [["train"], ["generate"], ["check"], ["solve"]])
def test_a_data_file_given_as_the_config_is_named_for_what_it_is(eddy_cli, command):
    # YAML reported an escape character somewhere in the file's bytes.
    data = ROOT / "data" / "darcy16.h5"
    result = run(eddy_cli, *command, data)
    assert result.returncode == 1
    assert f"{data} is an HDF5 file, not a YAML config" in result.stderr, result.stderr


def test_a_folder_given_as_a_dataset_to_write_is_refused_before_solving(tmp_path, eddy_cli):
    # The whole dataset was solved first; the move onto the folder then failed, leaving a .tmp file.
    (tmp_path / "out.h5").mkdir()
    result = run(eddy_cli, "generate", ROOT / "examples" / "operator" / "darcy_data.yaml", "samples=2",
                 "resolution=16", f"output.path={tmp_path / 'out.h5'}", "--quiet")
    assert result.returncode == 1
    assert "output.path: " in result.stderr and "out.h5 is a folder; give the HDF5 file to write" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.h5"]


def test_a_domain_too_large_for_a_finite_measure_is_refused_at_its_key(tmp_path, eddy_cli):
    # The samplers' acceptance rate was inf / inf: an internal "count must be non-negative" error.
    config = problem(tmp_path, ONE_D.replace("min: -1, max: 1", "min: -1.0e308, max: 1.0e308"), EQUATION="u",
                     POINTS=10)
    result = run(eddy_cli, "check", config)
    assert result.returncode == 1, result.stderr
    assert "geometry.space: extends from -1e+308 to 1e+308 along axis 0" in result.stderr


def test_a_tokenizer_file_that_cannot_be_read_is_refused_by_check(tmp_path, eddy_cli):
    # `eddy check` called it valid; `eddy lm train` then refused it without naming the key.
    broken = tmp_path / "tokenizer.json"
    broken.write_text('{"a": 1}')
    result = run(eddy_cli, "check", ROOT / "examples/lm/fortunes_gpt.yaml", f"tokenizer.file={broken}")
    assert result.returncode == 1, result.stderr
    assert "tokenizer.file" in result.stderr and str(broken) in result.stderr


def test_generate_refuses_to_write_over_a_file_that_is_not_hdf5(eddy_cli, tmp_path):
    # output.path naming the config itself (or any file that is not HDF5) wrote the dataset over it.
    config = tmp_path / "burgers_data.yaml"
    config.write_text((ROOT / "examples/operator/burgers_data.yaml").read_text())
    before = config.read_text()
    result = subprocess.run([str(eddy_cli), "generate", str(config), "samples=2", "resolution=32",
                             f"output.path={config}", "--quiet"], capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "exists and is not an HDF5 file" in result.stderr
    assert config.read_text() == before


def test_an_output_dir_under_a_file_names_the_key(eddy_cli, tmp_path):
    (tmp_path / "afile").write_text("")
    result = subprocess.run([str(eddy_cli), "solve", str(ROOT / "examples/pinn/heat2d.yaml"),
                             f"output.dir={tmp_path / 'afile' / 'sub'}"], capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert f"output.dir {tmp_path / 'afile' / 'sub'}: cannot make the run folder: Not a directory" in result.stderr
