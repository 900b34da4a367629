"""Progress inside a job's long stages (``pipelines._progress``): the operators' counts with an ETA on the
stage line of Dask's local scheduler, the compilation announced once, nothing when quiet."""

from __future__ import annotations

import json
import os
import re

import pytest

import pipelines
from pipelines import _output, _progress
from pipelines.cli import main
from tests.conftest import TextStream


@pytest.fixture
def every_line(monkeypatch):
    """Every change of the line drawn, also where the stream is a log (not only every 10 s)."""
    monkeypatch.setattr(_progress, "LOG_INTERVAL", 0.0)
    monkeypatch.setattr(_progress, "TTY_INTERVAL", 0.0)


def ppr_job(tmp_path, sources=24, chunk=24, graph="rmat:scale=9,seed=4"):
    return pipelines.ppr_job(
        graph,
        pipelines.RandomSources(sources),
        topk=5,
        chunk=chunk,
        out=tmp_path / "out",
        workdir=tmp_path / "wd",
    )


def inside(lines: list, stage: str) -> list:
    """The in-stage text of ``stage`` on each line that has one."""
    found = (re.search(rf"(?:^|\s){re.escape(stage)} \d+/\d+ \(([^)]*(?:\)\.\.\.)?)\)", t) for t in lines)
    return [m.group(1) for m in found if m]


def test_a_log_shows_the_sources_of_a_running_chunk_with_an_eta_and_the_compilation_once(
    tmp_path, capsys, every_line
):
    graph = "rmat:scale=9,seed=41"  # a graph no other test loads: this process has not run ppr on it
    pipelines.run(ppr_job(tmp_path, graph=graph), progress=True)
    err = capsys.readouterr().err
    assert "\r" not in err  # a log: whole lines
    lines = err.splitlines()
    texts = inside(lines, "ppr")
    assert texts.count("compiling kernels (once)...") == 1
    counts = [tuple(map(int, m.groups())) for t in texts if (m := re.match(r"sources (\d+)/(\d+)", t))]
    assert len(counts) >= 5 and all(total == 24 for _, total in counts)
    assert [d for d, _ in counts] == sorted(d for d, _ in counts) and counts[-1][0] >= 20
    assert any("ETA " in t for t in texts)
    assert "ppr 1/1" in lines[-1] and "(" not in lines[-1]  # the last line: the stages' counts only


def test_in_a_jupyter_kernel_the_line_is_one_cell_output_redrawn_under_a_bar(tmp_path, capsys, monkeypatch):
    import IPython.display

    shown, updates = [], []

    class Handle:
        display_id = "progress-1"

    def display(data, raw, display_id):
        assert raw and display_id is True
        shown.append(data)
        return Handle()

    def update_display(data, raw, display_id):
        assert raw and display_id == "progress-1"
        updates.append(data)

    monkeypatch.setattr(IPython.display, "display", display)
    monkeypatch.setattr(IPython.display, "update_display", update_display)
    monkeypatch.setattr(_progress, "_in_kernel", lambda: True)
    monkeypatch.setattr(_progress, "TTY_INTERVAL", 0.0)
    pipelines.run(ppr_job(tmp_path), progress=True)
    assert capsys.readouterr().err == ""  # nothing on standard error: the cell shows it
    assert len(shown) == 1 and len(updates) >= 3
    last = updates[-1]
    assert "ppr 1/1" in last["text/plain"] and "(" not in last["text/plain"]
    bars = [
        re.search(r'<progress value="(\d+)" max="(\d+)"', u["text/html"]).groups() for u in shown + updates
    ]
    done = [int(d) for d, _ in bars]
    assert done == sorted(done) and len({m for _, m in bars}) == 1 and bars[-1][0] == bars[-1][1]
    assert last["text/plain"].replace("<", "&lt;") in last["text/html"]


def test_the_index_stage_shows_its_walks(tmp_path, capsys, every_line):
    job = pipelines.index_job("rmat:scale=9,seed=4", out=tmp_path / "index")
    pipelines.run(job, progress=True)
    found = (
        re.match(r"walks ([\d,]+)/([\d,]+)", t)
        for t in inside(capsys.readouterr().err.splitlines(), "irw-index")
    )
    walks = [tuple(int(g.replace(",", "")) for g in m.groups()) for m in found if m]
    assert len(walks) >= 5 and [d for d, _ in walks] == sorted(d for d, _ in walks)
    assert walks[-1][0] == walks[-1][1] > 0


