"""Ctrl-C and SIGTERM during training, sent to the `eddy` command as a user or a job scheduler
sends them: the run stops at the end of a step, writes its checkpoint there and its results,
says how to go on, exits with 128 + the signal number, and the printed `--resume` command
finishes the run. A second signal ends the process at once."""

import os
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time

import h5py
import pytest
from safetensors import safe_open

import eddy

ROOT = pathlib.Path(__file__).resolve().parents[2]


def checkpoint_step(path):
    with safe_open(str(path), framework="numpy") as f:
        return int(f.metadata()["eddy.step"])


def start_until(command, progress):
    """Starts `command` and reads its log until a progress line starting with `progress` shows
    that training steps are being taken; returns the process and the lines read."""
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(600, process.kill)  # never hang the suite
    watchdog.daemon = True
    watchdog.start()
    seen = []
    for line in process.stderr:
        seen.append(line)
        if line.startswith(progress):
            return process, seen
    raise AssertionError(f"no '{progress}' progress line; the log was:\n{''.join(seen)}")


def interrupt(command, progress, sig):
    """Runs `command`, sends `sig` once steps are being taken; returns (status, stdout, stderr)."""
    process, seen = start_until(command, progress)
    process.send_signal(sig)
    out, err = process.communicate()
    return process.returncode, out, "".join(seen) + err


def resume(err):
    """Runs the command the stopped run printed to go on, and returns the finished process."""
    lines = err.strip().splitlines()
    assert "To go on from it:" in lines[-2], err
    command = lines[-1].strip()
    assert command.endswith(" --resume"), command
    return subprocess.run(command, shell=True, cwd=ROOT, capture_output=True, text=True, timeout=600)


def burgers(eddy_cli, run, *overrides):
    return [str(eddy_cli), "solve", "examples/pinn/burgers.yaml", "--eager", "conditions.pde.points=200",
            "validation.every=0", "output.grid=[16,10]", "training.log_every=10",
            "output.checkpoint_every=100000", f"output.dir={run}", *overrides]


def test_ctrl_c_stops_eddy_solve_after_a_step_and_resume_finishes(eddy_cli, tmp_path):
    run = tmp_path / "burgers"
    status, out, err = interrupt(burgers(eddy_cli, run, "training.adam.steps=600", "training.lbfgs.iterations=0"),
                                 "adam ", signal.SIGINT)
    assert status == 130, err
    assert "eddy: stopping at the end of this step" in err
    stopped = re.search(r"^stopped by SIGINT after (\d+) steps; loss ", out, re.MULTILINE)
    assert stopped, out
    step = int(stopped.group(1))
    assert 10 <= step < 600
    # The checkpoint is the interrupt's (checkpoint_every is beyond the run), and so are the results.
    assert checkpoint_step(run / "checkpoint.safetensors") == step
    with h5py.File(run / "solution.h5") as results:
        assert results["fields/u"].shape == (16, 10)
        assert results["history/step"][-1] == step

    finished = resume(err)
    assert finished.returncode == 0, finished.stderr
    assert "finished 600 steps" in finished.stdout
    assert checkpoint_step(run / "checkpoint.safetensors") == 600


def test_ctrl_c_in_lbfgs_ends_it_at_an_iteration_and_resume_does_the_rest(eddy_cli, tmp_path):
    run = tmp_path / "burgers"
    status, out, err = interrupt(burgers(eddy_cli, run, "training.adam.steps=10", "training.lbfgs.iterations=200"),
                                 "lbfgs ", signal.SIGINT)
    assert status == 130, err
    assert "L-BFGS stopped (interrupted)" in err
    step = int(re.search(r"^stopped by SIGINT after (\d+) steps", out, re.MULTILINE).group(1))
    assert 10 <= step < 210
    assert checkpoint_step(run / "checkpoint.safetensors") == step
    assert (run / "solution.h5").exists()

    finished = resume(err)
    assert finished.returncode == 0, finished.stderr
    done = int(re.search(r"^finished (\d+) steps", finished.stdout, re.MULTILINE).group(1))
    assert step <= done <= 210


