"""The top-k PPR jobs: index folder, batch queries to Parquet partitions, errors, a real cluster."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import graphs
import operators
import pipelines
from graphs._device import to_host
from operators import ppr
from operators.ppr.metrics import precision_at_k
from pipelines import _state
from pipelines.cli import main


def _check_against_exact(g, df, k):
    """Rows against power iteration: precision@k >= 0.95 on average (the issue's bar), and per source
    every returned vertex within the epsilon = 0.5 guarantee of the exact k-th value (a near-tie may
    be missed, a vertex far below the k-th may not be returned)."""
    assert list(df.columns) == ["source", "rank", "vertex", "ppr"]
    prec = []
    for src, rows in df.groupby("source"):
        rows = rows.sort_values("rank")
        assert rows["rank"].tolist() == list(range(1, k + 1))
        assert (np.diff(rows.ppr.to_numpy()) <= 0).all()
        exact = to_host(ppr(g, [src], method="power", tol=1e-10))[0]
        ids = g.internal_ids(rows.vertex.to_numpy())
        prec.append(precision_at_k(exact, ids, k))
        assert (exact[ids] >= 0.5 * np.sort(exact)[-k] - 1e-12).all()
    assert np.mean(prec) >= 0.95


def test_job_from_a_labelled_file(tmp_path, sync):
    g0 = graphs.barabasi_albert(600, 4, seed=1)
    src, dst, _ = g0.edges()
    path = tmp_path / "edges.csv"
    pd.DataFrame({"a": [f"v{x}" for x in src], "b": [f"v{x}" for x in dst]}).to_csv(path, index=False)
    sources = ["v3", "v10", "v77", "v5", "v400"]
    job = pipelines.topk_ppr_job(path, sources, k=15, out=tmp_path / "out", workdir=tmp_path / "wd", chunk=2)
    assert any(key.startswith("irw-index-") for key in job.keys())
    summary = pipelines.run(job, progress=False)
    assert summary["queries"] == 5 and summary["parts"] == 3
    df = pd.read_parquet(tmp_path / "out")
    assert sorted(set(df.source)) == sorted(sources)
    _check_against_exact(graphs.read_edgelist(path), df, 15)
    # the index is found in the workdir the second time, and the graph and index load once per process
    (folder,) = (tmp_path / "wd").glob("ppr-index-*")
    alone = operators.load_ppr_index(folder)  # the job's index knows where its graph is
    assert alone.graph.token == graphs.read_edgelist(path).token and "v3" in set(alone.graph.ids)
    _state.clear()
    pipelines.run(
        pipelines.topk_ppr_job(
            path, pipelines.RandomSources(4), k=5, out=tmp_path / "o2", workdir=tmp_path / "wd"
        ),
        progress=False,
    )
    assert len(_state.loaded()) == 1 and len(_state._INDEXES) == 1


def test_job_answers_lone_sources_at_once(tmp_path, sync):
    """Sources without out-edges get PPR 1 at themselves in rank 1 (no round); the summary counts them
    apart and times the others from their first round."""
    g = graphs.rmat(9, seed=1, device="cpu")
    deg = np.diff(g.indptr)
    lone, live = np.flatnonzero(deg == 0)[:3].tolist(), np.flatnonzero(deg > 2)[:2].tolist()
    spec = "rmat:scale=9,seed=1"
    job = pipelines.topk_ppr_job(spec, lone + live, k=5, out=tmp_path / "o", workdir=tmp_path)
    summary = pipelines.run(job, progress=False)
    assert summary["without_rounds"] == 3 and summary["exact"] >= 3 and summary["latency_seconds_mean"] > 0
    assert summary["query_seconds_mean"] > 0
    df = pd.read_parquet(tmp_path / "o").sort_values(["source", "rank"])
    top = df[df["rank"] == 1].set_index("source")
    assert (top.loc[lone, "vertex"].to_numpy() == lone).all() and (top.loc[lone, "ppr"] == 1.0).all()
    _check_against_exact(g, df[df.source.isin(live)], 5)


def test_unknown_source_fails_before_queries(tmp_path, sync):
    job = pipelines.topk_ppr_job(
        "rmat:scale=9,seed=1", [1, 2, 10**7], k=5, out=tmp_path / "o", workdir=tmp_path
    )
    with pytest.raises(KeyError, match="10000000"):
        pipelines.run(job, progress=False)
    assert not (tmp_path / "o").exists()


def test_cli_index_then_queries(tmp_path, capsys):
    idx = tmp_path / "idx"
    assert main(["index", "rmat:scale=10,seed=2", "--out", str(idx), "--quiet", "--device", "cpu"]) == 0
    (tmp_path / "s.txt").write_text("# sources\n3\n9\n27\n")
    out = tmp_path / "res"
    args = [
        "topk-ppr",
        "--index",
        str(idx),
        "--sources",
        str(tmp_path / "s.txt"),
        "-k",
        "12",
        "--out",
        str(out),
    ]
    assert main([*args, "--quiet", "--device", "cpu"]) == 0
    assert "written:" in capsys.readouterr().out
    # how many sources a GPU worker answers at once does not change the rows: the same job resumes
    # (a CPU worker answers one at a time whatever it is)
    assert main([*args, "--streams", "3", "--quiet", "--device", "cpu"]) == 0
    assert "1 parts, 1 of them finished by an earlier run" in capsys.readouterr().out
    _check_against_exact(graphs.rmat(10, seed=2, device="cpu"), pd.read_parquet(out), 12)
    (tmp_path / "bad.txt").write_text("3\n123456789\n")
    bad = [
        "topk-ppr",
        "--index",
        str(idx),
        "--sources",
        str(tmp_path / "bad.txt"),
        "--out",
        str(tmp_path / "x"),
    ]
    assert main([*bad, "--quiet", "--device", "cpu"]) == 1
    assert "123456789" in capsys.readouterr().err
    assert main(["topk-ppr", "--index", str(tmp_path), "--random", "3", "--quiet"]) == 1
    assert "graphjobs index" in capsys.readouterr().err


def test_a_built_index_is_not_mixed_with_other_options(tmp_path, sync):
    idx = tmp_path / "idx"
    pipelines.run(pipelines.index_job("rmat:scale=9,seed=3", out=idx, epsilon=0.4), progress=False)

    def job(**kw):
        return pipelines.topk_ppr_job(sources=[1, 2], index=idx, k=5, out=tmp_path / "o", **kw)

    summary = pipelines.run(job(), progress=False)  # the index's own epsilon (0.4), not a default 0.5
    assert summary["queries"] == 2
    job(epsilon=0.4, alpha=0.8)  # the index's values may be repeated
    with pytest.raises(ValueError, match=r"epsilon=0.5 differs from the epsilon of the index .* \(0.4\)"):
        job(epsilon=0.5)
    with pytest.raises(ValueError, match="reorder='degree' applies only when the job builds the index"):
        job(reorder="degree")
    with pytest.raises(ValueError, match="directed=False applies only when"):
        job(directed=False)
    with pytest.raises(ValueError, match="not both"):
        pipelines.topk_ppr_job("rmat:scale=9,seed=3", [1], index=idx, out=tmp_path / "o2")


def test_delta_min_per_vertex_count(tmp_path, sync, capsys):
    """delta_min as K/n reaches the index (more walks than the default), a built index checks it like
    alpha and epsilon, and bad values are refused before anything runs."""
    idx, g = tmp_path / "idx", graphs.rmat(9, seed=3)
    assert (
        main(["index", "rmat:scale=9,seed=3", "--out", str(idx), "--delta-min", "2/n", "--device", "cpu"])
        == 0
    )
    assert "delta_min=0.00391" in capsys.readouterr().out  # 2 / 512
    built = operators.load_ppr_index(str(next(idx.glob("ppr-index-*"))))
    assert built.params.delta_min == 2 / g.n
    default = operators.build_ppr_index(g, seed=0)
    assert 2.5 < built.walks / default.walks < 3  # r_max psi / delta_min grows as delta_min^-1/2: sqrt(8)
    summary = pipelines.run(
        pipelines.topk_ppr_job(sources=[1, 2], index=idx, k=5, out=tmp_path / "o", delta_min=2 / 512),
        progress=False,
    )
    assert summary["queries"] == 2
    with pytest.raises(ValueError, match=r"delta_min=0.03125 differs from the delta_min of the index"):
        pipelines.topk_ppr_job(sources=[1], index=idx, out=tmp_path / "o", delta_min="16/n")
    for bad in ("0/n", "2/m", "-1", "x", 1.5):
        with pytest.raises(ValueError, match="delta_min"):
            pipelines.index_job("rmat:scale=9,seed=3", out=tmp_path / "bad", delta_min=bad)
    with pytest.raises(ValueError, match="more than 1 for a graph of n=512"):
        pipelines.run(
            pipelines.index_job("rmat:scale=9,seed=3", out=tmp_path / "big", delta_min="600/n"),
            progress=False,
        )


def test_refine_reaches_the_operator_and_is_part_of_the_job(tmp_path, sync, capsys):
    """refine (the default): the rows are ``topk_ppr(refine=True)``'s on the job's index, the summary counts
    the refined sources, the CLI gives the same rows; refine=False (--no-refine) gives Algorithm 3's rows,
    as another job."""
    idx = tmp_path / "idx"
    assert main(["index", "rmat:scale=11,seed=4", "--out", str(idx), "--quiet", "--device", "cpu"]) == 0
    sources, k = [1, 5, 9, 40, 77, 130], 40
    job = pipelines.topk_ppr_job(sources=sources, index=idx, k=k, out=tmp_path / "r", chunk=4)
    summary = pipelines.run(job, progress=False)
    assert summary["refine"] and 0 < summary["refined"] <= len(sources)
    built = operators.load_ppr_index(str(next(idx.glob("ppr-index-*"))))
    want = operators.topk_ppr(built, sources, k=k, refine=True)
    plain = operators.topk_ppr(built, sources, k=k, refine=False)
    assert (want.refined > 0).sum() == summary["refined"] and (plain.refined == 0).all()
    got = pd.read_parquet(tmp_path / "r").sort_values(["source", "rank"])
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want.to_frame(), check_dtype=False)
    assert not np.array_equal(want.ppr, plain.ppr)  # the refinement changed some estimates
    args = ["topk-ppr", "--index", str(idx), "--sources", str(tmp_path / "s.txt"), "-k", str(k)]
    (tmp_path / "s.txt").write_text("\n".join(map(str, sources)))
    for flag, rows in (("--refine", want), ("--no-refine", plain)):
        out = tmp_path / flag
        assert main([*args, "--out", str(out), flag, "--quiet", "--device", "cpu"]) == 0
        assert ("refined at the k-th value" in capsys.readouterr().out) == (flag == "--refine")
        cli = pd.read_parquet(out).sort_values(["source", "rank"]).reset_index(drop=True)
        pd.testing.assert_frame_equal(cli, rows.to_frame(), check_dtype=False)
    with pytest.raises(FileExistsError, match="another topk-ppr job"):  # the same folder, without refine
        pipelines.topk_ppr_job(sources=sources, index=idx, k=k, out=tmp_path / "r", refine=False)
    with pytest.raises(TypeError, match="refine must be True or False"):
        pipelines.topk_ppr_job(sources=sources, index=idx, out=tmp_path / "x", refine="yes")


def test_on_a_real_local_cluster(tmp_path):
    from distributed import Client

    from cluster import make_cluster

    with make_cluster(2, device="cpu", dashboard_address=":0") as cl, Client(cl) as client:
        job = pipelines.topk_ppr_job(
            "rmat:scale=10,seed=4",
            pipelines.RandomSources(40),
            k=10,
            out=tmp_path / "o",
            workdir=tmp_path,
            chunk=5,
        )
        summary = pipelines.run(job, client, progress=False)
        assert summary["queries"] == 40 and summary["parts"] == 8
    df = pd.read_parquet(tmp_path / "o")
    rows = df.groupby("source").size()  # R-MAT sources that reach fewer than 10 vertices list fewer rows
    assert df.source.nunique() == 40 and (df.ppr > 0).all() and rows.max() == 10 and len(df) == rows.sum()
    assert summary.sources_short == int((rows < 10).sum()) > 0


def test_cli_index_with_the_papers_walks_or_in_degree_order(tmp_path, capsys):
    import json

    for flags, first in ((["--order", "degree"], True), (["--paper-walks"], False)):
        idx = tmp_path / f"idx-{first}"
        base = ["index", "rmat:scale=9,seed=2", "--out", str(idx), "--quiet", "--device", "cpu"]
        assert main([*base, *flags]) == 0
        (meta,) = idx.glob("ppr-index-*/meta.json")
        assert json.loads(meta.read_text())["first_step"] is first
        assert (meta.parent / "perm.npy").exists() is first  # degree order; 'auto' keeps a small graph's
        out = tmp_path / f"res-{first}"
        query = ["topk-ppr", "--index", str(idx), "--random", "20", "--random-among", "out", "-k", "8"]
        assert main([*query, "--out", str(out), "--quiet", "--device", "cpu"]) == 0
        _check_against_exact(graphs.rmat(9, seed=2, device="cpu"), pd.read_parquet(out), 8)


def test_a_copied_index_folder_answers_from_its_own_files(tmp_path, capsys):
    import shutil

    from tests.conftest import dataset_path

    path = dataset_path("ca-GrQc.txt.gz")
    if path is None:
        pytest.skip("datasets folder absent")
    original, copy = tmp_path / "idx", tmp_path / "elsewhere" / "idx"
    assert main(["index", str(path), "--out", str(original), "--quiet", "--device", "cpu"]) == 0
    (tmp_path / "s.txt").write_text("13\n14\n22\n")

    def query(index, out):
        args = ["topk-ppr", "--index", str(index), "--sources", str(tmp_path / "s.txt"), "-k", "20"]
        return main([*args, "--out", str(out), "--quiet", "--device", "cpu"])

    assert query(original, tmp_path / "a") == 0
    shutil.copytree(original, copy)
    shutil.rmtree(original)  # the copy must not read the original's files
    assert query(copy, tmp_path / "b") == 0
    a, b = pd.read_parquet(tmp_path / "a"), pd.read_parquet(tmp_path / "b")
    assert len(a) > 20 and set(a["source"]) == {13, 14, 22}
    pd.testing.assert_frame_equal(a, b)
    # a copy that lacks an array of the index: one line naming it
    capsys.readouterr()
    damaged = tmp_path / "damaged"
    shutil.copytree(copy, damaged)
    (array,) = damaged.glob("ppr-index-*/h_freq.npy")
    array.unlink()
    assert query(damaged, tmp_path / "c") == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == (
        f"graphjobs: error: {array}: expected this array of the index; it is missing; rebuild the index "
        "(graphjobs index, or build_ppr_index(...).save)"
    )
    shutil.rmtree(next(damaged.glob("graph-*")))  # the graph the manifest names
    assert query(damaged, tmp_path / "c") == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert (
        err.startswith(f"graphjobs: error: {damaged}/graph-") and "/meta.json: expected the graph that" in err
    )


@pytest.mark.parametrize("edit", [("n", 513), ("directed", False), ("graph_token", "0" * 32)])
def test_an_edited_index_manifest_is_refused_naming_it(tmp_path, sync, edit):
    """ppr-index.json holds its own checksum; one written before it had none is checked against the
    graph it names: never a query on a wrong vertex count or graph."""
    import json

    from graphs import IntegrityError
    from pipelines.ppr_index import read_manifest

    idx = tmp_path / "idx"
    pipelines.run(pipelines.index_job("rmat:scale=9,seed=3", out=idx), progress=False)
    file = idx / "ppr-index.json"
    clean = json.loads(file.read_text())
    assert read_manifest(idx)["n"] == 512
    file.write_text(json.dumps({**clean, edit[0]: edit[1]}))
    with pytest.raises(IntegrityError, match=r"ppr-index\.json: checksum mismatch: the manifest was edited"):
        pipelines.topk_ppr_job(sources=[1], index=idx, out=tmp_path / "q")
    old = {k: v for k, v in clean.items() if k != "checksum"}  # written before manifests had checksums
    file.write_text(json.dumps(old))
    assert read_manifest(idx)["n"] == 512
    file.write_text(json.dumps({**old, edit[0]: edit[1]}))
    with pytest.raises(
        IntegrityError, match=rf"ppr-index\.json: expected the {edit[0]} of the graph it names"
    ):
        read_manifest(idx)
    file.write_text("{" + json.dumps(clean)[:-9])
    with pytest.raises(IntegrityError, match=r"ppr-index\.json, line 1: expected the index's JSON manifest"):
        read_manifest(idx)


def test_a_damaged_cached_index_is_built_again_with_a_warning(tmp_path, sync, capsys):
    from tests.conftest import dataset_path

    path = dataset_path("ca-GrQc.txt.gz")
    if path is None:
        pytest.skip("datasets folder absent")
    idx = tmp_path / "idx"
    pipelines.run(pipelines.index_job(path, out=idx), progress=False)
    (array,) = idx.glob("ppr-index-*/starts.npy")
    clean = array.read_bytes()
    data = bytearray(clean)
    data[-7] ^= 0x40
    array.write_bytes(bytes(data))
    capsys.readouterr()
    pipelines.run(pipelines.index_job(path, out=idx), progress=False)
    assert capsys.readouterr().err.strip().splitlines() == [
        f"graphjobs: warning: {array}: checksum mismatch: the file changed or is damaged; "
        "building the index again"
    ]
    assert array.read_bytes() == clean  # the same seed: the same index
    _state.clear()
    operators.load_ppr_index(array.parent)


def test_a_damaged_part_is_computed_again_on_resume(tmp_path, sync, capsys):
    from tests.conftest import dataset_path

    path = dataset_path("ca-GrQc.txt.gz")
    if path is None:
        pytest.skip("datasets folder absent")
    out = tmp_path / "out"
    job = lambda: pipelines.topk_ppr_job(  # noqa: E731
        path, pipelines.RandomSources(40), k=10, chunk=10, out=out, workdir=tmp_path / "wd"
    )
    assert pipelines.run(job(), progress=False).resumed_parts == 0
    clean = pd.read_parquet(out)
    assert len(clean) > 40 * 5
    part = out / "part-00002.parquet"
    part.write_bytes(part.read_bytes()[:100])  # truncated (a full disk, a bad copy)
    size = (out / "part-00001.parquet").stat().st_size
    data = bytearray((out / "part-00001.parquet").read_bytes())
    data[size // 2] ^= 0x40  # one flipped byte: the same size
    (out / "part-00001.parquet").write_bytes(bytes(data))
    capsys.readouterr()
    summary = pipelines.run(job(), progress=False)
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"graphjobs: warning: 2 parts finished by an earlier run had changed since and were computed again "
        f"({out / 'part-00001.parquet'}: checksum mismatch, ...)"
    ]
    assert summary.resumed_parts == 2 and summary.parts == 4
    pd.testing.assert_frame_equal(pd.read_parquet(out), clean)
    assert pipelines.run(job(), progress=False).resumed_parts == 4 and capsys.readouterr().err == ""


@pytest.mark.gpu
def test_a_gpu_job_reports_the_estimate_its_queries_were_checked_against(tmp_path, sync, monkeypatch):
    import operators.topk as topk
    from operators._gpu.memory import MemoryEstimate

    g = graphs.barabasi_albert(3000, 4, seed=2)
    opts = dict(k=10, workdir=tmp_path / "wd", chunk=10)
    job = pipelines.topk_ppr_job(g, pipelines.RandomSources(20), out=tmp_path / "a", **opts)
    summary = pipelines.run(job, progress=False)
    memory = summary["memory"]
    assert summary["device"] == "gpu" and memory["device"] == "gpu"
    assert memory["estimate_bytes"] >= sum(memory["parts"].values()) > 0
    parts = memory["parts"]
    assert (
        memory["per_chunk_bytes"] == parts["workspaces kept"] + parts["in-edges build or new workspaces"] > 0
    )
    # the operator refuses what does not fit; the job's message names the job's flags, not its options
    real = topk.query_memory

    def larger(*args, **kwargs):
        streams, est = real(*args, **kwargs)
        return streams, MemoryEstimate(est.what, est.device, (*est.parts, ("more", 2**60)), est.held)

    monkeypatch.setattr(topk, "query_memory", larger)
    job = pipelines.topk_ppr_job(g, pipelines.RandomSources(20), out=tmp_path / "b", **opts)
    flags = r"top-10 PPR .*; --no-refine, a smaller --streams"
    with pytest.raises(operators.InsufficientMemoryError, match=flags):
        pipelines.run(job, progress=False)


def test_a_cpu_job_reports_and_checks_its_queries_host_memory(tmp_path, sync, monkeypatch):
    """On the CPU too the queries' memory is estimated (a workspace of ``CPU_WORKSPACE_BYTES`` a vertex
    per thread answering at once, the in-edges for refine) and checked before they allocate; the job's
    refusal names the job's flags for a CPU."""
    import operators._gpu.memory as mem
    from cluster.worker import set_worker_device
    from operators._cpu_threads import cpu_threads
    from operators.topk.batch import CPU_WORKSPACE_BYTES

    set_worker_device("cpu")  # this process's jobs on the CPU, on a GPU machine too
    try:
        g = graphs.barabasi_albert(3000, 4, seed=2)
        opts = dict(k=10, workdir=tmp_path / "wd", chunk=10)
        job = pipelines.topk_ppr_job(g, pipelines.RandomSources(20), out=tmp_path / "a", **opts)
        memory = pipelines.run(job, progress=False)["memory"]
        parts = memory["parts"]
        assert memory["device"] == "cpu" and memory["estimate_bytes"] == sum(parts.values())
        threads = cpu_threads(g.n, CPU_WORKSPACE_BYTES, 10)
        assert parts["workspaces kept"] + parts["in-edges build or new workspaces"] >= (
            threads * CPU_WORKSPACE_BYTES * g.n
        )
        monkeypatch.setattr(mem, "free_memory", lambda device: 1000)
        job = pipelines.topk_ppr_job(g, pipelines.RandomSources(20), out=tmp_path / "b", **opts)
        with pytest.raises(
            operators.InsufficientMemoryError, match=r"on the host .*--no-refine, fewer chunks"
        ):
            pipelines.run(job, progress=False)
    finally:
        set_worker_device(None)
