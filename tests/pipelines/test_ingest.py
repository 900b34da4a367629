"""Partitioned ingestion from many edge files equals partitioning the whole graph."""

from __future__ import annotations

import dask
import numpy as np
import pandas as pd
import pytest

import graphs
import operators
from pipelines import run
from pipelines.distributed.pagerank import pagerank as distributed_pagerank
from pipelines.ingest import partition_files


def _split(g, folder, pieces, weighted=False):
    src, dst, w = g.edges()
    which = np.random.default_rng(1).integers(0, pieces, g.m)
    files = []
    for i in range(pieces):
        sel = which == i
        cols = {"src": src[sel], "dst": dst[sel]} | ({"w": w[sel]} if weighted else {})
        frame = pd.DataFrame(cols)
        if i % 2:
            files.append(folder / f"edges-{i}.parquet")
            frame.to_parquet(files[-1])
        else:
            files.append(folder / f"edges-{i}.txt")
            frame.to_csv(files[-1], sep="\t", header=False, index=False)
    return files


@pytest.mark.parametrize("weighted", [False, True])
def test_files_to_parts_equal_partition_of_the_whole(tmp_path, weighted):
    g = graphs.rmat(10, seed=4, device="cpu", weighted=weighted)
    files = _split(g, tmp_path, 4, weighted)
    opts = {"src_col": "src", "dst_col": "dst", "weight_col": "w" if weighted else None}
    with dask.config.set(scheduler="sync"):
        job = partition_files(
            [f for f in files if f.suffix == ".parquet"],
            3,
            tmp_path / "pg",
            n=g.n,
            read_options=opts,
            weighted=weighted,
            workdir=tmp_path,
        )
        summary = run(job, progress=False)
    half = graphs.from_edges(*_parquet_edges(files, weighted), n=g.n, renumber=False)
    want = graphs.partition(half, 3)
    got = graphs.load_partitioned(tmp_path / "pg")
    assert summary["m"] == half.m and got.bounds.tolist() == want.bounds.tolist()
    for a, b in zip(want.parts, got.parts, strict=True):
        np.testing.assert_array_equal(a.indptr, b.indptr)
        np.testing.assert_array_equal(a.indices, b.indices)
        np.testing.assert_array_equal(a.out_degree, b.out_degree)
        if weighted:
            np.testing.assert_allclose(a.out_weight, b.out_weight, rtol=1e-6)


def _parquet_edges(files, weighted):
    frames = [pd.read_parquet(f) for f in files if f.suffix == ".parquet"]
    df = pd.concat(frames)
    return df.src.to_numpy(), df.dst.to_numpy(), (df.w.to_numpy() if weighted else None)


def test_text_files_undirected_dedupe_then_pagerank(tmp_path):
    from distributed import Client

    from cluster import make_cluster

    g = graphs.barabasi_albert(800, 3, seed=2)  # undirected, stored both ways
    src, dst, _ = g.edges()
    half = src < dst  # one direction in the files, twice over: dedupe must drop the copies
    files = []
    for i in range(3):
        files.append(tmp_path / f"e{i}.txt")
        pd.DataFrame({"a": src[half][i::3], "b": dst[half][i::3]}).to_csv(
            files[-1], sep=" ", header=False, index=False
        )
    files.append(tmp_path / "again.txt")
    files[-1].write_text(files[0].read_text())
    with make_cluster(2, device="cpu", dashboard_address=":0") as cl, Client(cl) as client:
        job = partition_files(files, 2, tmp_path / "pg", directed=False, dedupe=True, workdir=tmp_path)
        assert run(job, client, progress=False)["m"] == g.m
        pg = graphs.load_partitioned(tmp_path / "pg")
        x = distributed_pagerank(pg, client, tol=1e-10)
    assert np.abs(x - operators.pagerank(g, tol=1e-10)).max() < 1e-9


