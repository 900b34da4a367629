"""SIGKILL in each stage of the command line's jobs, then a plain re-run: it exits 0, writes what an
uninterrupted run writes (byte for byte), leaves no temporary or lock behind and reuses what was finished;
on the CPU in each stage, on the GPU in each kind of work (a stage artifact, the index, chunks, IMM).

A job is killed deterministically: a small script patches the function doing the stage's work (an
operator, ``np.save``, ``os.replace`` of a given file) to SIGKILL its own process there, and runs the
command line on Dask's synchronous scheduler (tasks in order, so "after N chunks" is exact). Nothing of
the job's own cleanup runs, as when a machine's OOM killer or a batch system ends it.
"""

from __future__ import annotations

import functools
import hashlib
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipelines.cli import main
from tests.conftest import child_env, dataset_path

COMMON = ["--quiet"]
SOURCES = ["--random", "40", "--chunk", "10", "-k", "10"]  # four chunks of ten sources


def _grqc() -> str:
    path = dataset_path("ca-GrQc.txt.gz")
    if path is None:
        pytest.skip("dataset ca-GrQc not found (set GRAPHJOBS_DATASETS or provide ../shared/datasets)")
    return str(path)


# the script's helpers: die() kills the process at once; the others patch a function to call it
KILL = """
import fnmatch, os, signal, sys
import dask
import numpy as np
import operators

def die():
    os.kill(os.getpid(), signal.SIGKILL)

def during(owner, name, nth=1):
    # the nth call of owner.name dies before it returns (within its work)
    real, calls = getattr(owner, name), [0]
    def patched(*args, **kw):
        calls[0] += 1
        if calls[0] >= nth:
            die()
        return real(*args, **kw)
    setattr(owner, name, patched)

def after_save_into(folder):
    # np.save into a folder whose name starts with `folder` dies once the file is written
    real = np.save
    def patched(file, *args, **kw):
        real(file, *args, **kw)
        where = os.path.basename(os.path.dirname(file)) if isinstance(file, (str, os.PathLike)) else ""
        if where.startswith(folder):
            die()
    np.save = patched

def before_replace(pattern, nth=1):
    # the nth rename onto a path matching pattern dies before it: its temporary is written
    real, calls = os.replace, [0]
    def patched(src, dst, *args, **kw):
        if fnmatch.fnmatch(os.fspath(dst), pattern):
            calls[0] += 1
            if calls[0] >= nth:
                die()
        return real(src, dst, *args, **kw)
    os.replace = patched

def before_rmtree(prefix):
    # removing a folder whose name starts with prefix dies before it
    import shutil
    real = shutil.rmtree
    def patched(path, *args, **kw):
        if os.path.basename(os.fspath(path)).startswith(prefix):
            die()
        return real(path, *args, **kw)
    shutil.rmtree = patched

dask.config.set(scheduler="sync")
"""

# (case, job, the script's patch, what the re-run says it reused): a kill inside each stage's task
CASES = [
    ("load-graph-save", "pagerank", "after_save_into('.graph-')", None),
    ("pagerank-artifact", "pagerank", "before_replace('*/pagerank-*.npy')", None),
    ("pagerank-output", "pagerank", "before_replace('*/pr.parquet')", "(PageRank found in the workdir)"),
    ("index-save", "index", "after_save_into('.ppr-index-')", None),
    ("index-manifest", "index", "before_replace('*/ppr-index.json')", None),
    ("topk-ppr-chunks", "topk-ppr", "before_replace('*/_chunks/part-*.json', nth=3)", "2 of them finished"),
    ("ppr-chunks", "ppr", "during(operators, 'ppr', nth=2)", "1 of them finished"),
    ("ppr-manifest", "ppr", "before_replace('*/_manifest.json')", "4 of them finished"),
    ("influence-imm", "influence", "during(operators, 'influence_maximization')", None),
    ("influence-seeds", "influence", "before_replace('*/seeds.csv')", None),
]

# on the GPU, a kill inside each kind of work: a stage's artifact, the index, chunks, the IMM run
GPU_CASES = ("pagerank-artifact", "index-save", "topk-ppr-chunks", "ppr-chunks", "influence-imm")
DEVICES = [
    *(pytest.param(*case, "cpu", id=case[0]) for case in CASES),
    *(pytest.param(*c, "gpu", id=f"{c[0]}-gpu", marks=pytest.mark.gpu) for c in CASES if c[0] in GPU_CASES),
]

# the artifacts of finished load and PageRank stages in a workdir
FINISHED = re.compile(r"[^/]+/(graph-[^/]+/[^/]+|pagerank-[^/]+\.npy(\.sha256)?)$")

# files whose bytes an uninterrupted run reproduces (JSON records and manifests hold timings)
EXACT = (".npy", ".parquet", ".csv", ".sha256")


def files(root: Path) -> dict[str, Path]:
    """Every file under ``root`` (hidden ones too), by its path relative to ``root``."""
    return {str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file()}


def _args(job: str, root: Path, index: Path, device: str) -> list[str]:
    """The command line of ``job`` on ``device`` writing under ``root`` (topk-ppr: querying ``index``)."""
    graph, wd = _grqc(), ["--workdir", root / "wd"]
    args = {
        "pagerank": ["pagerank", graph, "--out", root / "pr.parquet", *wd],
        "index": ["index", graph, "--out", root / "idx"],
        "topk-ppr": ["topk-ppr", "--index", index, *SOURCES, "--out", root / "tk"],
        "ppr": ["ppr", graph, *SOURCES, "--out", root / "ppr", *wd],
        "influence": [
            "influence",
            graph,
            "-k",
            "5",
            "--epsilon",
            "0.5",
            "--simulations",
            "100",
            "--out",
            root / "seeds.csv",
            *wd,
        ],
    }[job]
    return [*map(str, args), *COMMON, "--device", device]


