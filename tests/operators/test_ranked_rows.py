"""Rankings list only vertices of positive value (``operators._ranked``): a source in a 3-vertex chain
reaches 3 vertices, so its top 10 has 3 rows, the exact PPR of NetworkX; padding slots hold (-1, 0) and
no consumer emits them. The first call compiles before any source's clock starts."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

import graphs
from operators import build_ppr_index, ppr, simrank_topk, topk_ppr
from operators.topk import exact as _topk_exact

CHAIN = [(300, 301), (301, 302)]  # 300 -> 301 -> 302 (dangling): 300 reaches 3 vertices, has no in-edge


def chain_graph():
    """A 300-vertex BA component and, apart from it, the directed chain 300 -> 301 -> 302."""
    base = graphs.barabasi_albert(300, 3, seed=2)
    src = np.concatenate([np.repeat(np.arange(300), np.diff(base.indptr)), [a for a, _ in CHAIN]])
    dst = np.concatenate([base.indices, [b for _, b in CHAIN]])
    return graphs.from_edges(src, dst, n=303, renumber=False), src, dst


def exact_ppr(src, dst, s):
    nxg = nx.MultiDiGraph(list(zip(src.tolist(), dst.tolist(), strict=True)))
    return nx.pagerank(nxg, alpha=0.8, personalization={s: 1}, tol=1e-14, max_iter=2000)


@pytest.mark.parametrize("probe", [True, False])
def test_topk_ppr_lists_exactly_the_reach(probe, monkeypatch):
    if not probe:  # the chain is found by the rounds, not by the search before them
        monkeypatch.setattr(_topk_exact, "PROBE_SCAN", 0)
    g, src, dst = chain_graph()
    res = topk_ppr(build_ppr_index(g, seed=0), [300, 5, 301], k=10)
    assert res.vertices.shape == res.ppr.shape == (3, 10)
    assert res.counts.tolist() == [3, 10, 2]
    for i, s in enumerate((300, 5, 301)):
        verts, vals = res.row(i)
        assert (vals > 0).all() and (res.vertices[i, res.counts[i] :] == -1).all()
        assert (res.ppr[i, res.counts[i] :] == 0).all()
        if s != 5:
            exact = exact_ppr(src, dst, s)
            assert sorted(verts.tolist()) == sorted(v for v, x in exact.items() if x > 1e-12)
            np.testing.assert_allclose(vals, [exact[v] for v in verts.tolist()], atol=1e-10)
    frame = res.to_frame()
    assert len(frame) == 15 and (frame.ppr > 0).all() and (frame.vertex >= 0).all()
    assert frame.groupby("source")["rank"].max().to_dict() == {300: 3, 5: 10, 301: 2}


@pytest.mark.parametrize("method", ["push", "power"])
def test_ppr_topk_lists_exactly_the_reach(method):
    g, src, dst = chain_graph()
    info = {}
    labels, values = ppr(g, [300, 5], topk=10, tol=1e-10, method=method, info=info)
    assert info["counts"] == [3, 10]
    exact = exact_ppr(src, dst, 300)
    assert sorted(labels[0, :3].tolist()) == [300, 301, 302] and (labels[0, 3:] == -1).all()
    np.testing.assert_allclose(values[0, :3], [exact[v] for v in labels[0, :3].tolist()], atol=1e-8)
    assert (values[0, 3:] == 0).all() and (values[1] > 0).all() and (labels[1] >= 0).all()


def test_simrank_source_without_in_edges_lists_nothing():
    g, _, _ = chain_graph()
    res = simrank_topk(g, [300, 5, 301], k=10, epsilon=0.05, samples="practical", seed=1)
    assert res.counts[0] == 0 and res.counts[2] == 0 and res.counts[1] > 0  # 301's one in-neighbour: 300
    assert (res.vertices[[0, 2]] == -1).all() and (res.scores[[0, 2]] == 0).all()
    assert res.row(0)[0].size == 0 and (res.row(1)[1] > 0).all()
    frame = res.to_frame()
    assert set(frame.source) == {5} and len(frame) == res.counts[1] and (frame.simrank > 0).all()


def test_first_calls_compile_before_the_sources_are_timed(monkeypatch):
    """Each operator's warm-up runs before its first timed source and only on the first call."""
    import importlib

    # the package re-exports functions of the same names as these modules
    _ppr, _simrank, _topk = (importlib.import_module(f"operators.{m}") for m in ("ppr", "simrank", "topk"))

    g, _, _ = chain_graph()
    events = []

    def spy(module, name):
        real = getattr(module, name)

        def wrapped(*args, **kw):
            events.append(name)
            return real(*args, **kw)

        monkeypatch.setattr(module, name, wrapped)

    spy(_topk, "_warm_up")
    spy(_topk, "answer_all")
    idx = build_ppr_index(g, seed=0)
    first, again = topk_ppr(idx, [5, 7], k=10), topk_ppr(idx, [5, 7], k=10)
    assert events == ["_warm_up", "answer_all", "answer_all"]
    assert first.compile_seconds > 0 and again.compile_seconds == 0.0
    np.testing.assert_array_equal(first.vertices, again.vertices)

    events.clear()
    spy(_ppr, "_warm_up")
    spy(_ppr, "_top_entries")
    info, later = {}, {}
    ppr(g, [5, 7], topk=10, method="push", info=info)
    ppr(g, [5, 7], topk=10, method="push", info=later)
    assert events[:2] == ["_warm_up", "_top_entries"] and events.count("_top_entries") == 5
    assert info["compile_seconds"] > 0 and later["compile_seconds"] == 0.0

    events.clear()
    spy(_simrank, "_warm_up")
    spy(_simrank, "_single")
    one = simrank_topk(g, [5], k=5, epsilon=0.05, samples="practical")
    two = simrank_topk(g, [5], k=5, epsilon=0.05, samples="practical")
    assert events == ["_warm_up", "_single", "_single", "_single"]
    assert one.compile_seconds > 0 and two.compile_seconds == 0.0
