"""Sources of small closed reach found before any round (``operators.topk.exact``): the bounded search
against NetworkX's reachability, its limits, and the answers against the round path's."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

import graphs
from operators import build_ppr_index, topk_ppr
from operators.topk import exact as _topk_exact
from operators.topk.exact import EXACT_REACH, lone_sources, small_reaches
from tests.conftest import DEVICES


def _graph(device):
    """A 300-vertex BA core, plus tails hanging off it: chains into dead ends, a cycle, a fan of 300."""
    base = graphs.barabasi_albert(300, 3, seed=2)
    src = np.repeat(np.arange(300), np.diff(base.indptr)).tolist()
    dst = base.indices.tolist()
    edges = [(300, 301), (301, 302), (303, 304), (304, 303), (304, 305), (306, 0), (307, 307), (307, 308)]
    edges += [(309, 310 + i) for i in range(300)]  # reaches 301 vertices: beyond EXACT_REACH
    src += [a for a, _ in edges]
    dst += [b for _, b in edges]
    return graphs.from_edges(src, dst, n=610, renumber=False).to(device), src, dst


@pytest.mark.parametrize("device", DEVICES)
def test_search_finds_exactly_the_small_reaches(device):
    g, src, dst = _graph(device)
    nxg = nx.DiGraph(list(zip(src, dst, strict=True)))
    nxg.add_nodes_from(range(g.n))
    ids = np.arange(g.n)
    todo = np.flatnonzero(~lone_sources(g, ids))
    reaches, host = small_reaches(g, ids, todo)
    assert host.device == "cpu"
    want = {int(s) for s in todo if len(nx.descendants(nxg, int(s))) + 1 <= EXACT_REACH}
    assert set(reaches) == want and {300, 301, 303, 304, 307} <= want and not {306, 309, 5} & want
    for s, reach in reaches.items():
        assert sorted(reach.tolist()) == sorted(nx.descendants(nxg, s) | {s}) and reach[0] == s


def test_search_gives_up_at_its_scan_limit(monkeypatch):
    g, _, _ = _graph("cpu")
    ids = np.array([300, 303, 307])
    monkeypatch.setattr(_topk_exact, "PROBE_SCAN", 2)  # 300 reads 1 + 1 + 0 edges, 303 reads 1 + 2
    reaches, _ = small_reaches(g, ids, np.arange(3))
    assert sorted(reaches) == [0, 2]


@pytest.mark.parametrize("device", DEVICES)
def test_answers_before_rounds_equal_the_round_path(device, monkeypatch):
    g, _, _ = _graph(device)
    idx = build_ppr_index(g, seed=0)
    sources, k = [300, 303, 307, 301, 5, 306], 12
    now = topk_ppr(idx, sources, k=k)
    assert now.rounds[:4].tolist() == [0, 0, 0, 0] and now.exact[:4].all() and (now.rounds[4:] >= 1).all()
    assert (now.seconds > 0).all()
    monkeypatch.setattr(_topk_exact, "PROBE_SCAN", 0)
    before = topk_ppr(idx, sources, k=k)
    assert before.rounds[:2].tolist() == [1, 1] and before.exact[:4].all()
    np.testing.assert_array_equal(now.vertices[:4], before.vertices[:4])
    np.testing.assert_allclose(now.ppr[:4], before.ppr[:4], rtol=1e-12, atol=1e-15)


@pytest.mark.gpu
def test_large_gpu_graphs_keep_no_host_copy(monkeypatch):
    g, _, _ = _graph("gpu")
    monkeypatch.setattr(_topk_exact, "PROBE_EDGES", g.m - 1)
    assert small_reaches(g, np.array([300]), np.array([0])) == ({}, None)
    assert not g.has_derived("topk_host_copy")
    res = topk_ppr(build_ppr_index(g, seed=0), [300], k=5)  # the round path still answers it
    assert res.exact[0] and res.rounds[0] == 1


@pytest.mark.parametrize("device", DEVICES)
def test_lone_sources_are_those_without_edges_to_others(device):
    """A source is lone when it has no out-edge or self-loops only, of any number (NetworkX's successors
    as the oracle); the bits are computed once per graph, and ids past the first byte read their own."""
    g, src, dst = _graph("cpu")
    src = src + [600] * 6 + [601] * 6  # six self-loops; five and an edge out
    dst = dst + [600] * 6 + [601] * 5 + [0]
    g = graphs.from_edges(src, dst, n=610, renumber=False).to(device)
    nxg = nx.MultiDiGraph(list(zip(src, dst, strict=True)))
    nxg.add_nodes_from(range(g.n))
    want = [set(nxg.successors(v)) <= {v} for v in range(g.n)]
    ids = np.random.default_rng(0).permutation(g.n)
    np.testing.assert_array_equal(lone_sources(g, ids), np.array(want)[ids])
    assert want[600] and not want[601] and want[302] and not want[307]
    bits = g.derived("topk_lone_vertices", None)  # computed by the first call
    assert bits.nbytes == -(-g.n // 8)