def lm_config(tmp_path):
    animals, verbs = ["cat", "dog", "bird", "fox"], ["sees", "likes", "chases"]
    with open(tmp_path / "corpus.txt", "w") as out:
        for k in range(200):
            out.write(f"The {animals[k % 4]} {verbs[k % 3]} the ball.\nThen it sleeps.\n%\n")
    config = tmp_path / "tiny_lm.yaml"
    config.write_text(f"""
data: {{files: {tmp_path / 'corpus.txt'}, separator: "%"}}
tokenizer: {{vocab_size: 300}}
model: {{type: llama, context: 32, hidden_size: 32, layers: 2, heads: 4, kv_heads: 2}}
training: {{steps: 300, batch_size: 8, learning_rate: 3.0e-3, evaluate_every: 10, evaluation_batches: 2}}
output: {{dir: {tmp_path / 'run'}}}
""")
    return config


def test_sigterm_stops_eddy_lm_train_after_a_step_and_resume_keeps_the_history(eddy_cli, tmp_path):
    config, run = lm_config(tmp_path), tmp_path / "run"
    status, out, err = interrupt([str(eddy_cli), "lm", "train", str(config), "--eager"], "step ", signal.SIGTERM)
    assert status == 143, err
    step = int(re.search(r"^stopped by SIGTERM after (\d+) steps", out, re.MULTILINE).group(1))
    assert 10 <= step < 300
    assert checkpoint_step(run / "checkpoint.safetensors") == step
    with h5py.File(run / "history.h5") as history:
        assert list(history["step"]) == list(range(1, step + 1))

    finished = resume(err)
    assert finished.returncode == 0, finished.stderr
    assert "finished 300 steps" in finished.stdout
    with h5py.File(run / "history.h5") as history:
        assert list(history["step"]) == list(range(1, 301))
        # The evaluation at the stop was for that run's results: the resumed history has only
        # the evaluations every 10 steps, as an uninterrupted run's.
        assert list(history["validation/step"]) == list(range(10, 301, 10))


def test_the_same_signal_twice_at_once_is_one_request(eddy_cli, tmp_path):
    # coreutils' `timeout -s INT` signals the process and then its process group: the run died
    # without its checkpoint, taking the second delivery for a person interrupting again.
    # The second is sent as soon as the first has been taken (two sent together would merge into one
    # pending signal and test nothing).
    process, _ = start_until(burgers(eddy_cli, tmp_path / "burgers", "training.adam.steps=2000",
                                     "training.lbfgs.iterations=0"), "adam ")
    process.send_signal(signal.SIGINT)
    for line in process.stderr:
        if line.startswith("eddy: stopping at the end of this step"):
            process.send_signal(signal.SIGINT)
            break
    out, err = process.communicate()
    assert process.returncode == 130, err
    assert re.search(r"^stopped by SIGINT after \d+ steps", out, re.MULTILINE), out
    assert (tmp_path / "burgers" / "checkpoint.safetensors").exists()


def test_a_second_signal_ends_the_process_at_once(eddy_cli, tmp_path):
    # Both signals wait while the process is stopped and arrive together when it goes on, so the
    # second one always comes while the run is stopping.
    process, _ = start_until(burgers(eddy_cli, tmp_path / "burgers", "training.adam.steps=2000",
                                     "training.lbfgs.iterations=0"), "adam ")
    process.send_signal(signal.SIGSTOP)
    process.send_signal(signal.SIGINT)
    process.send_signal(signal.SIGTERM)
    process.send_signal(signal.SIGCONT)
    process.communicate()
    assert process.returncode in (-signal.SIGINT, -signal.SIGTERM)


def test_a_kill_during_lbfgs_keeps_the_adam_steps(eddy_cli, tmp_path):
    # No checkpoint was due before Adam's end (every 1,000 steps), and none was written there:
    # a kill during L-BFGS lost every step. The end of Adam now writes one.
    run = tmp_path / "run"
    process, _ = start_until(burgers(eddy_cli, run, "training.adam.steps=20", "training.lbfgs.iterations=100000",
                                     "output.checkpoint_every=1000"), "lbfgs ")
    process.kill()
    process.communicate()
    assert checkpoint_step(run / "checkpoint.safetensors") == 20