def test_chunks_running_at_once_add_up_their_sources(tmp_path, capsys, every_line):
    pipelines.run(ppr_job(tmp_path, sources=40, chunk=10), progress=True)  # Dask's threads: 4 at once
    totals = {
        int(m.group(1))
        for t in inside(capsys.readouterr().err.splitlines(), "ppr")
        if (m := re.match(r"sources \d+/(\d+)", t))
    }
    assert totals and totals <= {10, 20, 30, 40}


def test_nothing_is_shown_without_progress_and_operators_get_a_callable_that_ends_interrupted_tasks(
    tmp_path, capsys, monkeypatch
):
    seen = []
    chunk = pipelines.ppr._chunk
    monkeypatch.setattr(pipelines.ppr, "_chunk", lambda *a, progress=None: seen.append(progress) or chunk(*a))
    pipelines.run(ppr_job(tmp_path), progress=False)
    assert capsys.readouterr().err == "" and len(seen) == 1 and callable(seen[0])
    with _progress.in_task("ppr") as progress:  # outside a job's compute: draws nothing
        progress(1, 2, "sources")
        monkeypatch.setattr(_output.INTERRUPTED, "is_set", lambda: True)
        with pytest.raises(_output.TaskInterrupted):
            progress(2, 2, "sources")
    assert capsys.readouterr().err == ""


def test_a_terminal_line_is_redrawn_within_its_width_dropping_finished_stages_first(monkeypatch):
    monkeypatch.setattr(_progress.shutil, "get_terminal_size", lambda: os.terminal_size((60, 20)))
    stream = TextStream(tty=True)
    line = _progress._Line(stream, interval=0.0)
    done, total = {"graphjobs-load": 1, "graphjobs-sources": 1}, {"graphjobs-load": 1, "graphjobs-sources": 1}
    total.update({"ppr": 4, "graphjobs-ppr-summary": 1})
    line.draw(done, total, inside=lambda: {"ppr": "sources 1,234/5,000, ETA 1m05s"})
    line.draw({"ppr": 4}, {"ppr": 4}, final=True)
    first, second = stream.getvalue().split("\r")[1:]
    assert first.startswith("[") and "ppr 0/4 (sources 1,234/5,000, ETA 1m05s)" in first
    assert "graphjobs-load" not in first and len(first) <= 59
    assert second.endswith("ppr 4/4\x1b[K\n")  # shorter than the line before: its rest is cleared


def test_cli_json_and_quiet_write_no_progress(tmp_path, capsys, every_line):
    base = ["ppr", "rmat:scale=9,seed=4", "--random", "24", "-k", "5", "--device", "cpu"]
    assert main([*base, "--json", "--out", str(tmp_path / "a"), "--workdir", str(tmp_path / "wd")]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["queries"] == 24  # stdout: one JSON document, nothing else
    assert "sources " not in captured.err and "compiling" not in captured.err
    assert main([*base, "--quiet", "--out", str(tmp_path / "b"), "--workdir", str(tmp_path / "wd")]) == 0
    err = capsys.readouterr().err
    assert "sources " not in err and "graphjobs-load" not in err


def test_the_cli_shows_progress_on_a_terminal_and_in_a_log_only_when_asked(tmp_path, capsys, every_line):
    base = ["ppr", "rmat:scale=9,seed=4", "--random", "24", "-k", "5", "--device", "cpu"]
    assert main([*base, "--out", str(tmp_path / "a"), "--workdir", str(tmp_path / "wd")]) == 0
    assert "graphjobs-load" not in capsys.readouterr().err  # standard error is not a terminal here
    assert main([*base, "--progress", "--out", str(tmp_path / "b"), "--workdir", str(tmp_path / "wd")]) == 0
    assert "graphjobs-load 1/1" in capsys.readouterr().err


def test_the_share_of_a_count_within_one_source_of_a_batch_is_that_of_the_batch():
    from operators._progress import share, within

    assert within("samples", 2, 10, "source") == "samples, source 3/10"
    assert share(50, 100, "samples") == 0.5
    assert share(50, 100, within("samples", 2, 10, "source")) == pytest.approx(0.25)
    assert share(0, 0, within("samples", 9, 10, "source")) == 1.0
