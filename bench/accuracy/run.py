#!/usr/bin/env python3
"""The PINN accuracy suite behind `make bench-accuracy`.

Solves each problem of SUITE with `eddy solve`, as a user would (the file as committed, its
output folder moved to a scratch directory), times it, reads the errors the run wrote against
its independent reference, and prints a table; with --update-docs it writes the rows it measured
into the table of docs/benchmarks.md between the accuracy markers, keeping the other problems'
rows (each row names its own date and commit). References are never a PINN's: published
data, analytic solutions or eddy's own classical solvers (bench/accuracy/README.md).

    python bench/accuracy/run.py --build build [--threads 1] [--jobs 2] [--only kdv cavity]
"""

import argparse
import dataclasses
import datetime
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import h5py

ROOT = Path(__file__).resolve().parents[2]
BEGIN, END = "<!-- accuracy-suite:begin -->", "<!-- accuracy-suite:end -->"


@dataclasses.dataclass
class Problem:
    name: str
    file: str
    what: str  # the problem, in a few words
    reference: str
    published: str  # the published figure and its source, or why there is none
    fields: tuple = ("u",)  # fields whose relative L2 error is reported
    learned: tuple = ()  # (parameter in solution.h5, how to map it, true value) for inverse problems


SUITE = [
    Problem("burgers", "examples/pinn/burgers.yaml", "Burgers, nu = 0.01/pi, shock",
            "Raissi et al. 2019 data", "6.7e-4 (Raissi et al. 2019); 1.45e-2 (PINNacle, plain PINN)"),
    Problem("allen_cahn", "examples/pinn/allen_cahn.yaml", "Allen-Cahn, stiff, sharp interfaces",
            "eddy's spectral solver (data/allen_cahn.h5)",
            "5.37e-5 (jaxpi), 2.24e-5 (PirateNet; Wang et al. 2024), after 10^5+ steps on a GPU"),
    Problem("kdv", "examples/pinn/kdv.yaml", "KdV one-soliton, third order, dispersive",
            "analytic", "none for this solution (PirateNets' KdV, 4.27e-4, is the cos(pi x) problem)"),
    Problem("cavity", "examples/pinn/cavity.yaml", "lid-driven cavity, Re = 100, steady Navier-Stokes",
            "Ghia et al. 1982 centre lines", "none at Re = 100 on these points", fields=("u", "v")),
    Problem("kovasznay", "examples/pinn/kovasznay.yaml", "Kovasznay flow, Re = 20, steady Navier-Stokes",
            "analytic", "u 7.2e-4 (NSFNet; Jin et al. 2021)", fields=("u", "v", "p")),
    Problem("heat2d", "examples/pinn/heat2d.yaml", "2-D heat equation, time-dependent",
            "analytic", "none"),
    Problem("burgers_inverse", "examples/pinn/burgers_inverse.yaml", "inverse: Burgers' nu from 1% noisy data",
            "true nu = 0.01/pi", "none comparable", fields=(),
            learned=("log_nu", math.exp, 0.01 / math.pi)),
]


def run(problem, build, threads, scratch, overrides):
    """Solves one problem; returns a dict of what the table shows."""
    out_dir = Path(scratch) / problem.name
    command = [str(Path(build) / "bin" / "eddy"), "solve", problem.file, f"output.dir={out_dir}", *overrides]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    start = time.perf_counter()
    completed = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    log = Path(scratch) / f"{problem.name}.log"
    log.write_text(completed.stdout + completed.stderr)
    result = {"name": problem.name, "seconds": seconds, "threads": threads, "returncode": completed.returncode,
              "log": str(log)}
    if completed.returncode != 0:
        result["error"] = (completed.stderr.strip().splitlines() or ["(no message)"])[-1]
        return result
    with h5py.File(out_dir / "solution.h5", "r") as solution:
        result["errors"] = {f: float(solution.attrs[f"{f}_relative_l2"]) for f in problem.fields}
        if problem.learned:
            name, mapping, true_value = problem.learned
            value = mapping(float(solution[f"parameters/{name}"][()].reshape(-1)[0]))
            result["learned"] = (value, abs(value - true_value) / true_value)
    return result


