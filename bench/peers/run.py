"""`make bench-peers`: eddy (C++ and Python) against PyTorch (eager and compiled) and JAX (jit) on
the workloads of common.py, in the interpreter of .venv-bench (scripts/install-bench-deps.sh).

For each workload the reference (PyTorch eager when installed, else eddy C++) runs first and
prints its two check values; every implementation is then started with them and stops, before
it times anything, if its own differ by more than --rtol. Each (implementation, workload,
threads) runs in its own process, so peak RSS is that process's alone.

Threads: OMP_NUM_THREADS, MKL_NUM_THREADS and OPENBLAS_NUM_THREADS = n, torch.set_num_threads(n)
with one inter-op thread, eddy.set_num_threads(n), XLA_FLAGS with intra_op_parallelism_threads=n
(and --xla_cpu_multi_thread_eigen=false for n = 1), and the process pinned to n CPUs by taskset.
eddy's OpenMP threads wait between parallel regions as the `eddy` command's do in every eddy row
(GOMP_SPINCOUNT=1000: the CLI, the Python module and eddy_peers each set it; src/cli/thread_waits.h).
"""

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import common  # noqa: E402

IMPLS = ("eddy C++", "eddy compiled", "eddy Python", "eddy solve", "torch eager", "torch.compile", "JAX jit")
# Implementations that run only some workloads; the others run them all.
ONLY_WORKLOADS = {"eddy solve": ("burgers",)}
BEGIN, END = "<!-- bench-peers:begin -->", "<!-- bench-peers:end -->"


def command(impl, build):
    py = [sys.executable]
    return {
        "eddy C++": [os.path.join(build, "bench", "eddy_peers")],
        "eddy compiled": [os.path.join(build, "bench", "eddy_peers"), "--compiled"],
        "eddy Python": py + [os.path.join(HERE, "impl_eddy.py")],
        "eddy solve": py + [os.path.join(HERE, "impl_eddy_solve.py"), "--cli", os.path.abspath(os.path.join(build, "bin", "eddy"))],
        "torch eager": py + [os.path.join(HERE, "impl_torch.py"), "--mode", "eager"],
        "torch.compile": py + [os.path.join(HERE, "impl_torch.py"), "--mode", "compile"],
        "JAX jit": py + [os.path.join(HERE, "impl_jax.py")],
    }[impl]


def available(impl):
    module = {"torch eager": "torch", "torch.compile": "torch", "JAX jit": "jax"}.get(impl)
    if module is None:
        return True
    try:
        importlib.metadata.version(module)
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


def environment(threads, build):
    env = dict(os.environ)
    n = str(threads)
    env.update(OMP_NUM_THREADS=n, MKL_NUM_THREADS=n, OPENBLAS_NUM_THREADS=n,
               XLA_FLAGS=f"--xla_cpu_multi_thread_eigen={'true' if threads > 1 else 'false'} "
                         f"intra_op_parallelism_threads={n}",
               PYTHONPATH=os.pathsep.join(filter(None, [os.path.join(build, "python"), env.get("PYTHONPATH")])),
               TF_CPP_MIN_LOG_LEVEL="2")
    return env


def pinned(cmd, threads):
    """`cmd` run on CPUs 0..threads-1 when taskset is there and the machine has that many."""
    if shutil.which("taskset") and (os.cpu_count() or 1) >= threads:
        return ["taskset", "-c", ",".join(str(c) for c in range(threads))] + cmd
    return cmd


