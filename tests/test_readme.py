"""Every code block of the README and docs/ runs on a CPU: the Quick start as a script with its output
checked, every other block in order in one fresh process per file; a block that cannot run on a CPU-only
machine says why in a marker, ``<!-- not run: REASON -->`` on the line before its fence."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import child_env, dataset_path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
FENCE = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
SHELLS = ("bash", "sh")
MARKER = re.compile(r"^<!-- (not run|file): (.+?) -->$")
DATASET = re.compile(r"[\w.-]+\.txt\.gz")
# One page's blocks together, with room for a loaded CI machine
PAGE_TIMEOUT = 300


def python_blocks(text: str) -> list[str]:
    return FENCE.findall(text)


def section(text: str, heading: str) -> str:
    """The text under the Markdown heading ``heading`` (any level), up to the next heading of that level."""
    match = re.search(rf"^(#+) {re.escape(heading)}\s*$", text, re.M)
    assert match, f"no heading {heading!r}"
    level = len(match.group(1))
    end = re.compile(rf"^#{{1,{level}}} ", re.M).search(text, match.end())
    return text[match.end() : end.start() if end else len(text)]


@dataclass(frozen=True)
class Block:
    """A fenced code block: its page, the line of its opening fence, its language, its text, and the
    marker on the line before the fence (``not run`` with a reason, or ``file`` with the name the runner
    saves it under for later blocks to read), if any."""

    page: Path
    line: int
    lang: str
    code: str
    marker: tuple[str, str] | None

    @property
    def where(self) -> str:
        return f"{self.page.name}:{self.line}"


def code_blocks(page: Path) -> list[Block]:
    """Every fenced code block of ``page``, in order."""
    lines = page.read_text().split("\n")
    blocks, i = [], 0
    while i < len(lines):
        if not lines[i].startswith("```"):
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].rstrip() == "```")
        match = MARKER.match(lines[i - 1]) if i else None
        code = "\n".join(lines[i + 1 : end]) + "\n"
        blocks.append(Block(page, i + 1, lines[i][3:].strip(), code, match.groups() if match else None))
        i = end + 1
    return blocks


def quick_start_lines() -> range:
    """The README lines of the Quick start, whose block test_quick_start_runs_as_a_script runs."""
    text = README.read_text()
    start = text.index(section(text, "Quick start"))
    first = text.count("\n", 0, start) + 1
    return range(first, first + section(text, "Quick start").count("\n") + 1)


def not_run(block: Block) -> str | None:
    """Why the page's runner leaves ``block`` out, or None when it runs it."""
    if block.marker and block.marker[0] == "not run":
        return block.marker[1]
    if block.page == README and block.line in quick_start_lines():
        return "run as a script, its output checked, by test_quick_start_runs_as_a_script"
    return None


def test_quick_start_runs_as_a_script(tmp_path):
    data = dataset_path("soc-Epinions1.txt.gz")
    if data is None:
        pytest.skip("soc-Epinions1.txt.gz not found (set GRAPHJOBS_DATASETS or provide ../shared/datasets)")
    blocks = python_blocks(section(README.read_text(), "Quick start"))
    assert blocks, "the Quick start has no ```python block"
    shutil.copy(data, tmp_path / data.name)
    script = tmp_path / "quickstart.py"
    script.write_text("\n\n".join(blocks))
    env = child_env()
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


RUN = [page for page in PAGES if any(not_run(block) is None for block in code_blocks(page))]
NOT_RUN = [(block.where, not_run(block)) for page in PAGES for block in code_blocks(page) if not_run(block)]


@pytest.mark.parametrize("page", RUN, ids=lambda p: p.name)
def test_code_blocks_run(page, tmp_path):
    """The page's blocks, but those marked ``not run``, run in order in one fresh process on the CPU, in a
    folder holding the SNAP files they name."""
    blocks = [block for block in code_blocks(page) if not_run(block) is None]
    for block in blocks:
        runnable = block.lang in ("python", *SHELLS) or (block.marker and block.marker[0] == "file")
        assert runnable, f"{block.where}: a ```{block.lang} block runs as python or bash, or is marked"
    for name in sorted({name for block in blocks for name in DATASET.findall(block.code)}):
        data = dataset_path(name)
        if data is None:
            pytest.skip(f"{name} not found (set GRAPHJOBS_DATASETS or provide ../shared/datasets)")
        shutil.copy(data, tmp_path / name)
    spec = [
        {
            "where": block.where,
            "page": block.page.name,
            "line": block.line,
            "lang": block.lang,
            "code": block.code,
            "file": block.marker[1] if block.marker and block.marker[0] == "file" else None,
        }
        for block in blocks
    ]
    (tmp_path / "blocks.json").write_text(json.dumps(spec))
    env = child_env(GRAPHJOBS_PYTHON=sys.executable, CUDA_VISIBLE_DEVICES="")
    shutil.copy(ROOT / "tests" / "run_blocks.py", tmp_path)  # its folder, not tests/, goes on sys.path
    cmd = [sys.executable, "run_blocks.py", "blocks.json"]
    proc = subprocess.Popen(
        cmd,
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=PAGE_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the blocks' clusters and commands too
        out, _ = proc.communicate()
        pytest.fail(f"{page.name}: the blocks ran past {PAGE_TIMEOUT} s\n{out[-5000:]}")
    print(out)  # each block's output and seconds
    assert proc.returncode == 0, out[-5000:]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_code_blocks_are_fenced_and_markers_mark_blocks(page):
    """The runner sees every block: none is indented (an indented block would escape it), every fence
    names its language, and a marker stands right above a fence."""
    lines = page.read_text().split("\n")
    fences = {block.line for block in code_blocks(page)}
    inside = set().union(*(range(b.line, b.line + b.code.count("\n") + 1) for b in code_blocks(page)))
    for i, line in enumerate(lines, 1):
        if i in inside:
            continue
        assert not (line.startswith("    ") and not lines[i - 2].strip()), (
            f"{page.name}:{i}: an indented block"
        )
        if MARKER.match(line):
            assert i + 1 in fences, f"{page.name}:{i}: a marker not right above a fence"
    for block in code_blocks(page):
        assert block.lang, f"{block.where}: a fence without a language"


@pytest.mark.parametrize("where, reason", NOT_RUN, ids=[where for where, _ in NOT_RUN])
def test_blocks_not_run(where, reason):
    """Each block left out, listed with its reason in the skips of the run's summary."""
    pytest.skip(f"{where} not run: {reason}")
