"""The Burgers workload as a user runs it: `eddy solve` on a problem file, end to end.

The problem has the workload's sizes (2 -> 8 x 20 -> 1 tanh, 10,000 interior points and
100 initial plus 100 boundary points, Adam at the same learning rate) and the solver's defaults
for everything else: its own sampled points and initial weights, input normalisation, logging
every 100 steps and a checkpoint every 1,000; its dtype is the workload file's. The loss values
therefore differ from the other implementations' and are not compared (the row's note says so);
the work per step is the same.

A step's time is what a longer run costs over a shorter one, divided by the extra steps: the
process's start, the training step's compilation and the final output cancel, and whatever the
solver does per step besides the step itself (logging, history, checkpoints) is counted. The
median of three such differences, each over at least --min-time seconds of steps.
"""

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

SHORT_RUN = 10  # Adam steps of the run whose cost is subtracted


def problem_text(dtype):
    return f"""\
dtype: {dtype}
seed: 0
geometry:
  space: {{type: interval, min: -1, max: 1}}
  time: {{min: 0, max: 1}}
fields: [u]
parameters:
  nu: {common.BURGERS_NU!r}
equations:
  burgers: u_t + u*u_x - nu*u_xx
conditions:
  pde: {{type: interior, equation: burgers, points: 10000}}
  initial: {{type: initial, field: u, value: -sin(pi*x), points: 100}}
  walls: {{type: dirichlet, on: x == -1 || x == 1, field: u, value: 0, points: 100}}
model: {{architecture: mlp, width: 20, depth: 8, activation: tanh}}
training:
  adam: {{steps: {SHORT_RUN}, learning_rate: {common.ADAM['lr']!r}}}
output:
  dir: run
"""


def seconds_for(cli, problem, steps):
    start = time.perf_counter()
    done = subprocess.run([cli, "solve", problem, f"training.adam.steps={steps}", "--quiet"],
                          cwd=os.path.dirname(problem), capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"eddy solve failed ({done.returncode}): {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    return elapsed


def main():
    args = common.arguments(lambda p: p.add_argument("--cli", required=True, help="the eddy executable"))
    if args.workload != "burgers":
        sys.exit(f"eddy solve: only the burgers workload has a problem file here, not {args.workload}")
    note = "own points and initial weights (same sizes); losses not compared"
    nan = float("nan")
    if args.check_only:
        common.report("eddy solve", args, [nan, nan], 0.0, 0, note)
        return
    cli = args.cli
    with tempfile.TemporaryDirectory() as folder:
        problem = os.path.join(folder, "burgers.yaml")
        with open(problem, "w") as f:
            f.write(problem_text(common.dtype_of(common.load_inputs(args.data))))
        # Warms the kernel cache, then estimates a step to size the longer runs.
        seconds_for(cli, problem, SHORT_RUN)
        short = seconds_for(cli, problem, SHORT_RUN)
        estimate = (seconds_for(cli, problem, SHORT_RUN + 50) - short) / 50
        extra = max(50, int(args.min_time / max(estimate, 1e-4)))
        per_step = []
        for _ in range(3):
            short = seconds_for(cli, problem, SHORT_RUN)
            per_step.append((seconds_for(cli, problem, SHORT_RUN + extra) - short) / extra)
    common.report("eddy solve", args, [nan, nan], statistics.median(per_step), 3 * extra, note,
                  rusage_of=resource.RUSAGE_CHILDREN)


if __name__ == "__main__":
    main()
