"""`eddy solve --resume` as users run it: a run killed with SIGKILL or stopped with Ctrl-C and
resumed writes the history of every step, equal to an uninterrupted run's; a resumed run may change
its training settings (learning rate, step count) and is refused, naming the key, when it changes
the model."""

import pathlib
import signal
import subprocess

import h5py
import numpy as np
from safetensors import safe_open

from test_cli_interrupt import ROOT, burgers, checkpoint_step, interrupt, resume, start_until

HISTORY = ["step", "loss", "loss_pde", "loss_initial", "loss_walls", "weight_pde", "weight_initial",
           "weight_walls"]


def solve(command):
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)


def history(run: pathlib.Path):
    with h5py.File(run / "solution.h5") as results:
        return {name: np.array(results["history/" + name]) for name in HISTORY}


def test_a_killed_run_resumed_writes_the_history_of_every_step(eddy_cli, tmp_path):
    # 60 steps, checkpoints after 20 and 40, a record every 10 steps and a closing one.
    settings = ["training.adam.steps=60", "training.lbfgs.iterations=0", "output.checkpoint_every=20"]
    whole = solve(burgers(eddy_cli, tmp_path / "whole", *settings))
    assert whole.returncode == 0, whole.stderr
    expected = history(tmp_path / "whole")
    assert list(expected["step"]) == [1, 10, 20, 30, 40, 50, 60, 60]

    # The same run, but long enough that SIGKILL surely lands in Adam, after the checkpoint at 40.
    run = tmp_path / "killed"
    long_run = burgers(eddy_cli, run, "training.adam.steps=100000", *settings[1:])
    process, _ = start_until(long_run, "adam 50/")
    process.send_signal(signal.SIGKILL)
    process.communicate()
    assert process.returncode == -signal.SIGKILL
    assert checkpoint_step(run / "checkpoint.safetensors") == 40
    assert not (run / "solution.h5").exists()

    # Resumed with the step count of the whole run (a training setting it may change).
    resumed = solve(burgers(eddy_cli, run, *settings) + ["--resume"])
    assert resumed.returncode == 0, resumed.stderr
    assert "finished 60 steps" in resumed.stdout
    got = history(run)
    for name in HISTORY:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)


def test_a_run_stopped_by_ctrl_c_and_resumed_writes_an_uninterrupted_history(eddy_cli, tmp_path):
    settings = ["training.adam.steps=600", "training.lbfgs.iterations=0"]
    whole = solve(burgers(eddy_cli, tmp_path / "whole", *settings))
    assert whole.returncode == 0, whole.stderr

    run = tmp_path / "stopped"
    status, _, err = interrupt(burgers(eddy_cli, run, *settings), "adam ", signal.SIGINT)
    assert status == 130, err
    # The stopped run's closing record is in its solution.h5 but not in its checkpoint.
    finished = resume(err)
    assert finished.returncode == 0, finished.stderr
    got, expected = history(run), history(tmp_path / "whole")
    for name in HISTORY:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)


def test_resume_may_change_the_learning_rate_and_the_step_count(eddy_cli, tmp_path):
    run = tmp_path / "burgers"
    first = solve(burgers(eddy_cli, run, "training.adam.steps=20", "training.lbfgs.iterations=0"))
    assert first.returncode == 0, first.stderr
    resumed = solve(burgers(eddy_cli, run, "training.adam.steps=30", "training.lbfgs.iterations=0",
                            "training.adam.learning_rate=5e-4", "--resume"))
    assert resumed.returncode == 0, resumed.stderr
    assert "finished 30 steps" in resumed.stdout
    # The first run's records (but not its closing one), then the resumed run's.
    assert list(history(run)["step"]) == [1, 10, 20, 30, 30]
    assert "learning_rate: 5e-4" in (run / "config.yaml").read_text()


def test_resume_refuses_adam_steps_added_after_lbfgs(eddy_cli, tmp_path):
    # Past its Adam steps (in or after L-BFGS), a run resumed with more of them went on with Adam
    # from L-BFGS's weights, 5 steps short: the step count holds both phases' steps.
    run = tmp_path / "burgers"
    first = solve(burgers(eddy_cli, run, "training.adam.steps=10", "training.lbfgs.iterations=5"))
    assert first.returncode == 0, first.stderr
    config = (run / "config.yaml").read_text()
    resumed = solve(burgers(eddy_cli, run, "training.adam.steps=20", "training.lbfgs.iterations=5", "--resume"))
    assert resumed.returncode == 1
    assert ("--resume: training.adam.steps is 20 but the checkpoint's run took 10 and is past them (step 15, in "
            "or after L-BFGS)") in resumed.stderr
    # The refused run left the folder as it was: its config.yaml described a run that never happened.
    assert (run / "config.yaml").read_text() == config
    more_lbfgs = solve(burgers(eddy_cli, run, "training.adam.steps=10", "training.lbfgs.iterations=8", "--resume"))
    assert more_lbfgs.returncode == 0, more_lbfgs.stderr
    # Its evaluation cap follows the iterations; the folder is still this run's, not "an earlier run's".
    evaluated = solve([str(eddy_cli), "eval", str(run)])
    assert evaluated.returncode == 0, evaluated.stderr