@pytest.mark.parametrize("directed", [True, False])
def test_labels_are_numbered_in_sorted_order(tmp_path, directed):
    """String labels in one file, numbers in the other (labels too, then): the parts equal graphs.partition
    of the same edges numbered by sorted label, and PageRank by label equals read_edgelist's."""
    g = graphs.rmat(9, seed=2, device="cpu")
    src, dst, _ = g.edges()
    names = np.array([f"user-{v:04d}" for v in range(g.n)])
    half = g.m // 2
    a_src, a_dst, b_src, b_dst = names[src[:half]], names[dst[:half]], src[half:], dst[half:]
    (tmp_path / "a.txt").write_text("".join(f"{s} {d}\n" for s, d in zip(a_src, a_dst, strict=True)))
    (tmp_path / "b.txt").write_text("".join(f"{s} {d}\n" for s, d in zip(b_src, b_dst, strict=True)))
    with dask.config.set(scheduler="sync"):
        files = [tmp_path / "a.txt", tmp_path / "b.txt"]
        run(partition_files(files, 3, tmp_path / "pg", directed=directed, workdir=tmp_path), progress=False)
        with pytest.raises(ValueError, match="hold labels"):
            run(partition_files(files[:1], 2, tmp_path / "pg2", n=10, workdir=tmp_path), progress=False)
    pg = graphs.load_partitioned(tmp_path / "pg")
    s_lab = np.concatenate([a_src, b_src.astype(str)])
    d_lab = np.concatenate([a_dst, b_dst.astype(str)])
    labels = np.unique(np.concatenate([s_lab, d_lab]))
    assert list(pg.ids) == list(labels)
    ref = graphs.from_edges(
        np.searchsorted(labels, s_lab),
        np.searchsorted(labels, d_lab),
        n=labels.size,
        directed=directed,
        renumber=False,
    )
    for mine, theirs in zip(pg.parts, graphs.partition(ref, 3).parts, strict=True):
        assert np.array_equal(mine.indptr, theirs.indptr) and np.array_equal(mine.indices, theirs.indices)
    whole = tmp_path / "whole.txt"
    whole.write_text((tmp_path / "a.txt").read_text() + (tmp_path / "b.txt").read_text())
    read = graphs.read_edgelist(whole, directed=directed)
    by_label = dict(zip(map(str, read.ids), operators.pagerank(read, tol=1e-12), strict=True))
    mine = operators.pagerank(ref, tol=1e-12)
    assert max(abs(mine[i] - by_label[lab]) for i, lab in enumerate(labels)) < 1e-9
    with pytest.raises(FileNotFoundError):
        partition_files([tmp_path / "missing.txt"], 2, tmp_path / "pg")


def test_pagerank_job_on_a_folder_of_edge_files(tmp_path):
    from distributed import Client

    import pipelines
    from cluster import make_cluster

    g = graphs.rmat(10, seed=6, device="cpu")
    folder = tmp_path / "edges"
    folder.mkdir()
    _split(g, folder, 3)
    with make_cluster(2, device="cpu", dashboard_address=":0") as cl, Client(cl) as client:
        with pytest.raises(
            ValueError, match=r"a dataset of 3 edge file\(s\) \(the first: .*edges-0.*needs partitions=N"
        ):
            pipelines.pagerank_job(folder, workdir=tmp_path)
        with pytest.raises(
            ValueError, match="pull or binned passes: method='push' and reorder=None do not apply"
        ):
            pipelines.pagerank_job(folder, method="push", partitions=2, workdir=tmp_path)  # not silently pull
        opts = {"src_col": "src", "dst_col": "dst"}
        files = sorted(folder.glob("*.parquet"))  # the text files have numbered columns: one format here

        def build():
            return pipelines.pagerank_job(
                files,
                partitions=2,
                tol=1e-10,
                read_options=opts,
                out=tmp_path / "pr.parquet",
                workdir=tmp_path,
            )

        summary = pipelines.run(build(), client, progress=False)
        again = pipelines.run(build(), client, progress=False)  # ingestion and PageRank found in the workdir
        assert "ingest-degrees" not in str(build().keys())  # the finished ingestion is not planned again
    assert summary["memory"]["partitions"] == 2 and again["top"] == summary["top"]
    assert summary["memory"]["estimate_bytes"] > 0 and summary["memory"]["free_bytes"] > 0
    src, dst, _ = _parquet_edges(files, False)
    n = int(max(src.max(), dst.max())) + 1  # no n given: the largest id in the files + 1
    df = pd.read_parquet(tmp_path / "pr.parquet")
    assert df.vertex.tolist() == list(range(n)) and summary["n"] == n
    half = graphs.from_edges(src, dst, n=n, renumber=False)
    assert np.abs(df.pagerank.to_numpy() - operators.pagerank(half, tol=1e-10)).max() < 1e-9


