"""bench/accuracy/run.py, behind `make bench-accuracy`: it solves the chosen problems with `eddy
solve`, reads the errors their runs wrote, and replaces only the table between the markers of
the docs file; an unknown problem is refused before anything runs."""

import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
RUNNER = ROOT / "bench" / "accuracy" / "run.py"


def run_suite(eddy_cli, *arguments):
    build = eddy_cli.parent.parent  # build/bin/eddy
    return subprocess.run([sys.executable, str(RUNNER), "--build", str(build), *map(str, arguments)],
                          capture_output=True, text=True, timeout=600)


def test_suite_writes_its_table_between_the_markers(eddy_cli, tmp_path):
    docs = tmp_path / "benchmarks.md"
    docs.write_text("before\n<!-- accuracy-suite:begin -->\nold table\n<!-- accuracy-suite:end -->\nafter\n")
    run = run_suite(eddy_cli, "--only", "heat2d", "burgers_inverse", "--override", "training.adam.steps=3",
                    "training.lbfgs.iterations=0", "--update-docs", docs)
    assert run.returncode == 0, run.stderr
    text = docs.read_text()
    assert text.startswith("before\n<!-- accuracy-suite:begin -->\nMeasured ") and text.endswith(
        "<!-- accuracy-suite:end -->\nafter\n")
    assert "old table" not in text
    heat = next(line for line in text.splitlines() if line.startswith("| 2-D heat equation"))
    error = float(heat.split("|")[3])
    assert 0 < error < 10  # three steps: far from converged, but measured
    assert "`OMP_NUM_THREADS=1 eddy solve examples/pinn/heat2d.yaml training.adam.steps=3" in heat
    assert re.search(r"\| nu = [0-9.e-]+, [0-9.]+% off \|", text)


def test_suite_refuses_an_unknown_problem(eddy_cli):
    run = run_suite(eddy_cli, "--only", "heat2d", "navier_stokes_3d")
    assert run.returncode == 2 and "unknown problem(s) navier_stokes_3d" in run.stderr
