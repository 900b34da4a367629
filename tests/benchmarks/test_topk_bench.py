"""The top-k benchmark's per-graph run (``benchmarks.topk_ppr.run_graph``) on a small graph on the CPU:
each row it writes, with precision scored from one top list a source (``top_values``)."""

from __future__ import annotations

import json

import numpy as np

import graphs
from benchmarks import topk_ppr
from benchmarks.common import Reporter


def test_a_graphs_rows_state_their_precision_beside_the_exact_baseline(tmp_path, capsys):
    out = tmp_path / "bench.jsonl"
    g = graphs.rmat(10, seed=0, device="cpu")
    topk_ppr.run_graph(Reporter(str(out), "cpu"), "rmat-10", g, ks=(10, 100), exact_sources=4, batch=40)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    kinds = [r["bench"] for r in rows]
    assert kinds.count("ppr-index") == 1 and kinds.count("topk-ppr") == 2 and kinds.count("topk-batch") == 3
    for row in (r for r in rows if r["bench"] == "topk-ppr"):
        assert row["queries"] == 4 and 0.9 <= row["precision"] <= 1.0 and 0.9 <= row["ndcg"] <= 1.0
        assert row["baseline"]["impl"] == "exact ppr (power) cpu" and row["baseline"]["median"] > 0
    assert "rmat-10: index" in capsys.readouterr().err
    batches = [r for r in rows if r["bench"] == "topk-batch"]
    assert all(r["refused"] == {} and r["by_streams"]["1"] > 0 for r in batches)


def test_a_batch_refused_for_memory_is_recorded_and_the_others_still_run(tmp_path, monkeypatch):
    """A setting the operator refuses (``InsufficientMemoryError``) leaves its rate empty with the
    message; the row's rate is then the one-at-a-time rate, and later k still run."""
    from operators import InsufficientMemoryError

    real = topk_ppr.topk_ppr
    g = graphs.rmat(10, seed=0, device="cpu")
    many = topk_ppr._sources(g, 40, seed=2)  # the batch over sources with out-edges

    def refuse_default(idx, sources, **kw):
        if kw.get("streams") is None and np.array_equal(sources, many):
            raise InsufficientMemoryError("top-k of 40 sources on the host", 2**40, 2**30, "fewer sources")
        return real(idx, sources, **kw)

    monkeypatch.setattr(topk_ppr, "topk_ppr", refuse_default)
    out = tmp_path / "bench.jsonl"
    topk_ppr.run_graph(Reporter(str(out), "cpu"), "rmat-10", g, ks=(10,), exact_sources=2, batch=40)
    batches = [json.loads(line) for line in out.read_text().splitlines()]
    batches = [r for r in batches if r["bench"] == "topk-batch"]
    assert len(batches) == 3  # k = 10, 100, 1000
    for r in batches:
        assert r["by_streams"]["default"] is None and "needs about 1024.00 GiB" in r["refused"]["default"]
        assert r["median"] == r["by_streams"]["1"] == r["baseline"]["median"] > 0


def test_kept_counts_the_idle_workspaces_of_the_index_pool():
    from types import SimpleNamespace

    assert topk_ppr._kept(SimpleNamespace(cache={})) == 0
    assert topk_ppr._kept(SimpleNamespace(cache={"stream_pool": SimpleNamespace(idle=3, size=4)})) == 3
