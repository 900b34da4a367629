"""The README's Quick start runs as a script; every other Python block of the README and docs/ compiles."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import dataset_path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
FENCE = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


def python_blocks(text: str) -> list[str]:
    return FENCE.findall(text)


def section(text: str, heading: str) -> str:
    """The text under the Markdown heading ``heading`` (any level), up to the next heading of that level."""
    match = re.search(rf"^(#+) {re.escape(heading)}\s*$", text, re.M)
    assert match, f"no heading {heading!r}"
    level = len(match.group(1))
    end = re.compile(rf"^#{{1,{level}}} ", re.M).search(text, match.end())
    return text[match.end() : end.start() if end else len(text)]


def test_quick_start_runs_as_a_script(tmp_path):
    data = dataset_path("soc-Epinions1.txt.gz")
    if data is None:
        pytest.skip("soc-Epinions1.txt.gz not found (set GRAPHJOBS_DATASETS or provide ../shared/datasets)")
    blocks = python_blocks(section(README.read_text(), "Quick start"))
    assert blocks, "the Quick start has no ```python block"
    shutil.copy(data, tmp_path / data.name)
    script = tmp_path / "quickstart.py"
    script.write_text("\n\n".join(blocks))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, script.name]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "75,879 vertices, 508,837 edges" in out
    top = re.search(r"^top 10 by PageRank: \[(.*)\]$", out, re.M)
    assert top and len(top.group(1).split(",")) == 10
    assert top.group(1).split(",")[0] == "18"  # soc-Epinions1's highest PageRank
    assert re.search(r"^top 10 PPR of 18: \[18, ", out, re.M)  # a source ranks first in its own PPR
    assert re.search(r"^top 10 PPR of 645: \[645, ", out, re.M)
    ranks = pd.read_parquet(tmp_path / "ranks.parquet")
    assert list(ranks.columns) == ["vertex", "pagerank"] and len(ranks) == 75_879
    assert abs(ranks.pagerank.sum() - 1) < 1e-6
    assert "job: 75,879 vertices written to" in out


@pytest.mark.parametrize("path", [README, *DOCS], ids=lambda p: p.name)
def test_python_blocks_compile(path):
    blocks = python_blocks(path.read_text())
    for i, code in enumerate(blocks):
        compile(code, f"{path.name}, python block {i + 1}", "exec")


def test_docs_pages_are_listed_and_linked():
    index = (ROOT / "docs" / "index.md").read_text()
    for page in DOCS:
        if page.name != "index.md":
            assert f"({page.name})" in index, f"docs/index.md does not link {page.name}"
    for page in [README, *DOCS]:
        for target in re.findall(r"\]\(([^)#:]+)\)", page.read_text()):
            assert (page.parent / target).exists(), f"{page.name}: broken link {target}"
