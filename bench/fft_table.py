#!/usr/bin/env python3
"""The FFT table of docs/benchmarks.md over several processes.

Each `eddy_bench` process plans its transforms anew with FFTW_MEASURE, eddy's and the baseline's
alike, and FFTW_MEASURE picks plans from timings: on a shared machine one process's plans can be
10 to 25% faster or slower than the next one's, on either side. One process's eddy/FFTW ratio
therefore carries the luck of two sets of plans. This runs the FFT table in several processes
and prints, per row, the median of their ratios and the range; for irfft2 also against FFTW
keeping its input (a copy of the spectrum, then the same plan), which computes what irfft2 does.

    python3 bench/fft_table.py [--build build] [--processes 3]
"""

import argparse
import re
import statistics
import subprocess
import sys

ROW = re.compile(r"^\| (f32|f64) (i?r?fft2) (\S+ x\d+) \| (\d) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| \S+ \| "
                 r"([\d.]+|-) \| ([\d.]+|-) \|")


def fft_rows(build):
    """One eddy_bench process's FFT rows: {(precision, transform, size, threads): (eddy us, fftw us, ratio,
    ratio to FFTW keeping its input or None)}."""
    command = [f"{build}/bench/eddy_bench", "--benchmark_filter=^$", "--no_gemm_table", "--no_elementwise_table",
               "--no_pinn_table", "--no_laplacian_table", "--no_fno_table"]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    rows = {}
    for line in output.splitlines():
        match = ROW.match(line)
        if match:
            precision, transform, size, threads, eddy_us, fftw_us, ratio, _, kept_ratio = match.groups()
            rows[(precision, transform, size, int(threads))] = (float(eddy_us), float(fftw_us), float(ratio),
                                                                None if kept_ratio == "-" else float(kept_ratio))
    if not rows:
        sys.exit(f"fft_table: no FFT rows in the output of {' '.join(command)}")
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build", help="the CMake build directory (default: build)")
    parser.add_argument("--processes", type=int, default=3, help="eddy_bench processes to run (default: 3)")
    args = parser.parse_args()
    if args.processes < 1:
        sys.exit(f"fft_table: --processes is {args.processes}; it must be at least 1")

    runs = []
    for process in range(args.processes):
        print(f"fft_table: process {process + 1} of {args.processes}", file=sys.stderr, flush=True)
        runs.append(fft_rows(args.build))

    print(f"| case | threads | eddy µs | FFTW µs | eddy/FFTW, median of {args.processes} | range | overhead | "
          "eddy / FFTW keeping its input, median | range |")
    print("|---|---|---|---|---|---|---|---|---|")
    for key in runs[0]:
        measured = [run[key] for run in runs if key in run]
        eddy_us = statistics.median(m[0] for m in measured)
        fftw_us = statistics.median(m[1] for m in measured)
        ratios = [m[2] for m in measured]
        ratio = statistics.median(ratios)
        precision, transform, size, threads = key
        kept = [m[3] for m in measured if m[3] is not None]
        kept_columns = f"{statistics.median(kept):.2f} | {min(kept):.2f} - {max(kept):.2f}" if kept else "- | -"
        print(f"| {precision} {transform} {size} | {threads} | {eddy_us:.1f} | {fftw_us:.1f} | {ratio:.2f} | "
              f"{min(ratios):.2f} - {max(ratios):.2f} | {(ratio - 1) * 100:+.0f}% | {kept_columns} |")


if __name__ == "__main__":
    main()