def test_resume_refuses_a_changed_model_and_names_the_key(eddy_cli, tmp_path):
    run = tmp_path / "burgers"
    first = solve(burgers(eddy_cli, run, "training.adam.steps=10", "training.lbfgs.iterations=0"))
    assert first.returncode == 0, first.stderr
    config = (run / "config.yaml").read_text()
    with safe_open(str(run / "checkpoint.safetensors"), framework="numpy") as f:
        assert "model.width" in f.metadata()["eddy.settings"]

    refused = solve(burgers(eddy_cli, run, "training.adam.steps=10", "training.lbfgs.iterations=0",
                            "model.width=32", "--resume"))
    assert refused.returncode == 1, refused.stderr
    assert (f"--resume: model.width is 20 in the run that wrote {run}/checkpoint.safetensors but 32 now; "
            "only training settings may change") in refused.stderr
    assert (run / "config.yaml").read_text() == config  # still the checkpoint's


def test_export_refuses_a_checkpoint_that_another_config_replaced_the_config_of(eddy_cli, tmp_path):
    # A new run in the same folder writes config.yaml at once and its first checkpoint later: one
    # stopped in between leaves an earlier run's weights beside its config, here with another nu.
    run = tmp_path / "run"
    first = solve(burgers(eddy_cli, run, "training.adam.steps=5", "training.lbfgs.iterations=0"))
    assert first.returncode == 0, first.stderr
    config = run / "config.yaml"
    config.write_text(config.read_text().replace("nu: 0.0031830988618379067", "nu: 0.1"))
    exported = solve([str(eddy_cli), "export", str(run), "--output", str(tmp_path / "exported")])
    assert exported.returncode != 0
    assert "was not written by the run of" in exported.stderr and "parameters.nu" in exported.stderr


def test_a_new_run_over_a_folder_removes_the_old_runs_results_and_export(eddy_cli, tmp_path):
    # Left in place, `eddy predict RUN/export` gave the old run's values after the new run, and a
    # new run that stopped early (here on a non-finite loss) left the old solution.h5 and VTK
    # files beside its own checkpoint, silently.
    run = tmp_path / "run"
    first = solve(burgers(eddy_cli, run, "training.adam.steps=5", "training.lbfgs.iterations=0"))
    assert first.returncode == 0, first.stderr
    exported = solve([str(eddy_cli), "export", str(run)])
    assert exported.returncode == 0, exported.stderr
    assert (run / "export" / "meta.json").is_file() and (run / "solution.h5").is_file()
    # Files named like another command's results are the user's here (observations in
    # predictions.h5): a run of eddy solve over one of eddy solve keeps them.
    for other in ("predictions.h5", "history.h5"):
        (run / other).write_text("the user's")
    diverging = solve(burgers(eddy_cli, run, "training.adam.steps=5", "training.lbfgs.iterations=0",
                              "training.adam.learning_rate=1e300"))
    assert diverging.returncode == 3, diverging.stderr
    assert (f"{run} holds a run; this one starts anew and writes over it (--resume continues a run); "
            "removed its checkpoint, results and exports: checkpoint.safetensors, points.vtp, solution.h5, "
            "solution.vti, export/") in diverging.stderr
    assert not (run / "export").exists() and not (run / "solution.h5").exists()
    # The old checkpoint went with them: the new run stopped before writing one of its own.
    assert not (run / "checkpoint.safetensors").exists()
    assert not (run / "solution.vti").exists()
    assert (run / "predictions.h5").read_text() == (run / "history.h5").read_text() == "the user's"


def test_a_run_of_another_command_over_a_folder_removes_the_old_runs_results(eddy_cli, tmp_path):
    # eddy train where eddy solve had written left solution.h5 and its ParaView files beside the
    # operator's checkpoint, where they read as its results.
    run = tmp_path / "run"
    first = solve(burgers(eddy_cli, run, "training.adam.steps=5", "training.lbfgs.iterations=0"))
    assert first.returncode == 0, first.stderr
    trained = solve([str(eddy_cli), "train", str(ROOT / "examples/operator/antiderivative_deeponet.yaml"),
                     "training.epochs=1", f"output.dir={run}"])
    assert trained.returncode == 0, trained.stderr
    assert ("removed its checkpoint, results and exports: checkpoint.safetensors, points.vtp, solution.h5, "
            "solution.vti") in trained.stderr
    assert not (run / "solution.h5").exists() and (run / "predictions.h5").is_file()


