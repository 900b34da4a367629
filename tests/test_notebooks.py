"""Every notebook in notebooks/ runs top to bottom on the CPU (code cells in one namespace)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, monkeypatch):
    nb = json.loads(path.read_text())
    monkeypatch.chdir(path.parent)
    monkeypatch.setenv("MPLBACKEND", "Agg")  # plots render to memory
    namespace: dict = {"__name__": "__notebook__"}
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        assert not cell.get("outputs"), f"{path.name}: cell {i} has outputs; strip them before committing"
        exec(compile("".join(cell["source"]), f"{path.name}[{i}]", "exec"), namespace)
