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