def launch(impl, workload, threads, args, extra):
    device = ["--device", args.device] if args.device != "cpu" else []
    cmd = pinned(command(impl, args.build) + ["--data", args.data, "--workload", workload, "--threads", str(threads)]
                 + device + extra, threads)
    try:
        done = subprocess.run(cmd, env=environment(threads, args.build), capture_output=True, text=True,
                              timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {args.timeout} s"
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return None, f"exit {done.returncode}: {tail}"
    return json.loads(lines[-1]), None


PEAK_PROBE = """
import sys, time, numpy as np
a = np.ones((512, 512), sys.argv[1]); b = np.ones((512, 512), sys.argv[1])
a @ b
best, start = 1e9, time.perf_counter()
while time.perf_counter() - start < 2.0:
    t0 = time.perf_counter(); a @ b; best = min(best, time.perf_counter() - t0)
print(2 * 512 ** 3 / best)
"""


def gemm_peak(threads, build, dtype):
    """FLOP/s of a 512^3 matrix product in `dtype` (NumPy's OpenBLAS), best of 2 s, at `threads`."""
    cmd = pinned([sys.executable, "-c", PEAK_PROBE, dtype], threads)
    done = subprocess.run(cmd, env=environment(threads, build), capture_output=True, text=True, check=True)
    return float(done.stdout.split()[-1])


def flop_limit_table(results, peaks, args, impls):
    """Each eddy row's time over the FLOP limit: the step's GEMM FLOPs at the measured peak."""
    eddy_impls = [i for i in impls if i.startswith("eddy")]
    gemm = {"float32": "sgemm", "float64": "dgemm"}[args.dtype]
    lines = ["| workload | threads | GEMM GFLOP per step | " + gemm + " 512^3 GFLOP/s | FLOP limit ms | "
             + " | ".join(f"{i} / limit" for i in eddy_impls) + " |",
             "|---|---|---|---|---" + "|---" * len(eddy_impls) + "|"]
    for workload in args.workloads:
        if workload not in common.STEP_FLOPS:
            continue
        flops = common.STEP_FLOPS[workload]()
        for threads in args.threads:
            limit = flops / peaks[threads]
            cells = [f"{results[(i, workload, threads)]['median_s'] / limit:.2f}"
                     if (i, workload, threads) in results else "-" for i in eddy_impls]
            lines.append(f"| {workload} | {threads} | {flops / 1e9:.3f} | {peaks[threads] / 1e9:.1f} | "
                         f"{limit * 1e3:.1f} | " + " | ".join(cells) + " |")
    return lines


def machine():
    model, cpus = platform.processor() or "unknown", os.cpu_count()
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
        model = fields.get("Model name", model).strip()
        cores = int(fields.get("Core(s) per socket", "0")) * int(fields.get("Socket(s)", "1"))
        threads = fields.get("Thread(s) per core", "?").strip()
        return f"{model}, {cpus} CPUs ({cores} cores, {threads} thread(s) per core)"
    except (OSError, ValueError):
        return f"{model}, {cpus} CPUs"


def versions():
    out = [f"Python {platform.python_version()}"]
    for package in ("torch", "jax", "jaxlib", "numpy"):
        try:
            out.append(f"{package} {importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            out.append(f"{package} not installed")
    return ", ".join(out)


def markdown(results, failures, args, impls, peaks):
    lines = [f"Measured {datetime.date.today().isoformat()} on {machine()}; {versions()}; {args.dtype}.",
             f"Median of at least 5 steps and {args.min_time:g} s after 2 warm-up steps (the first"
             " call, which compiles, is not timed).", ""]
    # Ratios are against eddy's fastest mode that ran: compiled when present, else eager C++.
    base = "eddy compiled" if "eddy compiled" in impls else "eddy C++"
    peers = [i for i in impls if i != base]
    def row_of(cells):
        return "| " + " | ".join(cells) + " |"

    lines.append(row_of(["workload", "threads", f"{base} ms"] + [f"{p} ms" for p in peers]
                        + [f"{p} / {base}" for p in peers]))
    lines.append(row_of(["---"] * (3 + 2 * len(peers))))
    rss = ["", "| workload | threads | " + " | ".join(f"{i} MiB" for i in impls) + " |",
           "|---|---" + "|---" * len(impls) + "|"]
    for workload in args.workloads:
        for threads in args.threads:
            row = {i: results.get((i, workload, threads)) for i in impls}
            eddy = row.get(base)

            def ms(r, impl):
                if r is None:
                    return failures.get((impl, workload, threads), "not run").split(":")[0]
                return f"{r['median_s'] * 1e3:.1f}"

            def ratio(r):
                return f"{r['median_s'] / eddy['median_s']:.2f}" if r and eddy else "-"

            lines.append(row_of([workload, str(threads), ms(eddy, base)] + [ms(row[p], p) for p in peers]
                                + [ratio(row[p]) for p in peers]))
            rss.append(f"| {workload} | {threads} | "
                       + " | ".join(f"{row[i]['peak_rss_mib']:.0f}" if row[i] else "-" for i in impls) + " |")
    lines += ["", "Peak RSS of each process (includes the interpreter and the imported libraries):"] + rss
    if peaks:
        lines += ["", "The FLOP limit: the least GEMM work of a step (common.STEP_FLOPS) at the GEMM peak measured"
                  " in this run; 1.00 would be a step at that limit:", ""] + flop_limit_table(results, peaks, args, impls)
    notes = sorted({f"{impl}, {workload}: {r['note']}" for (impl, workload, _), r in results.items() if r.get("note")})
    if notes:
        lines += ["", "Notes:"] + [f"- {note}" for note in notes]
    if failures:
        lines += ["", "Failures:"] + [f"- {i}, {w}, {t} thread(s): {why}" for (i, w, t), why in sorted(failures.items())]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--data", default=None, help="input file (default BUILD/bench-peers/inputs.safetensors)")
    parser.add_argument("--workloads", nargs="+", default=list(common.WORKLOADS), choices=common.WORKLOADS)
    parser.add_argument("--impls", nargs="+", default=list(IMPLS), choices=IMPLS)
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                        help="where the workloads run (cuda: eddy C++/compiled and PyTorch only)")
    parser.add_argument("--min-time", type=float, default=3.0)
    parser.add_argument("--dtype", default="float32", choices=("float32", "float64"),
                        help="of every weight and point, so of every implementation's arithmetic")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--timeout", type=int, default=900, help="seconds per process")
    parser.add_argument("--update-docs", metavar="FILE", help="replace the generated section of FILE")
    args = parser.parse_args()
    args.data = args.data or os.path.join(args.build, "bench-peers", "inputs.safetensors")

    from safetensors.numpy import save_file
    os.makedirs(os.path.dirname(args.data), exist_ok=True)
    save_file(common.make_inputs(args.dtype), args.data)

    impls = [i for i in args.impls if available(i)]
    for missing in sorted(set(args.impls) - set(impls)):
        print(f"{missing}: not installed in {sys.executable}; run scripts/install-bench-deps.sh", file=sys.stderr)
    reference_impl = "torch eager" if "torch eager" in impls else impls[0]
    peaks = {}
    if args.device == "cpu" and any(w in common.STEP_FLOPS for w in args.workloads):
        peaks = {threads: gemm_peak(threads, args.build, args.dtype) for threads in args.threads}
    results, failures = {}, {}
    mismatch = False
    for workload in args.workloads:
        ref, why = launch(reference_impl, workload, 1, args, ["--check-only"])
        if ref is None:
            for impl in impls:
                for threads in args.threads:
                    failures[(impl, workload, threads)] = f"reference ({reference_impl}) failed: {why}"
            print(f"{workload}: the reference {reference_impl} failed: {why}", file=sys.stderr)
            mismatch = True
            continue
        print(f"{workload}: reference {reference_impl}: " + ", ".join(
            f"{name} = {value:.9g}" for name, value in zip(common.CHECKS[workload], ref["checks"])), flush=True)
        expect = ["--expect"] + [repr(v) for v in ref["checks"]] + ["--rtol", str(args.rtol),
                                                                      "--min-time", str(args.min_time)]
        for threads in args.threads:
            for impl in impls:
                if workload not in ONLY_WORKLOADS.get(impl, (workload,)):
                    continue
                result, why = launch(impl, workload, threads, args, expect)
                if result is None:
                    failures[(impl, workload, threads)] = why
                    mismatch = mismatch or "reference has" in why
                    print(f"  {impl:14s} {threads} thread(s): FAILED {why}", flush=True)
                    continue
                results[(impl, workload, threads)] = result
                print(f"  {impl:14s} {threads} thread(s): {result['median_s'] * 1e3:9.1f} ms/step "
                      f"({result['steps']} steps), peak RSS {result['peak_rss_mib']:.0f} MiB, checks "
                      + ", ".join(f"{c:.7g}" for c in result["checks"]), flush=True)

    if peaks:
        # The machine's speed drifts over minutes: the limit is the faster of the two probes.
        peaks = {threads: max(peak, gemm_peak(threads, args.build, args.dtype)) for threads, peak in peaks.items()}
    table = markdown(results, failures, args, impls, peaks)
    print("\n" + table)
    out = os.path.join(os.path.dirname(args.data), "results.md")
    with open(out, "w") as f:
        f.write(table + "\n")
    if args.update_docs:
        with open(args.update_docs) as f:
            text = f.read()
        if BEGIN in text and END in text:
            head, rest = text.split(BEGIN, 1)
            text = head + BEGIN + "\n" + table + "\n" + END + rest.split(END, 1)[1]
            with open(args.update_docs, "w") as f:
                f.write(text)
            print(f"\nwrote the table into {args.update_docs}")
        else:
            print(f"\n{args.update_docs} has no {BEGIN} ... {END} section; table left in {out}", file=sys.stderr)
    if mismatch:
        sys.exit("bench-peers: a check value differed from the reference (see above); those rows are not timed")
    if failures:
        sys.exit("bench-peers: some implementations failed (see above)")


if __name__ == "__main__":
    main()
