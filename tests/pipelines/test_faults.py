"""Fault injection on the command line: two jobs on one output, SIGTERM, a lost scheduler, memory."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from pipelines.cli import main
from tests.conftest import child_env, dataset_path

ROOT = Path(__file__).resolve().parents[2]


def cli(*args, cwd, env=None) -> subprocess.Popen:
    """``graphjobs ARGS`` in a new process (this source tree's packages)."""
    env = child_env(**(env or {}))
    cmd = [sys.executable, "-m", "pipelines", *map(str, args)]
    return subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def test_two_jobs_racing_on_one_output_folder_one_is_refused(tmp_path):
    # other workdirs, other k: only the output folder is shared
    runs = [
        cli(
            "ppr",
            "rmat:10",
            "--random",
            100,
            "-k",
            k,
            "--chunk",
            50,
            "--out",
            tmp_path / "out",
            "--workdir",
            tmp_path / f"wd{k}",
            "--quiet",
            cwd=tmp_path,
        )
        for k in (10, 20)
    ]
    done = [(p.wait(timeout=120), p.stderr.read()) for p in runs]
    codes = sorted(code for code, _ in done)
    assert codes == [0, 1], done
    err = next(e for code, e in done if code == 1).strip().splitlines()
    assert len(err) == 1 and err[0].startswith("graphjobs: error:"), err
    assert "is being written by the ppr job of process" in err[0] or "holds the results of another" in err[0]
    k = 10 if done[0][0] == 0 else 20
    rows = pd.read_parquet(tmp_path / "out")
    per_source = rows.groupby("source").size()  # one job's rows (sources reaching fewer vertices have fewer)
    assert len(per_source) == 100 and per_source.max() == k
    manifest = json.loads((tmp_path / "out" / "_manifest.json").read_text())
    assert sorted(manifest["parts"]) == sorted(p.name for p in (tmp_path / "out").glob("part-*.parquet"))
    assert not list(tmp_path.glob(".*.graphjobs.lock"))


def test_an_output_being_written_is_refused_naming_the_process(tmp_path, capsys):
    from pipelines.job import output_lock

    edges = tmp_path / "e.txt"
    edges.write_text("1 2\n2 3\n3 1\n")
    out = tmp_path / "pr.parquet"
    with output_lock(out, "pagerank"):  # another job holds it (here: this process, alive)
        assert (
            main(["pagerank", str(edges), "--out", str(out), "--workdir", str(tmp_path / "wd"), "--quiet"])
            == 1
        )
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1
        and f"output {out} is being written by the pagerank job of process {os.getpid()}" in err[0]
    )
    assert not out.exists()


def test_pagerank_replaces_another_jobs_result_only_with_overwrite(tmp_path, capsys):
    edges = tmp_path / "e.txt"
    edges.write_text("1 2\n2 3\n3 1\n3 4\n")
    out = tmp_path / "pr.parquet"
    base = ["pagerank", str(edges), "--out", str(out), "--quiet"]
    assert main([*base, "--workdir", str(tmp_path / "a")]) == 0
    first = pd.read_parquet(out)
    assert main([*base, "--workdir", str(tmp_path / "a")]) == 0  # the same job again: kept
    assert main([*base, "--workdir", str(tmp_path / "b"), "--alpha", "0.5"]) == 1  # another job
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1 and "holds the result of another pagerank job" in err[-1] and "--overwrite" in err[-1]
    )
    pd.testing.assert_frame_equal(pd.read_parquet(out), first)
    assert main([*base, "--workdir", str(tmp_path / "b"), "--alpha", "0.5", "--overwrite"]) == 0
    assert not pd.read_parquet(out).pagerank.equals(first.pagerank)


def test_a_batch_job_replaces_another_jobs_folder_only_with_overwrite(tmp_path, capsys):
    out = tmp_path / "out"
    base = ["ppr", "rmat:8", "--random", "20", "--out", str(out), "--quiet"]
    assert main([*base, "-k", "5", "--workdir", str(tmp_path / "a")]) == 0
    assert main([*base, "-k", "7", "--workdir", str(tmp_path / "b")]) == 1
    assert "holds the results of another ppr job" in capsys.readouterr().err
    assert pd.read_parquet(out).groupby("source").size().max() == 5
    assert main([*base, "-k", "7", "--workdir", str(tmp_path / "b"), "--overwrite"]) == 0
    assert pd.read_parquet(out).groupby("source").size().max() == 7


