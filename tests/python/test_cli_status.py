"""Exit statuses and results of the `eddy` command as a script or a job scheduler sees them: 3 on a
non-finite loss, with the checkpoint it kept named; `eddy eval` reporting what the run ended with;
errors naming what is wrong with a non-zero status (src/cli/main.cpp lists the statuses)."""

import os
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
SMALL_BURGERS = ["examples/pinn/burgers.yaml", "--eager", "--quiet", "conditions.pde.points=200",
                 "training.lbfgs.iterations=0"]


def eddy(eddy_cli, *arguments):
    return subprocess.run([str(eddy_cli), *map(str, arguments)], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def test_a_non_finite_loss_exits_with_3_and_names_the_checkpoint_kept(eddy_cli, tmp_path):
    # A float32 learning rate of 1e30 overflows the first update: the loss of step 1 is NaN.
    run = eddy(eddy_cli, "solve", *SMALL_BURGERS, "dtype=float32", "training.adam.steps=50",
               "training.adam.learning_rate=1e30", "validation.every=0", f"output.dir={tmp_path}")
    assert run.returncode == 3, run.stderr
    assert "Adam stopped at step 1: the loss is NaN" in run.stderr
    assert "no checkpoint was written yet" in run.stderr and "Lower the learning rate" in run.stderr
    assert not (tmp_path / "checkpoint.safetensors").exists()


def test_a_loss_not_finite_at_the_start_names_the_problem_not_the_learning_rate(eddy_cli, tmp_path):
    run = eddy(eddy_cli, "solve", *SMALL_BURGERS, "training.adam.steps=5", "validation.every=0",
               "equations.burgers=u_t + u*u_x - nu*u_xx + 1/(x - x)", f"output.dir={tmp_path}")
    assert run.returncode == 3, run.stderr
    assert "stopped at step 0" in run.stderr and "the learning rate is not the cause" in run.stderr
    assert "Lower the learning rate" not in run.stderr


def test_eval_reports_the_errors_the_run_ended_with(eddy_cli, tmp_path):
    solved = eddy(eddy_cli, "solve", *SMALL_BURGERS, "training.adam.steps=5", "validation.every=5",
                  f"output.dir={tmp_path}")
    assert solved.returncode == 0, solved.stderr
    errors = [line for line in solved.stdout.splitlines() if line.startswith("u: relative L2 error")]
    assert len(errors) == 1, solved.stdout
    evaluated = eddy(eddy_cli, "eval", tmp_path)
    assert evaluated.returncode == 0, evaluated.stderr
    assert errors[0] in evaluated.stdout.splitlines()


def test_errors_exit_non_zero_naming_what_is_wrong(eddy_cli, tmp_path):
    missing = eddy(eddy_cli, "eval", tmp_path / "no_such_run")
    assert missing.returncode != 0 and "no_such_run" in missing.stderr
    not_a_run = eddy(eddy_cli, "eval", tmp_path)
    assert not_a_run.returncode == 1 and str(tmp_path) in not_a_run.stderr
    bad_key = eddy(eddy_cli, "solve", *SMALL_BURGERS, "training.adam.stepz=5", f"output.dir={tmp_path / 'run'}")
    assert bad_key.returncode == 1 and "stepz" in bad_key.stderr


def test_version_flag_prints_the_version(eddy_cli):
    result = subprocess.run([str(eddy_cli), "--version"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0
    assert result.stdout.startswith("eddy ") and result.stdout.strip().split()[1][0].isdigit()


def test_quiet_still_warns_that_the_step_runs_eagerly(eddy_cli, tmp_path):
    # A warning, not progress: --quiet hid that the compiled step had failed (a run 2x slower).
    env = dict(os.environ, EDDY_CXX="/nonexistent/cxx", EDDY_KERNEL_CACHE=str(tmp_path / "cache"))
    compiled = [argument for argument in SMALL_BURGERS if argument != "--eager"]
    run = subprocess.run([str(eddy_cli), "solve", *compiled, "training.adam.steps=2", "validation.every=0",
                          f"output.dir={tmp_path / 'run'}"], cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env=env)
    assert run.returncode == 0, run.stderr
    assert "warning: training step runs eagerly" in run.stderr
