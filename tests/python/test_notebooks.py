"""Executes every notebook in examples/notebooks, failing on any cell error.

The notebooks run as a user would start them from the repository root: in a kernel of this same
interpreter (the project's .venv), with the working directory at the root and this process's
environment, so PYTHONPATH (ctest points it at <build>/python) finds the eddy module built here.
The notebooks check their own numbers with asserts.
"""

import os
import pathlib
import sys
import time

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
from jupyter_client.kernelspec import KernelSpecManager  # noqa: E402
from jupyter_client.manager import KernelManager  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "examples" / "notebooks").glob("*.ipynb"))
TIMEOUT_S = 300  # per cell; each notebook takes well under a minute single-threaded


def kernel_manager() -> KernelManager:
    """A python3 kernel manager that launches this interpreter, whatever kernelspecs the user has.

    ipykernel ships a 'python3' spec into sys.prefix whose argv starts with "python", which
    jupyter_client replaces by sys.executable; a spec in ~/.local/share/jupyter would take
    precedence, so the search is limited to sys.prefix.
    """
    specs = KernelSpecManager(kernel_dirs=[os.path.join(sys.prefix, "share", "jupyter", "kernels")])
    manager = KernelManager(kernel_name="python3", kernel_spec_manager=specs)
    command = manager.format_kernel_cmd()
    assert pathlib.Path(command[0]).resolve() == pathlib.Path(sys.executable).resolve(), (
        f"the python3 kernel would run {command[0]}, not {sys.executable}")
    return manager


def test_notebooks_exist():
    assert NOTEBOOKS, "no notebooks in examples/notebooks"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path: pathlib.Path):
    notebook = nbformat.read(path, as_version=4)
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), (
        f"{path.name} has stored outputs: clear them before committing")
    client = nbclient.NotebookClient(notebook, km=kernel_manager(), timeout=TIMEOUT_S,
                                     resources={"metadata": {"path": str(ROOT)}})
    start = time.perf_counter()
    client.execute()  # raises CellExecutionError, naming the cell and its traceback, on any error
    print(f"{path.name}: {time.perf_counter() - start:.1f} s")