def test_an_edited_manifest_is_refused_as_damaged_not_read_as_another_job(tmp_path, capsys):
    """The manifest has a checksum of its own fields: an edited token is a damaged manifest, said as such
    (naming it), not "another job's results"; --overwrite replaces the folder. A manifest written before
    checksums (no field) is still read."""
    out = tmp_path / "out"
    base = [
        "ppr",
        "rmat:8",
        "--random",
        "20",
        "-k",
        "5",
        "--out",
        str(out),
        "--quiet",
        "--workdir",
        str(tmp_path),
    ]
    assert main(base) == 0
    manifest = out / "_manifest.json"
    fields = json.loads(manifest.read_text())
    token = fields["token"]
    manifest.write_text(json.dumps({**fields, "token": token[:-1] + ("0" if token[-1] != "0" else "1")}))
    assert main(base) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1
        and f"{manifest}: expected the job's manifest as written" in err[0]
        and "--overwrite" in err[0]
    )
    assert main([*base, "--overwrite"]) == 0 and json.loads(manifest.read_text())["token"] == token
    manifest.write_text(json.dumps({k: v for k, v in fields.items() if k != "checksum"}))  # an older manifest
    assert main(base) == 0 and "checksum" in json.loads(manifest.read_text())


def test_sigterm_is_handled_as_ctrl_c_exit_143_and_nothing_left_behind(tmp_path):
    args = ["pagerank", "rmat:19", "--out", tmp_path / "pr.parquet", "--workdir", tmp_path / "wd", "--quiet"]
    job = cli(*args, cwd=tmp_path)
    lock = tmp_path / ".pr.parquet.graphjobs.lock"
    deadline = time.monotonic() + 60
    while not lock.exists() and job.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert lock.exists(), job.communicate()
    time.sleep(0.3)  # into the job's first stage
    job.send_signal(signal.SIGTERM)
    out, err = job.communicate(timeout=60)
    assert job.returncode == 143 and err.strip().splitlines() == ["graphjobs: interrupted"], (out, err)
    assert not lock.exists() and not (tmp_path / "wd" / ".graphjobs.lock").exists()
    assert not [p for p in tmp_path.rglob("*") if ".partial" in p.name]
    again = cli(*args, cwd=tmp_path)
    assert again.wait(timeout=120) == 0, again.stderr.read()
    assert len(pd.read_parquet(tmp_path / "pr.parquet")) == 2**19


def test_sigterm_ends_a_long_simrank_query_within_seconds_exit_143_and_nothing_left_behind(tmp_path):
    """A SimRank source draws its samples in short batches with progress reports between them; SIGTERM
    ends the job there, rather than when the worker thread's query would end (minutes here)."""
    data = dataset_path("ca-GrQc.txt.gz")
    if data is None:
        pytest.skip("the SNAP dataset ca-GrQc is not available")
    base = [
        str(data),
        "--random",
        "2",
        "-k",
        "5",
        "--workdir",
        str(tmp_path / "wd"),
        "--device",
        "cpu",
        "--quiet",
    ]
    # the same kernels, compiled (or read from Numba's cache) in this process: the job below samples at once
    assert main(["simrank", *base, "--epsilon", "0.1", "--out", str(tmp_path / "warm")]) == 0
    out = tmp_path / "sr"  # about 5e9 samples a source: minutes on 2 threads
    job = cli("simrank", *base, "--out", out, cwd=tmp_path, env={"NUMBA_NUM_THREADS": "2"})
    guard = threading.Timer(60, job.kill)  # a readline that would wait for the whole job
    guard.start()
    first = job.stderr.readline()  # stated before the first source is sampled
    guard.cancel()
    assert "meeting samples" in first and "per source" in first, first
    time.sleep(1.0)  # into the sampling
    lock = tmp_path / ".sr.graphjobs.lock"
    assert job.poll() is None and lock.exists()
    sent = time.monotonic()
    job.send_signal(signal.SIGTERM)
    try:
        rest, err = job.communicate(timeout=30)
    finally:
        job.kill()  # where it is still running: not left behind by a failed test
    took = time.monotonic() - sent
    assert job.returncode == 143 and err.strip().splitlines() == ["graphjobs: interrupted"], (rest, err)
    assert took < 5.0, took
    assert not lock.exists() and not (tmp_path / "wd" / ".graphjobs.lock").exists()
    assert not [p for p in tmp_path.rglob("*") if ".partial" in p.name] and not list(out.glob("part-*"))