def error_cell(problem, result):
    if "error" in result:
        return f"failed (exit {result['returncode']}): {result['error']}"
    if problem.learned:
        value, relative = result["learned"]
        return f"nu = {value:.5g}, {100 * relative:.1f}% off"
    return ", ".join(f"{f} {e:.2e}" if len(problem.fields) > 1 else f"{e:.2e}" for f, e in result["errors"].items())


TABLE_HEAD = ["| problem | reference | relative L2 (eddy) | wall time | threads | measured | published | command |",
              "|---|---|---|---|---|---|---|---|"]


def rows(results, overrides, jobs):
    """The table row of each result, by problem name."""
    by_name = {p.name: p for p in SUITE}
    suffix = "".join(f" {o}" for o in overrides)
    measured = f"{datetime.date.today().isoformat()}, {git_commit()}, {jobs} at a time"
    lines = {}
    for r in results:
        p = by_name[r["name"]]
        command = f"`OMP_NUM_THREADS={r['threads']} eddy solve {p.file}{suffix}`"
        lines[p.name] = (f"| {p.what} | {p.reference} | {error_cell(p, r)} | {r['seconds'] / 60:.1f} min | "
                         f"{r['threads']} | {measured} | {p.published} | {command} |")
    return lines


def git_commit():
    try:
        # "-dirty" when the tree has changes: the row did not measure the commit alone.
        return subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cells(line):
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def update_docs(path, new_rows):
    """Writes new_rows into the table between the markers, in SUITE's order, keeping the rows
    already there of the problems not measured now."""
    text = Path(path).read_text()
    pattern = re.compile(re.escape(BEGIN) + "(.*?)" + re.escape(END), re.S)
    block = pattern.search(text)
    if not block:
        sys.exit(f"{path}: the markers {BEGIN} and {END} are missing")
    kept = {}
    for line in block.group(1).splitlines():
        problem = next((p for p in SUITE if cells(line)[0] == p.what), None)
        if problem and len(cells(line)) == len(cells(TABLE_HEAD[0])):
            kept[problem.name] = line
    kept.update(new_rows)
    body = "\n".join(TABLE_HEAD + [kept[p.name] for p in SUITE if p.name in kept])
    Path(path).write_text(text[:block.start()] + f"{BEGIN}\n{body}\n{END}" + text[block.end():])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build", help="the build folder holding bin/eddy")
    parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of each solve")
    parser.add_argument("--jobs", type=int, default=1,
                        help="solves run side by side (each with --threads); wall times grow when they share cores")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="a subset of: " + ", ".join(p.name for p in SUITE))
    parser.add_argument("--override", nargs="*", default=[], metavar="KEY=VALUE",
                        help="config overrides for every problem (a quick check: training.adam.steps=100)")
    parser.add_argument("--update-docs", metavar="FILE", help="replace the table between the accuracy markers")
    parser.add_argument("--keep", metavar="DIR",
                        help="write each problem's run folder and log under DIR and keep them (default: a "
                             "temporary folder, removed at the end)")
    args = parser.parse_args()

    names = [p.name for p in SUITE]
    unknown = sorted(set(args.only or []) - set(names))
    if unknown:
        parser.error(f"unknown problem(s) {', '.join(unknown)}; the suite has {', '.join(names)}")
    if not (Path(args.build) / "bin" / "eddy").exists():
        parser.error(f"{args.build}/bin/eddy not found: build first (make build)")
    chosen = [p for p in SUITE if not args.only or p.name in args.only]

    with tempfile.TemporaryDirectory(prefix="eddy-accuracy-") as temporary:
        scratch = Path(args.keep or temporary).resolve()
        scratch.mkdir(parents=True, exist_ok=True)
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = [pool.submit(run, p, args.build, args.threads, scratch, args.override) for p in chosen]
            results = []
            for problem, future in zip(chosen, futures):
                result = future.result()
                print(f"{problem.name}: {error_cell(problem, result)} in {result['seconds'] / 60:.1f} min", flush=True)
                if "error" in result:
                    print(Path(result["log"]).read_text()[-2000:], file=sys.stderr)
                results.append(result)

    measured = rows(results, args.override, args.jobs)
    print("\n".join(TABLE_HEAD + list(measured.values())))
    if args.update_docs:
        update_docs(args.update_docs, measured)
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