@pytest.fixture(scope="module")
def indexes(tmp_path_factory):
    """``indexes(device)``: an index folder the topk-ppr job queries (its workdir too), built there."""

    @functools.cache
    def build(device: str) -> Path:
        folder = tmp_path_factory.mktemp(f"shared-{device}") / "idx"
        assert main(["index", _grqc(), "--out", str(folder), *COMMON, "--device", device]) == 0
        return folder

    return build


@pytest.fixture(scope="module")
def reference(tmp_path_factory, indexes):
    """``reference(job, device)``: the folder an uninterrupted run of ``job`` wrote (once per job)."""

    @functools.cache
    def run(job: str, device: str) -> Path:
        root = tmp_path_factory.mktemp(f"ref-{job}-{device}")
        assert main(_args(job, root, indexes(device), device)) == 0
        return root

    return run


@pytest.mark.parametrize(("case", "job", "patch", "reused", "device"), DEVICES)
def test_a_job_killed_in_a_stage_is_resumed_by_a_plain_rerun(
    tmp_path, indexes, reference, capsys, case, job, patch, reused, device
):
    index = indexes(device)
    before = files(index)
    root = tmp_path / "run"
    args = _args(job, root, index, device)
    script = f"{KILL}\n{patch}\nfrom pipelines.cli import main\nsys.exit(main({args!r}))\n"
    env = child_env()
    killed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr  # it died where the patch says
    left = files(root)
    assert any(".partial" in name or name.endswith(".graphjobs.lock") for name in left), left
    # the stages the killed run finished (the cached graph, PageRank's artifact) are reused, not rewritten
    finished = {name: p.stat().st_mtime_ns for name, p in left.items() if FINISHED.match(name)}

    capsys.readouterr()
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "warning" not in err, err
    if reused is not None:
        assert reused in out, out

    ref = reference(job, device)
    got, want = files(root), files(ref)
    assert sorted(got) == sorted(want)  # no temporary, no lock, nothing missing
    assert {name: got[name].stat().st_mtime_ns for name in finished} == finished
    for name, path in want.items():
        if name.endswith(EXACT):
            same_output(got[name], path, device)
    assert files(index).keys() == before.keys()  # the index the topk-ppr job reads: its lock released


def same_output(got: Path, want: Path, device: str) -> None:
    """``got`` holds what ``want`` holds: byte for byte on the CPU. On the GPU, whose float sums (atomic
    adds) may round differently from run to run, the same ids exactly and the same values within float32
    rounding; a checksum file is checked against its own artifact instead."""
    if device == "cpu":
        assert got.read_bytes() == want.read_bytes(), got
    elif got.suffix == ".sha256":
        artifact = got.with_suffix("")
        assert hashlib.sha256(artifact.read_bytes()).hexdigest() in got.read_text(), got
    elif got.suffix == ".npy":
        np.testing.assert_allclose(np.load(got), np.load(want), rtol=1e-5, atol=1e-12, err_msg=str(got))
    else:
        read = pd.read_csv if got.suffix == ".csv" else pd.read_parquet
        a, b = read(got), read(want)
        assert list(a.columns) == list(b.columns) and len(a) == len(b), got
        for column in a.columns:
            if a[column].dtype.kind == "f":
                where = f"{got} {column}"
                np.testing.assert_allclose(a[column], b[column], rtol=1e-5, atol=1e-12, err_msg=where)
            else:
                assert a[column].equals(b[column]), f"{got} {column}"


@pytest.mark.parametrize(
    ("patch", "cached"),
    [("after_save_into('part-')", False), ("before_rmtree('ingest-')", True)],
    ids=["ingest-parts", "ingest-cleanup"],
)
def test_a_partitioned_ingest_killed_in_a_stage_is_finished_by_a_plain_rerun(tmp_path, patch, cached):
    """The dataset ingest (``partition_files``; the command line runs it only on a cluster, before a
    partitioned PageRank): killed while it writes the parts, or once the graph is in place but before its
    work folder is removed, a re-run finishes it and leaves the workdir as an uninterrupted run does."""
    import pipelines
    from pipelines.ingest import partition_files

    graph = _grqc()

    def job(root: Path):
        return partition_files([graph], 2, root / "pg", workdir=root / "wd")

    script = (
        f"{KILL}\n{patch}\nimport pipelines\nfrom pipelines.ingest import partition_files\n"
        f"pipelines.run(partition_files([{graph!r}], 2, {str(tmp_path / 'run' / 'pg')!r}, "
        f"workdir={str(tmp_path / 'run' / 'wd')!r}), progress=False)\n"
    )
    env = child_env()
    killed = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert (tmp_path / "run" / "wd" / ".graphjobs.lock").exists()

    summary = pipelines.run(job(tmp_path / "run"), progress=False)
    assert summary.get("cached", False) is cached
    pipelines.run(job(tmp_path / "ref"), progress=False)
    got, want = files(tmp_path / "run"), files(tmp_path / "ref")
    assert sorted(got) == sorted(want)
    for name, path in want.items():
        if name.endswith(EXACT):
            assert got[name].read_bytes() == path.read_bytes(), name
