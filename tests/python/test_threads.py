"""The thread count changes a PINN's speed, not its results: eddy's kernels cut parallel loops into
blocks by the work's size alone and add partial sums in block order (backends/cpu/loops.h), so
`eddy solve` trains to the same bits on one, two and three threads, compiled and eager. And the
`eddy` command and the Python package make waiting OpenMP threads spin only briefly unless the user
chose a policy."""

import os
import pathlib
import subprocess
import sys

import h5py
import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def solve(eddy_cli, run, threads, *flags):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), EDDY_ADAPT_THREADS="0")
    subprocess.run([str(eddy_cli), "solve", "examples/pinn/burgers.yaml", *flags, "dtype=float32",
                    "training.adam.steps=15", "training.lbfgs.iterations=5", "validation.every=0",
                    "output.checkpoint_every=0", f"output.dir={run}", "--quiet"],
                   cwd=ROOT, env=env, check=True, capture_output=True)
    with h5py.File(run / "solution.h5") as results:
        return results["fields/u"][()], results["history/loss"][()]


@pytest.mark.parametrize("flags", [(), ("--eager",)], ids=["compiled", "eager"])
def test_a_pinn_trains_to_the_same_bits_at_every_thread_count(eddy_cli, tmp_path, flags):
    u_one, loss_one = solve(eddy_cli, tmp_path / "one", 1, *flags)
    for threads in (2, 3):
        u, loss = solve(eddy_cli, tmp_path / f"threads{threads}", threads, *flags)
        assert np.array_equal(loss, loss_one), f"loss history on {threads} threads differs from one thread's"
        assert np.array_equal(u, u_one), f"the solution on {threads} threads differs from one thread's"


WAIT_SETTINGS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


def environment_with(settings):
    """This process's environment with only the given wait settings."""
    env = {k: v for k, v in os.environ.items() if k not in WAIT_SETTINGS}
    env.update(settings)
    return env


def wait_settings_of_running_eddy(eddy_cli, tmp_path, environment):
    """OMP_WAIT_POLICY and GOMP_SPINCOUNT in the environment of a running `eddy solve`
    (/proc/PID/environ: the one its image was started with, after any exec), None where unset."""
    env = environment_with(environment)
    process = subprocess.Popen([str(eddy_cli), "solve", "examples/pinn/burgers.yaml", "--eager",
                                "conditions.pde.points=200", "training.adam.steps=100000", "training.log_every=1",
                                f"output.dir={tmp_path / 'run'}"],
                               cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for line in process.stdout:
            if line.startswith("adam "):  # training: long past the exec
                break
        else:
            raise AssertionError("eddy solve ended before training")
        variables = pathlib.Path(f"/proc/{process.pid}/environ").read_bytes().split(b"\0")
    finally:
        process.kill()
        process.wait()
    settings = {}
    for name in WAIT_SETTINGS:
        prefix = name.encode() + b"="
        values = [v[len(prefix):].decode() for v in variables if v.startswith(prefix)]
        settings[name] = values[0] if values else None
    return settings["OMP_WAIT_POLICY"], settings["GOMP_SPINCOUNT"]


def test_eddy_makes_waiting_threads_spin_briefly_unless_a_policy_is_set(eddy_cli, tmp_path):
    assert wait_settings_of_running_eddy(eddy_cli, tmp_path, {}) == (None, "1000")
    assert wait_settings_of_running_eddy(eddy_cli, tmp_path, {"OMP_WAIT_POLICY": "active"}) == ("active", None)
    assert wait_settings_of_running_eddy(eddy_cli, tmp_path, {"GOMP_SPINCOUNT": "50"}) == (None, "50")


def wait_settings_after_import(environment):
    """OMP_WAIT_POLICY and GOMP_SPINCOUNT as `import eddy` leaves them in a fresh interpreter."""
    script = "import os, eddy; print(os.environ.get('OMP_WAIT_POLICY'), os.environ.get('GOMP_SPINCOUNT'))"
    printed = subprocess.run([sys.executable, "-c", script], env=environment_with(environment), check=True,
                             capture_output=True, text=True)
    policy, count = printed.stdout.split()
    return (None if policy == "None" else policy), (None if count == "None" else count)


def test_the_python_package_makes_waiting_threads_spin_briefly_unless_a_policy_is_set():
    assert wait_settings_after_import({}) == (None, "1000")
    assert wait_settings_after_import({"OMP_WAIT_POLICY": "passive"}) == ("passive", None)
    assert wait_settings_after_import({"GOMP_SPINCOUNT": "50"}) == (None, "50")


# Daemon threads busy in eddy's C++ when the script ends: one calling a compiled function (which
# gives up the GIL while it runs), one tracing it anew at every call (which takes the GIL back to
# run f), one encoding text, one dropping tensors over NumPy arrays (whose release takes the GIL),
# and some in Python code that eddy's C++ called (a model's forward, through Sequential too, a
# traced function, a function eddy.grad differentiates), long enough for the interpreter to
# switch threads inside it.
DAEMONS_AT_EXIT = """
import sys, threading, time
import numpy as np
import eddy

def busy():
    total = 0
    for i in range(100000):
        total += i
    return total

class Busy(eddy.nn.Module):
    def forward(self, x):
        busy()
        return x * 2

square_sum = eddy.jit(lambda x: (x.tanh() * 2).sum())
tokenizer = eddy.BpeTokenizer.train(["the quick brown fox jumps over the lazy dog"] * 20, 300)
x = eddy.tensor(np.ones((300, 300), np.float32))
small = eddy.tensor(np.ones(3))

def compiled():
    while True:
        square_sum(x)

def retraced():
    rows = 1
    while True:
        rows = rows % 50 + 1
        def f(y):
            busy()
            return (y * y).sum()
        eddy.jit(f)(eddy.tensor(np.ones((rows, 3), np.float32)))

def encoded():
    while True:
        tokenizer.encode("the lazy dog " * 200)

def numpy_backed():
    while True:
        eddy.tensor(np.ones(1000, np.float32)) * 2

def module_call():
    model = Busy()
    while True:
        model(small)

def sequential_call():
    model = eddy.nn.Sequential(Busy(), Busy())
    while True:
        model(small)

def differentiated():
    def f(y):
        busy()
        return (y * y).sum()
    while True:
        eddy.grad(f)(small)

for work in (compiled, retraced, encoded, numpy_backed, module_call, sequential_call, differentiated):
    threading.Thread(target=work, daemon=True).start()
time.sleep(float(sys.argv[1]))
"""


@pytest.mark.parametrize("seconds", [0.05, 0.2, 0.4])
def test_daemon_threads_inside_eddy_do_not_abort_the_interpreters_exit(seconds):
    # CPython ends such a thread as it asks for the GIL back during the exit; before bindings.h
    # parked it, the unwinding aborted the process ("terminate called without an active
    # exception", a fatal error from Python, or a segmentation fault in its last garbage
    # collection) in most runs.
    for attempt in range(3):
        ended = subprocess.run([sys.executable, "-c", DAEMONS_AT_EXIT, str(seconds)], capture_output=True, text=True,
                               env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=120)
        assert ended.returncode == 0, f"run {attempt} at {seconds} s: exit status {ended.returncode}\n{ended.stderr}"