def test_resume_into_another_commands_run_names_that_command(eddy_cli, tmp_path):
    # It listed every key of both configs as a difference (4 KB on one line).
    run = tmp_path / "run"
    first = solve(burgers(eddy_cli, run, "training.adam.steps=5", "training.lbfgs.iterations=0"))
    assert first.returncode == 0, first.stderr
    refused = solve([str(eddy_cli), "train", str(ROOT / "examples/operator/antiderivative_deeponet.yaml"),
                     "training.epochs=1", f"output.dir={run}", "--resume", "--quiet"])
    assert refused.returncode == 1
    assert (f"--resume: {run} holds a run of `eddy solve` (a PINN problem), and this is `eddy train` (a "
            "neural-operator run); resume that run with `eddy solve` (eddy.solve in Python), or give this one another "
            "output.dir") \
        in refused.stderr
    assert len(refused.stderr) < 400


def test_eval_names_the_replaced_config_before_the_checkpoints_shapes(eddy_cli, tmp_path):
    # The same, where the new config's network has another width: loading the weights first
    # refused them for their shapes alone.
    run = tmp_path / "run"
    first = solve(burgers(eddy_cli, run, "training.adam.steps=5", "training.lbfgs.iterations=0"))
    assert first.returncode == 0, first.stderr
    config = run / "config.yaml"
    config.write_text(config.read_text().replace("width: 20", "width: 32"))
    evaluated = solve([str(eddy_cli), "eval", str(run)])
    assert evaluated.returncode != 0
    assert "was not written by the run of" in evaluated.stderr and "model.width" in evaluated.stderr


def test_resume_refuses_a_rewritten_data_file(eddy_cli, tmp_path):
    # The config names the file, not its values: a resume trained on the new values, silently.
    (tmp_path / "obs.csv").write_text("x,u\n" + "".join(f"{x / 10},{np.sin(np.pi * x / 10)}\n" for x in range(11)))
    (tmp_path / "poisson.yaml").write_text(
        "geometry: {space: {type: interval, min: 0, max: 1}}\n"
        "fields: [u]\n"
        "equations: {poisson: u_xx + pi^2*sin(pi*x)}\n"
        "conditions:\n"
        "  pde: {type: interior, equation: poisson, points: 50}\n"
        "  obs: {type: data, file: obs.csv, fields: {u: u}}\n"
        "model: {width: 8, depth: 2}\n"
        "training: {adam: {steps: 5}, lbfgs: {iterations: 0}}\n"
        "validation: {every: 0}\n"
        f"output: {{dir: {tmp_path / 'run'}, grid: [8]}}\n")
    command = [str(eddy_cli), "solve", str(tmp_path / "poisson.yaml"), "--quiet"]
    first = solve(command)
    assert first.returncode == 0, first.stderr
    resumed = solve(command + ["training.adam.steps=10", "--resume"])
    assert resumed.returncode == 0, resumed.stderr  # the same file resumes
    (tmp_path / "obs.csv").write_text("x,u\n" + "".join(f"{x / 10},{3 * np.sin(np.pi * x / 10)}\n" for x in range(11)))
    refused = solve(command + ["training.adam.steps=15", "--resume"])
    assert refused.returncode == 1, refused.stderr
    assert "conditions.obs (its points' and values' content)" in refused.stderr


def test_resume_with_a_default_spelled_out_is_the_same_run(eddy_cli, tmp_path):
    # SOAP's betas are written into the resolved config when left out, so a --resume that spells
    # out their default is not refused as a change.
    problem = tmp_path / "kdv.yaml"
    problem.write_text((ROOT / "examples/pinn/kdv.yaml").read_text().replace("betas: [0.9, 0.99], ", ""))
    run = tmp_path / "soap"
    settings = [str(eddy_cli), "solve", str(problem), "--eager", "conditions.pde.points=100",
                "conditions.initial.points=20", "conditions.ends.points=20", "validation.every=0",
                "output.grid=[8,4]", "training.lbfgs.iterations=0", "training.loss_weighting={scheme: fixed}",
                f"output.dir={run}"]
    first = solve(settings + ["training.soap.steps=4"])
    assert first.returncode == 0, first.stderr
    assert "betas:" in (run / "config.yaml").read_text()
    resumed = solve(settings + ["training.soap.steps=6", "training.soap.betas=[0.95, 0.95]", "--resume"])
    assert resumed.returncode == 0, resumed.stderr