@pytest.mark.parametrize(
    ("spec", "limit", "fits"), [("rmat:30", None, None), ("rmat:19", "100MB", "rmat:17 would fit")]
)
def test_a_graph_too_large_for_memory_is_refused_before_allocating(tmp_path, spec, limit, fits):
    env = {} if limit is None else {"GRAPHJOBS_MEMORY_LIMIT": limit}
    args = ["pagerank", spec, "--device", "cpu", "--out", tmp_path / "pr.parquet"]
    # the job runs under a small wrapper that reports its child's peak resident size: a process forked
    # from this one would carry this test process's peak over into its own ru_maxrss, through exec
    wrap = (
        "import resource, subprocess, sys; p = subprocess.run(sys.argv[1:]); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(p.returncode)"
    )
    cmd = [sys.executable, "-c", wrap, sys.executable, "-m", "pipelines", *map(str, args)]
    cmd += ["--workdir", str(tmp_path / "wd"), "--quiet"]
    t0 = time.monotonic()
    env = child_env(**env)
    job = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    seconds = time.monotonic() - t0
    peak_kib, err = int(job.stdout.split()[-1]), job.stderr
    assert job.returncode == 1 and seconds < 5, (seconds, err)
    err = err.strip().splitlines()
    assert len(err) == 1 and f"generating {spec.replace(':', ':scale=')} (n=" in err[0], err
    assert "GiB but only" in err[0] and "GiB are free" in err[0] and " would fit" in err[0]
    if fits:
        assert "only 0.10 GiB are free" in err[0] and fits in err[0]
    assert peak_kib < 1 << 20  # < 1 GiB: nothing of the graph was allocated
    assert not (tmp_path / "pr.parquet").exists()


