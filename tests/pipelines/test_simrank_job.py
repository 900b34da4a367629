"""The SimRank job: top-k similar vertices per source in Parquet, against exact SimRank."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import graphs
import pipelines
from operators.simrank import _simrank_reference
from pipelines.cli import main

EPS = 1e-2


def _check(g, df, k):
    assert list(df.columns) == ["source", "rank", "vertex", "simrank"]
    S = _simrank_reference(g, c=0.6)
    for src, rows in df.groupby("source"):
        rows = rows.sort_values("rank")
        assert rows["rank"].tolist() == list(range(1, k + 1))
        i = g.internal_ids([src])[0]
        exact = S[i][g.internal_ids(rows.vertex.to_numpy())]
        assert np.abs(exact - rows.simrank.to_numpy()).max() <= EPS
        assert src not in rows.vertex.tolist()
        assert rows.simrank.iloc[-1] >= np.sort(np.delete(S[i], i))[-k] - 2 * EPS


def test_job_from_a_labelled_undirected_file(tmp_path, sync):
    g0 = graphs.erdos_renyi(200, p=0.02, seed=3)
    src, dst, _ = g0.edges()
    path = tmp_path / "edges.csv"
    pd.DataFrame({"a": [f"v{x}" for x in src], "b": [f"v{x}" for x in dst]}).to_csv(path, index=False)
    sources = ["v1", "v20", "v150"]
    job = pipelines.simrank_job(
        path, sources, k=5, epsilon=EPS, out=tmp_path / "out", workdir=tmp_path, chunk=2, directed=False
    )
    assert any(key.startswith("simrank-") for key in job.keys())
    summary = pipelines.run(job, progress=False)
    assert summary["queries"] == 3 and summary["parts"] == 2
    df = pd.read_parquet(tmp_path / "out")
    assert sorted(set(df.source)) == sorted(sources)
    _check(graphs.read_edgelist(path, directed=False), df, 5)


def test_unknown_source_fails_before_queries(tmp_path, sync):
    job = pipelines.simrank_job(
        "rmat:scale=8,seed=1", pipelines.RandomSources(300), out=tmp_path / "o", workdir=tmp_path, chunk=100
    )
    with pytest.raises(ValueError, match="random sources"):
        pipelines.run(job, progress=False)
    job = pipelines.simrank_job("rmat:scale=8,seed=1", [3, 10**7], out=tmp_path / "o", workdir=tmp_path)
    with pytest.raises(KeyError, match="10000000"):
        pipelines.run(job, progress=False)
    assert not (tmp_path / "o").exists()


def test_cli(tmp_path, capsys):
    out = tmp_path / "res"
    args = [
        "simrank",
        "rmat:scale=8,seed=2",
        "--source",
        "5",
        "-k",
        "6",
        "--epsilon",
        str(EPS),
        "--out",
        str(out),
        "--workdir",
        str(tmp_path),
        "--quiet",
        "--device",
        "cpu",
    ]
    assert main(args) == 0
    assert "first source 5:" in capsys.readouterr().out
    _check(graphs.rmat(8, seed=2, device="cpu"), pd.read_parquet(out), 6)
    bad = [
        "simrank",
        "rmat:scale=8",
        "--source",
        "3",
        "--epsilon",
        "2",
        "--quiet",
        "--device",
        "cpu",
        "--workdir",
        str(tmp_path),
        "--out",
        str(tmp_path / "x"),
    ]
    assert main(bad) == 1
    assert "epsilon must be in (0, 1)" in capsys.readouterr().err


def test_on_a_real_local_cluster(tmp_path):
    from distributed import Client

    from cluster import make_cluster

    with make_cluster(2, device="cpu", dashboard_address=":0") as cl, Client(cl) as client:
        job = pipelines.simrank_job(
            "rmat:scale=9,seed=4",
            pipelines.RandomSources(12),
            k=4,
            epsilon=0.05,
            out=tmp_path / "o",
            workdir=tmp_path,
            chunk=3,
        )
        summary = pipelines.run(job, client, progress=False)
        assert summary["queries"] == 12 and summary["parts"] == 4
    df = pd.read_parquet(tmp_path / "o")
    rows = df.groupby("source").size()  # a source without in-neighbours lists none; others may list fewer
    assert df.source.nunique() <= 12 and (df.simrank > 0).all() and rows.max() == 4 and len(df) == rows.sum()
    assert summary.sources_short == 12 - int((rows == 4).sum()) > 0


def test_a_long_first_source_is_stated_once_per_job_and_again_for_other_options(
    tmp_path, monkeypatch, capsys
):
    import pipelines.simrank as job_module

    monkeypatch.setattr(job_module, "LONG_SECONDS", 0.0)  # every source counts as long here
    monkeypatch.setattr(job_module, "_stated", set())
    g = graphs.erdos_renyi(100, p=0.05, seed=1)

    def run(epsilon, folder):
        out = tmp_path / folder
        job = pipelines.simrank_job(g, [1, 2, 3, 4], k=3, epsilon=epsilon, out=out, chunk=1, overwrite=True)
        pipelines.run(job, progress=False)
        return capsys.readouterr().err.count("meeting samples for source")

    assert run(0.1, "a") == 1  # four chunks, one line
    assert run(0.05, "a") == 1  # the same folder replaced by a job with another epsilon: its own cost
    assert run(0.1, "b") == 1


def test_a_query_that_does_not_fit_the_hosts_memory_is_refused_in_one_line(tmp_path, capsys, monkeypatch):
    """On the CPU too the job checks a query's memory (the simplified copy's build, or its hop vectors)
    before allocating it: one line naming the estimate and what would fit, exit 1, nothing written."""
    import operators._gpu.memory as memory

    opts = ["--random", "2", "-k", "5", "--epsilon", "0.05", "--device", "cpu", "--quiet"]
    args = ["simrank", "rmat:8", *opts, "--workdir", str(tmp_path / "wd")]
    assert main([*args, "--out", str(tmp_path / "fits"), "--json"]) == 0
    memory_record = json.loads(capsys.readouterr().out)["memory"]
    assert memory_record["device"] == "cpu" and memory_record["estimate_bytes"] > 0
    monkeypatch.setattr(memory, "free_memory", lambda device: memory_record["estimate_bytes"] // 2)
    assert main([*args, "--out", str(tmp_path / "s")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "SimRank of n=256" in err[0] and "on the host" in err[0], err
    assert "a larger --epsilon" in err[0] and not (tmp_path / "s").exists()
