"""Round trips NetworkX/SciPy <-> CSRGraph with labels; results keyed by label; no cuDF -> clear error."""

from __future__ import annotations

import importlib.util

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

import graphs
import operators
from graphs import GraphFormatError
from graphs._device import to_host


def _edge_set(G, weight="weight"):
    return sorted((str(u), str(v), round(float(d.get(weight, 1.0)), 5)) for u, v, d in G.edges(data=True))


def test_networkx_directed_round_trip_keeps_labels_isolated_nodes_and_weights():
    G = nx.DiGraph()
    G.add_nodes_from(["z", "a", "lonely"])
    G.add_weighted_edges_from([("a", "z", 0.5), ("z", "a", 2.0), ("a", "b", 1.5), ("b", "b", 1.0)])
    g = graphs.from_networkx(G)
    assert g.ids.tolist() == ["z", "a", "lonely", "b"] and g.weighted and (g.n, g.m) == (4, 4)
    back = graphs.to_networkx(g)
    assert isinstance(back, nx.DiGraph) and set(back.nodes) == set(G.nodes)
    assert _edge_set(back) == _edge_set(G)


def test_networkx_undirected_and_multigraph():
    G = nx.karate_club_graph()
    g = graphs.from_networkx(G, weight=None)
    assert not g.directed and g.m == 2 * G.number_of_edges() and not g.weighted
    back = graphs.to_networkx(g)
    assert isinstance(back, nx.Graph) and not back.is_directed()
    assert sorted(map(sorted, back.edges())) == sorted(map(sorted, G.edges()))
    M = nx.MultiDiGraph([(1, 2), (1, 2), (2, 3)])
    gm = graphs.from_networkx(M)
    assert gm.m == 3 and gm.ids.tolist() == [1, 2, 3]
    assert (
        isinstance(graphs.to_networkx(gm), nx.MultiDiGraph) and graphs.to_networkx(gm).number_of_edges() == 3
    )


def _from_networkx_reference(G, weight="weight"):
    """The obvious conversion: every (u, v, data) of ``G.edges(data=True)``, positions by a dict."""
    nodes = list(G.nodes())
    index = {v: i for i, v in enumerate(nodes)}
    edges = list(G.edges(data=True))
    src = np.array([index[u] for u, _, _ in edges], dtype=np.int64)
    dst = np.array([index[v] for _, v, _ in edges], dtype=np.int64)
    w = None
    if weight is not None and any(weight in d for _, _, d in edges):
        w = np.array([d.get(weight, 1.0) for _, _, d in edges], dtype=np.float64)
    return graphs.from_edges(src, dst, w, n=len(nodes), directed=G.is_directed(), renumber=False), nodes


def _random_nx(kind, labels, weights, seed):
    rng = np.random.default_rng(seed)
    n, m = 40, 160
    G = kind()
    names = {
        "positions": list(range(n)),
        "shuffled": rng.permutation(n).tolist(),
        "sparse ints": (rng.choice(10**6, n, replace=False) - 500_000).tolist(),
        "strings": [f"v{i}" for i in rng.permutation(n)],
        "mixed": [i if i % 2 else f"s{i}" for i in range(n)],
    }[labels]
    G.add_nodes_from(names)
    for _ in range(m):
        u, v = names[rng.integers(n)], names[rng.integers(n // 2)]  # repeats and self-loops
        data = {}
        if weights == "all" or (weights == "some" and rng.random() < 0.5):
            data["weight"] = float(rng.integers(1, 9))
        G.add_edge(u, v, **data)
    return G


@pytest.mark.parametrize("kind", [nx.DiGraph, nx.Graph, nx.MultiDiGraph, nx.MultiGraph])
@pytest.mark.parametrize("labels", ["positions", "shuffled", "sparse ints", "strings", "mixed"])
@pytest.mark.parametrize("weights", ["none", "some", "all"])
def test_from_networkx_equals_the_edge_by_edge_reference(kind, labels, weights):
    G = _random_nx(kind, labels, weights, seed=len(labels) + len(weights))
    for graph in (G, G.subgraph(list(G.nodes())[5:]), G.reverse(copy=False) if G.is_directed() else G):
        want, nodes = _from_networkx_reference(graph)
        got = graphs.from_networkx(graph)
        assert got.ids.tolist() == nodes and got.directed == want.directed
        np.testing.assert_array_equal(got.indptr, want.indptr)
        np.testing.assert_array_equal(got.indices, want.indices)
        assert (got.weights is None) == (want.weights is None) == (weights == "none")
        if got.weights is not None:
            np.testing.assert_array_equal(got.weights, want.weights)


def test_pagerank_by_label_matches_networkx():
    G = nx.gnp_random_graph(60, 0.08, seed=3, directed=True)
    G = nx.relabel_nodes(G, {i: f"v{i}" for i in G})
    g = graphs.from_networkx(G)
    ours = graphs.vertex_dict(g, operators.pagerank(g, tol=1e-10))
    theirs = nx.pagerank(G, tol=1e-12)
    assert set(ours) == set(theirs) and max(abs(ours[v] - theirs[v]) for v in G) < 1e-8
    frame = graphs.vertex_frame(g, operators.pagerank(g, tol=1e-10), "pagerank")
    assert list(frame.columns) == ["vertex", "pagerank"] and frame.vertex.tolist() == list(G.nodes)


def test_scipy_round_trip():
    A = sp.random_array((50, 50), density=0.1, random_state=np.random.default_rng(1), format="csr")
    g = graphs.from_scipy(A, ids=[f"r{i}" for i in range(50)])
    assert g.weighted and g.m == A.nnz and g.ids[7] == "r7"
    np.testing.assert_allclose(g.to_scipy().toarray(), A.toarray(), rtol=1e-6)
    ones = graphs.from_scipy((A != 0).astype(np.float64))
    assert not ones.weighted and ones.m == A.nnz
    S = A + A.T
    assert graphs.from_scipy(S, directed=False).m == S.nnz
    with pytest.raises(ValueError, match="symmetric"):
        graphs.from_scipy(A, directed=False)
    with pytest.raises(ValueError, match="square"):
        graphs.from_scipy(sp.csr_array(np.ones((2, 3))))
    with pytest.raises(ValueError, match="label the 50 rows"):
        graphs.from_scipy(A, ids=["x"])
    # weights follow the rule of every other input: finite and non-negative, the first bad entry named
    B = sp.csr_array(np.array([[0.0, 2.0, 0.0], [0.0, 0.0, -0.5], [np.nan, 0.0, 0.0]]))
    with pytest.raises(GraphFormatError, match=r"entry \(1, 2\): expected a finite, non-negative"):
        graphs.from_scipy(B)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("heavy", "a number"),
        (-1.0, "a finite, non-negative number"),
        (float("nan"), "a finite, non-negative n"),
    ],
)
def test_networkx_weights_that_cannot_be_weights_name_the_edge(value, expected):
    G = nx.DiGraph([("a", "b", {"weight": 2.0}), ("b", "c", {"weight": value})])
    with pytest.raises(GraphFormatError, match=rf"edge \('b', 'c'\): expected {expected}"):
        graphs.from_networkx(G)
    assert not graphs.from_networkx(G, weight=None).weighted  # weights not asked for are not read