def test_a_scheduler_lost_mid_job_is_one_line_and_exit_1(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    serve = ["cluster", "--workers", "1", "--port", port, "--dashboard", ":0"]
    cluster = cli(*serve, cwd=tmp_path)
    try:
        for line in cluster.stderr:  # its status lines
            if "submit jobs" in line:
                break
        address = f"tcp://127.0.0.1:{port}"
        args = ["pagerank", "rmat:20", "--out", tmp_path / "pr.parquet", "--workdir", tmp_path / "wd"]
        job = cli(*args, "--scheduler", address, "--quiet", cwd=tmp_path)
        lock = tmp_path / ".pr.parquet.graphjobs.lock"
        deadline = time.monotonic() + 60
        while not lock.exists() and job.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(1.0)  # the job's tasks are on the worker
        assert job.poll() is None, job.communicate()
    finally:
        os.killpg(cluster.pid, signal.SIGKILL)  # the scheduler and its worker: gone at once
        cluster.wait()
    _, err = job.communicate(timeout=60)
    assert job.returncode == 1, err
    assert err.strip().splitlines()[-1] == (
        f"graphjobs: error: scheduler at {address} lost while the job ran (FutureCancelledError); "
        "re-run to resume (finished stages and chunks are kept)"
    )
    assert "Traceback" not in err and not lock.exists()


def test_an_edge_file_too_large_for_memory_is_refused_before_parsing(tmp_path):
    """A file input gets the memory guard generated graphs get: one line naming the file, exit 1."""
    data = dataset_path("soc-Epinions1.txt.gz")
    if data is None:
        pytest.skip("soc-Epinions1.txt.gz not found")
    args = ["pagerank", str(data), "--device", "cpu", "--out", str(tmp_path / "pr.parquet"), "--quiet"]
    args += ["--workdir", str(tmp_path / "wd")]
    env = child_env(GRAPHJOBS_MEMORY_LIMIT="10MB")
    job = subprocess.run(
        [sys.executable, "-m", "pipelines", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    err = job.stderr.strip().splitlines()
    assert job.returncode == 1 and len(err) == 1, job.stderr
    assert f"reading {data.resolve()} (about " in err[0]  # the job reads the file's real path
    assert "edges) needs about" in err[0] and "--scheduler" in err[0]
    assert not (tmp_path / "pr.parquet").exists()


def test_a_task_still_running_after_an_interrupt_renames_nothing_into_place(tmp_path, monkeypatch):
    """Ctrl-C or SIGTERM on the local scheduler unwinds the main thread (locks released, one line) while
    the scheduler's threads finish their tasks: a part they write then is dropped, not renamed into
    place, so nothing lands after the job has said it was interrupted. The next run writes again."""
    import threading
    import types

    from pipelines import _output
    from pipelines import job as jobs

    started, release, seen, threads = threading.Event(), threading.Event(), [], []
    part = tmp_path / "part-00000.parquet"

    def slow(tmp):  # a chunk's write, still running when the job is interrupted
        started.set()
        release.wait(30)
        Path(tmp).write_text("rows")

    def task():
        try:
            _output.write_atomic(part, slow)
        except _output.WriteInterrupted as exc:
            seen.append(exc)

    def interrupted(*_):
        threads.append(threading.Thread(target=task))
        threads[0].start()
        started.wait(30)
        raise KeyboardInterrupt

    monkeypatch.setattr(jobs.dask, "compute", interrupted)
    with pytest.raises(KeyboardInterrupt):
        jobs._run(types.SimpleNamespace(result=None), None, False)
    release.set()
    threads[0].join(30)
    assert len(seen) == 1 and not part.exists() and not list(tmp_path.glob(".*.partial"))
    monkeypatch.setattr(jobs.dask, "compute", lambda *_: ("summary",))
    assert jobs._run(types.SimpleNamespace(result=None), None, False) == "summary"
    _output.write_atomic(part, lambda tmp: Path(tmp).write_text("rows"))  # a new run writes again
    assert part.read_text() == "rows"


# a few trials of every kind ``benchmarks.fault_sweep`` tries (the whole sweep takes minutes)
SWEEP = {
    ("graph (graphs.save)", "meta.json", "edit-directed-flipped"),
    ("graph (graphs.save)", "meta.json", "edit-token-changed"),
    ("graph (graphs.save)", "indices.npy", "flip-middle"),
    ("workdir graph (ppr)", "meta.json", "edit-token-changed"),
    ("workdir graph (ppr)", "indptr.npy", "flip-header"),
    ("ppr-index (query)", "ppr-index.json", "edit-n+1"),
    ("ppr-index (query)", "meta.json", "edit-alpha->0.5"),
    ("ppr-index (query)", "meta.json", "edit-version->3"),
    ("ppr-index (query)", "ip1.npy", "flip-middle"),
    ("ppr-index (query)", "starts.npy", "flip-end"),
    ("ppr-index (query)", "ids.npy", "flip-middle"),  # of the graph the manifest names
    ("ppr-index (query)", "meta.json", "edit-directed-flipped"),  # the graph's (an index's has none)
    ("ppr output", "part-00000.parquet", "flip-middle"),
    ("ppr output", "part-00000.json", "edit-summary-edited"),
    ("ppr output", "_manifest.json", "flip-middle"),
}


def test_a_reduced_corruption_sweep_finds_no_crash_and_no_silent_wrong_answer(tmp_path):
    """Flipped bytes and edited values in saved graphs, the workdir's cached graph, an index folder and a
    batch job's output: each is a one-line error naming a file, a recompute with a warning, or the same
    answer; never a traceback or a different answer."""
    from benchmarks import fault_sweep

    args = fault_sweep.parser().parse_args(["--only", *sorted({kind for kind, _, _ in SWEEP})])
    select = lambda kind, rel, name: (kind, rel.name, name) in SWEEP  # noqa: E731
    rows = fault_sweep.sweep(args, runner=fault_sweep.run_inprocess, select=select, root=tmp_path)
    assert sorted((r["kind"], Path(r["file"]).name, r["corruption"]) for r in rows) == sorted(SWEEP)
    bad = [r for r in rows if r["outcome"] not in ("error", "correct", "recomputed")]
    assert not bad, bad
    assert {r["outcome"] for r in rows} >= {"error", "recomputed"}


def test_an_edited_chunk_record_is_computed_again_not_trusted(tmp_path, sync, capsys):
    """A chunk's record holds its own checksum: an edited summary (its query count) is not resumed from."""
    import pipelines

    out = tmp_path / "out"
    job = lambda: pipelines.ppr_job(  # noqa: E731
        "rmat:9", pipelines.RandomSources(20), topk=5, chunk=10, out=out, workdir=tmp_path / "wd"
    )
    clean = pipelines.run(job(), progress=False)
    record = out / "_chunks" / "part-00001.json"
    data = json.loads(record.read_text())
    assert data["summary"]["queries"] == 10
    data["summary"]["queries"] = 1
    record.write_text(json.dumps(data))
    capsys.readouterr()
    summary = pipelines.run(job(), progress=False)
    assert f"({record}: checksum mismatch)" in capsys.readouterr().err
    assert summary.queries == clean.queries == 20 and summary.resumed_parts == 1
    assert pipelines.run(job(), progress=False).resumed_parts == 2


@contextlib.contextmanager
def one_worker_cluster(cwd):
    """``graphjobs cluster`` with one CPU worker, in its own process group: its scheduler's address, until
    the block ends (then the scheduler and its worker are killed at once)."""
    cluster = cli("cluster", "--workers", "1", "--port", "0", "--dashboard", ":0", cwd=cwd)
    try:
        for line in cluster.stderr:  # its status lines
            if "submit jobs with --scheduler" in line:
                break
        yield line.split("--scheduler")[1].strip()
    finally:
        os.killpg(cluster.pid, signal.SIGKILL)
        cluster.wait()


def _busy(dask_worker) -> int:
    """Tasks a worker's threads still run, those its scheduler has let go of ("cancelled") included."""
    return sum(
        ts.state in ("executing", "long-running", "cancelled") for ts in dask_worker.state.tasks.values()
    )


def test_an_interrupted_job_frees_the_clusters_worker_at_its_next_report(tmp_path):
    """SIGTERM to a job on a cluster (``--scheduler``): one line, exit 143, and the worker's task, a long
    SimRank source, ends within seconds (cancelled: it sees that at its next progress report) and writes
    nothing; it used to run to its end, holding the worker and writing its part after the job had
    said it was interrupted."""
    from distributed import Client

    with one_worker_cluster(tmp_path) as address:
        out = tmp_path / "sr"
        args = ["simrank", "rmat:12", "--random", "1", "-k", "5", "--epsilon", "0.001", "--device", "cpu"]
        job = cli(
            *args, "--out", out, "--workdir", tmp_path / "wd", "--scheduler", address, "--quiet", cwd=tmp_path
        )
        with Client(address, timeout=30) as client:
            deadline, busy_since = time.monotonic() + 120, None
            while time.monotonic() < deadline and job.poll() is None:
                running = [k for keys in client.processing().values() for k in keys if "simrank" in str(k)]
                busy_since = (busy_since or time.monotonic()) if running else None
                if busy_since and time.monotonic() - busy_since > 3:  # into the sampling
                    break
                time.sleep(0.2)
            assert busy_since and job.poll() is None, job.communicate()
            job.send_signal(signal.SIGTERM)
            _, err = job.communicate(timeout=30)
            assert job.returncode == 143 and err.strip().splitlines()[-1] == "graphjobs: interrupted", err
            assert "Traceback" not in err
            sent, busy = time.monotonic(), 1
            while busy and time.monotonic() - sent < 20:
                busy = sum(client.run(_busy).values())
                time.sleep(0.2)
            assert busy == 0, "the worker still runs the interrupted job's task"
        assert not list(out.glob("part-*")) and not (tmp_path / ".sr.graphjobs.lock").exists()


def test_a_job_killed_on_a_cluster_resumes_there_to_the_uninterrupted_result(tmp_path):
    """SIGKILL of the command line running a batch job on a cluster (``--scheduler``), once a chunk is
    finished: the scheduler lets the gone client's tasks go, the worker's running ones end at their next
    report or write, and a plain re-run on the same cluster exits 0, reuses the finished chunks and writes
    what an uninterrupted run writes, byte for byte, leaving no temporary or lock."""
    args = ["ppr", "rmat:11", "--random", "40", "--chunk", "5", "-k", "5", "--device", "cpu", "--quiet"]
    assert main([*args, "--out", str(tmp_path / "want"), "--workdir", str(tmp_path / "wd0")]) == 0
    with one_worker_cluster(tmp_path) as address:
        out, run = tmp_path / "got", [*args, "--out", tmp_path / "got", "--workdir", tmp_path / "wd"]
        job = cli(*run, "--scheduler", address, cwd=tmp_path)
        deadline = time.monotonic() + 120
        while not list((out / "_chunks").glob("*")) and job.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert job.poll() is None, job.communicate()
        job.kill()
        job.wait(30)
        again = cli(*run, "--scheduler", address, "--json", cwd=tmp_path)
        stdout, err = again.communicate(timeout=180)
        assert again.returncode == 0, err
        summary = json.loads(stdout)
        assert 1 <= summary["resumed_parts"] < summary["parts"] == 8
    want = sorted(p.name for p in (tmp_path / "want").glob("part-*.parquet"))
    assert sorted(p.name for p in out.glob("part-*.parquet")) == want and len(want) == 8
    for name in want:
        assert (out / name).read_bytes() == (tmp_path / "want" / name).read_bytes(), name
    assert not list(tmp_path.rglob("*.partial")) and not list(tmp_path.rglob("*.graphjobs.lock"))