@pytest.mark.parametrize("deliveries", [1, 2])
def test_ctrl_c_stops_eddy_solve_from_python_and_returns_the_result(tmp_path, deliveries):
    # The Python call ran every step, then raised KeyboardInterrupt and lost its result. A signal
    # delivered twice at once (`timeout -s INT` sends it to the process and to its group) is one
    # request, as in the eddy command; the second raised KeyboardInterrupt.
    script = f"""
import sys, eddy
result = eddy.solve("examples/pinn/burgers.yaml", {{"training.adam.steps": 100000, "training.log_every": 10,
    "conditions.pde.points": 200, "validation.every": 0, "output.grid": [16, 10], "output.dir": {str(tmp_path)!r}}},
    eager=True, progress=True)
print("returned", result["finished"], result["steps"], flush=True)
"""
    process = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=dict(os.environ, PYTHONPATH=str(pathlib.Path(eddy.__file__).parent.parent)))
    watchdog = threading.Timer(600, process.kill)
    watchdog.daemon = True
    watchdog.start()
    for line in process.stderr:
        if line.startswith("adam "):
            break
    for _ in range(deliveries):
        process.send_signal(signal.SIGINT)
        time.sleep(0.02)  # handled apart: sent together, the two would merge into one delivery
    out, err = process.communicate()
    assert process.returncode == 0, err
    finished, steps = re.search(r"^returned (\w+) (\d+)$", out, re.MULTILINE).groups()
    assert finished == "False" and 0 < int(steps) < 100000
    assert checkpoint_step(tmp_path / "checkpoint.safetensors") == int(steps)
    with h5py.File(tmp_path / "solution.h5", "r") as f:
        assert int(f["history/step"][-1]) == int(steps)


def test_a_python_program_that_ignores_sigint_trains_on(tmp_path):
    # eddy.solve replaced the ignored action with its own and stopped the training on SIGINT.
    script = f"""
import signal, eddy
signal.signal(signal.SIGINT, signal.SIG_IGN)
result = eddy.solve("examples/pinn/burgers.yaml", {{"training.adam.steps": 300, "training.lbfgs.iterations": 5,
    "training.log_every": 10, "conditions.pde.points": 200, "validation.every": 0, "output.grid": [16, 10],
    "output.dir": {str(tmp_path)!r}}},
    eager=True, progress=True)
print("returned", result["finished"], result["steps"], flush=True)
"""
    process = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=dict(os.environ, PYTHONPATH=str(pathlib.Path(eddy.__file__).parent.parent)))
    for line in process.stderr:
        if line.startswith("adam "):
            break
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err
    assert re.search(r"^returned True \d+$", out, re.MULTILINE), out


def test_ctrl_c_before_training_raises_keyboard_interrupt_once(tmp_path):
    # One SIGINT while eddy.lm.train trains its tokenizer: the signal went to Python's handler and
    # the call raised a KeyboardInterrupt of its own too, so the caller's `except` block was itself
    # interrupted.
    script = f"""
import os, signal, threading, time, eddy
threading.Thread(target=lambda: (time.sleep(0.5), os.kill(os.getpid(), signal.SIGINT)), daemon=True).start()
seen = []
try:
    try:
        eddy.lm.train("examples/lm/fortunes_gpt.yaml", {{"model.hidden_size": 32, "model.layers": 1,
            "model.heads": 2, "model.context": 32, "training.steps": 20, "training.schedule.warmup": 5,
            "training.batch_size": 4, "output.checkpoint_every": 0, "output.dir": {str(tmp_path)!r}}}, eager=True)
    except KeyboardInterrupt:
        seen.append("raised")
        time.sleep(0.5)
        seen.append("handled")
except KeyboardInterrupt:
    seen.append("raised again")
print(seen, flush=True)
"""
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=600,
                            env=dict(os.environ, PYTHONPATH=str(pathlib.Path(eddy.__file__).parent.parent)))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['raised', 'handled']", result.stdout + result.stderr
