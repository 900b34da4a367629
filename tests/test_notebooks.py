"""Every notebook in notebooks/ is stored with the outputs of its cells as _src/build.py writes them, and
runs top to bottom in a Jupyter kernel (nbclient) on the CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

# in the test extra (make test); absent on machines that run only the GPU tests
nbformat = pytest.importorskip("nbformat")
NotebookClient = pytest.importorskip("nbclient").NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, monkeypatch):
    import importlib.util

    spec = importlib.util.spec_from_file_location("build", path.parent / "_src" / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    stored = nbformat.read(path, as_version=4)
    want = build.notebook(build.NOTEBOOKS[path.name])
    assert [c.source for c in stored.cells] == [c.source for c in want.cells], (
        f"{path.name} differs from _src/build.py: run python notebooks/_src/build.py --execute"
    )
    for i, cell in enumerate(stored.cells):  # stored as run: every code cell ran, none failed
        if cell.cell_type == "code":
            assert cell.execution_count, f"{path.name}: cell {i} is stored without being run (--execute)"
            assert not [o for o in cell.outputs if o.output_type == "error"], f"{path.name}: cell {i} failed"
    nb = want
    monkeypatch.setenv("MPLBACKEND", "Agg")  # the kernel inherits it: plots render to memory
    client = NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()  # a failing cell raises CellExecutionError with its traceback
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors


def test_the_four_notebooks_are_there():
    assert [p.name for p in NOTEBOOKS] == [
        "01_quickstart.ipynb",
        "02_influence_maximization.ipynb",
        "03_simrank.ipynb",
        "04_batch_jobs.ipynb",
    ]
