"""`make bench-busy`: the Burgers solve on a quiet machine and with a busy loop on one core.

A user's laptop is a busy machine: a browser, a build or another run takes a core. This runs
`eddy solve examples/pinn/burgers.yaml` (the `make demo` problem, Adam steps only) at 1 and 2
threads, with nothing else running and with a process spinning on CPU 1, and PyTorch eager on
the Burgers workload of bench/peers (same network, float32, 10000 interior points) under the
same conditions when .venv-bench has torch. eddy runs as users get it (threads tuned while it
trains) and, in float32, with the count held fixed (EDDY_ADAPT_THREADS=0). Rounds are
interleaved and medians reported, so a slow minute of the shared machine lands on every column
alike.

Threads are set with OMP_NUM_THREADS (and torch.set_num_threads); nothing is pinned, as a
user's process is not. The table goes to stdout in Markdown, one row per (case, threads).
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PROGRESS = re.compile(r"adam (\d+)/\d+ ")


def busy_loop(cpu):
    """A process that spins on `cpu` until killed: the other program on the user's machine."""
    return subprocess.Popen(["taskset", "-c", str(cpu), sys.executable, "-c", "while True: pass"])


def environment(threads, extra):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    env.update(extra)
    return env


def eddy_steps_per_second(build, threads, dtype, steps, extra_env):
    """Adam steps/s of `eddy solve`, timed here between its first and last progress lines (so
    compiling and the first steps' page faults are left out; the log flushes every line)."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [os.path.join(build, "bin", "eddy"), "solve", os.path.join(ROOT, "examples/pinn/burgers.yaml"),
               f"dtype={dtype}", "conditions.pde.points=10000",  # the PyTorch side's size (bench/peers)
               f"training.adam.steps={steps}", "training.lbfgs.iterations=0",
               f"training.log_every={steps // 8}", "validation.every=0", f"output.dir={out}",
               "output.checkpoint_every=0"]
        marks = []  # (seconds, step) of each progress line
        with subprocess.Popen(cmd, env=environment(threads, extra_env), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) as run:
            lines = []
            for line in run.stdout:
                lines.append(line)
                match = PROGRESS.match(line)
                if match:
                    marks.append((time.perf_counter(), int(match.group(1))))
        if run.returncode != 0:
            sys.exit(f"busy_machine: {' '.join(cmd)} failed ({run.returncode}):\n{''.join(lines[-20:])}")
        if len(marks) < 3:
            sys.exit(f"busy_machine: too few progress lines in the output of {' '.join(cmd)}")
        (t0, s0), (t1, s1) = marks[0], marks[-1]
        return (s1 - s0) / (t1 - t0)


def torch_steps_per_second(python, data, threads, min_time):
    cmd = [python, os.path.join(HERE, "peers", "impl_torch.py"), "--data", data, "--workload", "burgers",
           "--threads", str(threads), "--min-time", str(min_time), "--mode", "eager"]
    run = subprocess.run(cmd, env=environment(threads, {}), capture_output=True, text=True, timeout=1800)
    if run.returncode != 0:
        sys.exit(f"busy_machine: {' '.join(cmd)} failed:\n{run.stderr[-2000:]}")
    return 1.0 / json.loads(run.stdout.strip().splitlines()[-1])["median_s"]


def has_torch(python):
    return subprocess.run([python, "-c", "import torch"], capture_output=True).returncode == 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--steps", type=int, default=400, help="Adam steps per eddy run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--busy-cpu", type=int, default=1)
    parser.add_argument("--dtypes", nargs="+", default=["float64", "float32"])
    parser.add_argument("--torch-python", default=os.path.join(ROOT, ".venv-bench", "bin", "python"))
    parser.add_argument("--env", nargs="*", default=[], metavar="NAME=VALUE",
                        help="extra environment for the eddy runs (e.g. OMP_WAIT_POLICY=active to compare)")
    args = parser.parse_args()
    extra_env = dict(item.split("=", 1) for item in args.env)

    use_torch = os.path.exists(args.torch_python) and has_torch(args.torch_python)
    data = None
    if use_torch:
        data = os.path.join(args.build, "bench-peers", "inputs.safetensors")
        if not os.path.exists(data):
            os.makedirs(os.path.dirname(data), exist_ok=True)
            subprocess.run([args.torch_python, "-c", f"import sys; sys.path.insert(0, {os.path.join(HERE, 'peers')!r});"
                            "import common; from safetensors.numpy import save_file;"
                            f"save_file(common.make_inputs(), {data!r})"], check=True)

    # (name, dtype or None for torch, environment): eddy as users run it (threads tuned as it trains,
    # solvers/common/thread_tuner.h), and float32 with the count held fixed, which shows what the
    # tuner adds to the blocks and the short thread waits.
    cases = [(f"eddy solve {dtype}", dtype, {}) for dtype in args.dtypes]
    cases.append(("eddy solve float32, threads fixed", "float32", {"EDDY_ADAPT_THREADS": "0"}))
    if use_torch:
        cases.append(("torch eager float32", None, {}))
    results = {}  # (case, threads, load) -> [steps/s]
    for round_index in range(args.rounds):
        for load in ("quiet", "busy"):
            spinner = busy_loop(args.busy_cpu) if load == "busy" else None
            try:
                for case, dtype, case_env in cases:
                    for threads in (1, 2):
                        if dtype is None:
                            speed = torch_steps_per_second(args.torch_python, data, threads, min_time=4.0)
                        else:
                            speed = eddy_steps_per_second(args.build, threads, dtype, args.steps,
                                                          {**case_env, **extra_env})
                        results.setdefault((case, threads, load), []).append(speed)
                        print(f"round {round_index + 1} {load:5s} {case} {threads} threads: {speed:.1f} steps/s",
                              file=sys.stderr, flush=True)
            finally:
                if spinner:
                    spinner.kill()
                    spinner.wait()

    print("| case | threads | quiet steps/s | busy steps/s | busy / quiet | busy, 2 threads / 1 thread |")
    print("|---|---|---|---|---|---|")
    for case, _, _ in cases:
        busy_one = statistics.median(results[(case, 1, "busy")])
        for threads in (1, 2):
            quiet = statistics.median(results[(case, threads, "quiet")])
            busy = statistics.median(results[(case, threads, "busy")])
            versus_one = f"{busy / busy_one:.2f}" if threads == 2 else ""
            print(f"| {case} | {threads} | {quiet:.1f} | {busy:.1f} | {busy / quiet:.2f} | {versus_one} |")


if __name__ == "__main__":
    main()
