"""The top-k benchmark's per-graph run (``benchmarks.topk_ppr.run_graph``) on a small graph on the CPU:
each row it writes, with precision scored from one top list a source (``top_values``)."""

from __future__ import annotations

import json

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
