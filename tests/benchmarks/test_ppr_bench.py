"""The PPR benchmark's per-graph run (``benchmarks.ppr_push.run_graph``) on a small graph on the CPU: each
row within its L1 target, beside NetworkX stopped at the same measured error; and the rule that leaves
out a batch whose sources one at a time would take too long."""

from __future__ import annotations

import json

import pytest

import graphs
from benchmarks import ppr_push
from benchmarks.common import Reporter


def test_a_graphs_rows_are_within_their_targets_beside_networkx(tmp_path):
    out = tmp_path / "bench.jsonl"
    g = graphs.rmat(8, seed=0, device="cpu", dedupe=True)  # NetworkX's DiGraph has no repeated edges
    ppr_push.run_graph(
        Reporter(str(out), "cpu"), "rmat-8", g, sources=2, batch=3, methods=["powerpush", "power"]
    )
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    single = [r for r in rows if r["bench"] == "ppr"]
    assert sorted((r["impl"], r["tol"]) for r in single) == [
        (f"{m} cpu", t) for m in ("power", "powerpush") for t in (1e-6, 1e-4)
    ]
    for r in single:
        assert r["within_tol"] and r["l1_max"] <= r["tol"] and r["l1_bound_max"] <= r["tol"]
        base = r["baseline"]
        assert base["impl"].startswith("networkx") and base["reached"] and base["l1_max"] <= r["tol"]
    batches = [r for r in rows if r["bench"] == "ppr-batch"]
    assert [(r["impl"], r["batch"]) for r in batches] == [("auto batch cpu", 3)] * 2
    assert all(r["within_tol"] for r in batches)


def test_a_batch_is_left_out_where_its_sources_one_at_a_time_exceed_the_budget():
    count = 32
    per = ppr_push.BATCH_BUDGET_S * 1e3 / count
    assert ppr_push.batch_too_slow(per * 1.01, count) and not ppr_push.batch_too_slow(per * 0.99, count)
    assert not ppr_push.batch_too_slow(None, count)  # a method with no one-at-a-time row (the CPU's auto)


def test_networkx_is_not_compared_on_a_graph_with_repeated_edges():
    g = graphs.rmat(8, seed=0, device="cpu")  # R-MAT repeats some edges; a DiGraph would merge them
    with pytest.raises(ValueError, match="repeats edges"):
        ppr_push._networkx(g)