def test_pagerank_job_on_labelled_edge_files(tmp_path):
    from distributed import Client

    import pipelines
    from cluster import make_cluster

    g = graphs.barabasi_albert(300, 3, seed=4)
    src, dst, _ = g.edges()
    folder = tmp_path / "edges"
    folder.mkdir()
    for i, part in enumerate(np.array_split(np.arange(g.m), 3)):
        (folder / f"e{i}.txt").write_text("".join(f"v{src[e]} v{dst[e]}\n" for e in part))
    with make_cluster(2, device="cpu", dashboard_address=":0") as cl, Client(cl) as client:
        job = pipelines.pagerank_job(
            folder, partitions=2, tol=1e-12, out=tmp_path / "pr.parquet", workdir=tmp_path
        )
        summary = pipelines.run(job, client, progress=False)
    df = pd.read_parquet(tmp_path / "pr.parquet")
    whole = graphs.from_edges(np.array([f"v{s}" for s in src]), np.array([f"v{d}" for d in dst]))
    want = dict(zip(whole.ids, operators.pagerank(whole, tol=1e-12), strict=True))
    assert sorted(df.vertex) == sorted(want) and summary["n"] == g.n
    assert max(abs(p - want[v]) for v, p in zip(df.vertex, df.pagerank, strict=True)) < 1e-9
    assert summary["top"][0][0] == max(want, key=want.get)


def test_a_folder_of_parquet_files_is_one_graph_read_batch_by_batch(tmp_path, sync):
    """Without partitions, a PageRank job (and every other job) reads a Parquet dataset into one graph
    (graphs.stream): the ranks are those of the same edges built whole; a changed file is a new graph."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    import pipelines
    from operators import pagerank

    src, dst, _ = graphs.rmat(10, seed=6, device="cpu").edges()
    folder = tmp_path / "edges"
    folder.mkdir()
    for i, part in enumerate(np.array_split(np.arange(src.size), 3)):
        pq.write_table(pa.table({"src": src[part], "dst": dst[part]}), folder / f"part-{i}.parquet")
    n = int(max(src.max(), dst.max())) + 1
    want = pagerank(graphs.from_edges(src, dst, n=n, renumber=False), tol=1e-10)
    out = tmp_path / "pr.parquet"
    job = pipelines.pagerank_job(folder, out=out, tol=1e-10, workdir=tmp_path / "wd")
    assert pipelines.run(job, progress=False).n == n
    ranks = pd.read_parquet(out)
    by_vertex = ranks.pagerank.to_numpy()[np.argsort(ranks.vertex.to_numpy())]
    np.testing.assert_allclose(by_vertex, want, atol=1e-9)
    pq.write_table(pa.table({"src": src[:10], "dst": dst[:10]}), folder / "part-2.parquet")
    job = pipelines.pagerank_job(folder, out=out, tol=1e-10, workdir=tmp_path / "wd", overwrite=True)
    assert pipelines.run(job, progress=False).m < src.size  # not the cached graph of the old files


def test_a_damaged_ingested_graph_is_built_again_with_a_warning_not_reused(tmp_path, capsys):
    """A re-run finds the earlier run's graph only when every file matches its checksum (meta.json its
    own): a flipped byte or an edited field is reported and the graph built again, identical."""
    import json

    g = graphs.rmat(9, seed=4, device="cpu")
    files = _split(g, tmp_path, 2)
    opts = {"src_col": "src", "dst_col": "dst"}
    files = [f for f in files if f.suffix == ".parquet"]

    def ingest():
        with dask.config.set(scheduler="sync"):
            return run(
                partition_files(files, 2, tmp_path / "pg", n=g.n, read_options=opts, workdir=tmp_path),
                progress=False,
            )

    assert "cached" not in ingest()
    clean = {p: p.read_bytes() for p in (tmp_path / "pg").rglob("*.npy")}
    assert ingest()["cached"] and capsys.readouterr().err == ""
    part = tmp_path / "pg" / "part-1" / "indices.npy"
    data = bytearray(part.read_bytes())
    data[-3] ^= 0xFF
    part.write_bytes(bytes(data))
    assert "cached" not in ingest()
    assert capsys.readouterr().err.strip().splitlines() == [
        f"graphjobs: warning: {part}: checksum mismatch: the file changed or is damaged; building it again"
    ]
    assert {p: p.read_bytes() for p in (tmp_path / "pg").rglob("*.npy")} == clean
    meta_file = tmp_path / "pg" / "meta.json"
    meta = json.loads(meta_file.read_text())
    meta_file.write_text(json.dumps({**meta, "n": g.n + 1}))
    assert "cached" not in ingest()
    assert "meta.json: checksum mismatch: the graph's metadata was edited" in capsys.readouterr().err
    assert graphs.load_partitioned(tmp_path / "pg").n == g.n