@pytest.mark.parametrize(
    ("module", "call"),
    [
        ("cudf", lambda: graphs.from_cudf(None, source="a", destination="b")),
        ("dask_cudf", lambda: graphs.from_dask_cudf(None)),
        ("cugraph", lambda: graphs.from_cugraph(None)),
        ("cudf", lambda: graphs.to_cugraph(graphs.toy.chain())),
        ("pylibcugraph", lambda: graphs.to_pylibcugraph(graphs.toy.chain())),
        ("cudf", lambda: graphs.vertex_frame(graphs.toy.chain(), np.zeros(3), "x", library="cudf")),
    ],
)
def test_rapids_missing_is_a_clear_error(module, call):
    if importlib.util.find_spec(module) is not None:
        pytest.skip(f"{module} is installed here")
    with pytest.raises(ImportError, match=f"needs {module} \\(RAPIDS\\), which is not installed"):
        call()


def test_vertex_results_must_match_the_graph():
    g = graphs.toy.labeled()
    with pytest.raises(ValueError, match="one value per vertex"):
        graphs.vertex_dict(g, np.zeros(g.n + 1))
    with pytest.raises(ValueError, match="one value per vertex"):
        graphs.vertex_frame(g, [0.0] * (g.n - 1), "x")
    with pytest.raises(ValueError, match="library must be"):
        graphs.vertex_frame(g, np.zeros(g.n), "x", library="polars")
    frame = graphs.vertex_frame(g, np.arange(g.n, dtype=float), "x", library="auto")  # host values
    assert type(frame).__module__.startswith("pandas") and frame.x.tolist() == list(range(g.n))


def _dangling_graph():
    """Weighted, with parallel edges, a dangling vertex (5) and an isolated last vertex (6)."""
    src = np.array([0, 0, 0, 1, 2, 2, 3, 3, 4, 4, 1])
    dst = np.array([1, 2, 2, 2, 0, 3, 4, 5, 0, 5, 5])
    w = np.array([1.0, 2.0, 0.5, 1.0, 3.0, 1.0, 1.0, 2.0, 1.0, 1.0, 4.0])
    return graphs.from_edges(src, dst, w, n=7, renumber=False)


@pytest.mark.gpu
@pytest.mark.parametrize("renumber", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
def test_pylibcugraph_sees_the_same_graph(weighted, renumber):
    """cuGraph's PageRank (and, unweighted, its PPR: ours ignores weights) on ``to_pylibcugraph`` equals
    ours; its stop rule is an L1 change < 1e-6, so both lie within 1e-6 * alpha / (1 - alpha) < 6e-6
    of the truth, plus float32 rounding. A wrong vertex order, weight or dangling rule costs > 1e-2."""
    import cupy as cp

    plc = pytest.importorskip("pylibcugraph")
    g = _dangling_graph()
    g = g if weighted else graphs.CSRGraph(g.indptr, g.indices, directed=True)
    for G in (g.to("gpu"), graphs.rmat(12, seed=3, weighted=weighted, device="gpu")):
        sg, handle = graphs.to_pylibcugraph(G, store_transposed=True, renumber=renumber)
        v, x = plc.pagerank(handle, sg, None, None, None, None, 0.85, 1e-6, 1000, False)
        theirs = np.zeros(G.n)
        theirs[v.get()] = x.get()
        ours = to_host(operators.pagerank(G, tol=1e-12, dtype=np.float64))
        assert np.abs(theirs - ours).sum() < 2e-5
        if weighted:
            continue
        s = int(np.flatnonzero(np.diff(to_host(G.indptr)))[0])
        one, val = cp.asarray([s], dtype=cp.int32), cp.ones(1, dtype=cp.float32)
        v, x = plc.personalized_pagerank(handle, sg, None, None, None, None, one, val, 0.8, 1e-6, 1000, False)
        theirs = np.zeros(G.n)
        theirs[v.get()] = x.get()
        exact = to_host(operators.ppr(G, [G.ids[s]], method="power", tol=1e-12))[0]
        assert np.abs(theirs - exact).sum() < 2e-5
