"""benchmarks.nx_backend at a tiny scale: every row written, results within NetworkX's tolerance of the
exact PageRank, the absent GPU and nx-cugraph said so; the entry points it writes where graphjobs is
not installed."""

from __future__ import annotations

import json
from importlib.metadata import distributions

import pytest

pytest.importorskip("networkx")

from benchmarks import nx_backend
from graphs import gpu_available


def test_the_benchmark_runs_at_a_tiny_scale(tmp_path):
    out = tmp_path / "nx.jsonl"
    nx_backend.main(["--out", str(out), "--scale", "8", "--edge-factor", "8"])
    rows = {r["method"]: r for r in map(json.loads, out.read_text().splitlines())}
    cpu = ["graphjobs cpu, first call (converts)", "graphjobs cpu, second call (cached)"]
    gpu = [m.replace("cpu", "gpu") for m in cpu] if gpu_available() else ["graphjobs gpu"]
    assert {"networkx.DiGraph build", "networkx.pagerank", *cpu, *gpu} <= rows.keys()
    assert "nx-cugraph" in rows or "nx-cugraph, first call (converts)" in rows
    for row in rows.values():
        assert row["graph"] == "rmat-8x8" and row["n"] == 256 and row["m"] > 1000
        if row["seconds"] is None:
            assert row["note"]  # absent: says why
        elif row["method"] != "networkx.DiGraph build":
            assert row["l1_error"] < 1e-5, row  # L1 change < 1e-6: within alpha / (1 - alpha) * 1e-6
    assert rows[cpu[1]]["baseline"]["seconds"] == rows["networkx.pagerank"]["seconds"]


def test_the_entry_points_it_writes_are_networkx_s(tmp_path):
    nx_backend.register(tmp_path)
    (dist,) = distributions(path=[str(tmp_path)])
    found = {(ep.group, ep.name, ep.value) for ep in dist.entry_points}
    assert found == {
        ("networkx.backends", "graphjobs", "graphjobs.nx_backend:backend"),
        ("networkx.backend_info", "graphjobs", "_graphjobs_nx:get_info"),
    }
