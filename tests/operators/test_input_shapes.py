"""Every operator takes a graph in the users' shapes: a CSRGraph, a NetworkX graph, a SciPy sparse adjacency
matrix (rows are sources) or a pandas edge DataFrame, converted once by ``operators._checks.check_graph``
with the original labels; anything else is a TypeError that lists the accepted types."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import graphs
from graphs.interop import NX_CACHE_KEY
from operators import (
    build_ppr_index,
    influence_maximization,
    influence_spread,
    pagerank,
    ppr,
    simrank,
    simrank_topk,
    topk_ppr,
)

# a -> b -> c -> a, c -> b, d -> c, b -> d: every shape below numbers a, b, c, d as 0, 1, 2, 3
EDGES = [("a", "b"), ("b", "c"), ("c", "a"), ("c", "b"), ("d", "c"), ("b", "d")]
NODES = ["a", "b", "c", "d"]


def _shapes() -> dict:
    G = nx.DiGraph(EDGES)
    return {
        "csr": graphs.from_networkx(G),
        "networkx": G,
        "scipy": nx.to_scipy_sparse_array(G, nodelist=NODES, format="csr"),  # labels 0..3: rows
        "pandas": pd.DataFrame(EDGES, columns=["source", "target"]),
        "pandas-src-dst": pd.DataFrame(EDGES, columns=["src", "dst"]),
    }


def _label(shape: str, v):
    return NODES[v] if shape == "scipy" else v


def _by_label(shape: str, frame: pd.DataFrame, value: str) -> dict:
    return {_label(shape, v): x for v, x in zip(frame["vertex"], frame[value], strict=True)}


def _seeds(g, shape, to) -> dict:
    return {_label(shape, v): 1.0 for v in influence_maximization(g, 2, seed=0).seeds.tolist()}


def _topk(g, shape, to) -> dict:
    return _by_label(shape, topk_ppr(build_ppr_index(g, seed=0), [to("b")], k=2).to_frame(), "ppr")


def _simrank_topk(g, shape, to) -> dict:
    return _by_label(shape, simrank_topk(g, [to("c")], k=2, epsilon=0.05).to_frame(), "simrank")


OPERATORS = {  # name -> (graph, its shape, label -> the shape's label) -> the answer as {label: value}
    "pagerank": lambda g, s, to: _by_label(s, pagerank(g, tol=1e-12, as_frame=True), "pagerank"),
    "ppr": lambda g, s, to: _by_label(s, ppr(g, [to("c")], method="power", tol=1e-12, as_frame=True), "ppr"),
    "ppr-topk": lambda g, s, to: _by_label(s, ppr(g, [to("c")], topk=3, tol=1e-10, as_frame=True), "ppr"),
    "simrank": lambda g, s, to: _by_label(s, simrank(g, to("c"), epsilon=0.05, as_frame=True), "simrank"),
    "simrank-topk": _simrank_topk,
    "topk-ppr": _topk,
    "influence": _seeds,
    "spread": lambda g, s, to: {"spread": influence_spread(g, [to("d")], n_sim=200, seed=0)},
}


@pytest.mark.parametrize("name", sorted(OPERATORS))
@pytest.mark.parametrize("shape", ["networkx", "scipy", "pandas", "pandas-src-dst"])
def test_every_operator_takes_every_shape(name, shape):
    graphs_ = _shapes()
    call = OPERATORS[name]
    want = call(graphs_["csr"], "csr", lambda v: v)
    got = call(graphs_[shape], shape, (lambda v: NODES.index(v)) if shape == "scipy" else (lambda v: v))
    assert got.keys() == want.keys() and len(want) >= 1
    np.testing.assert_allclose([got[v] for v in want], list(want.values()), atol=1e-12)


def test_networkx_graph_is_converted_once_until_it_changes():
    G = nx.DiGraph(EDGES)
    first = pagerank(G, tol=1e-12)
    converted = G.__networkx_cache__[NX_CACHE_KEY]
    np.testing.assert_allclose(pagerank(G, tol=1e-12), first, atol=0)
    assert G.__networkx_cache__[NX_CACHE_KEY] is converted  # the second call reused it
    G.add_edge("d", "a")  # NetworkX clears its cache: the next call sees the new edge
    assert NX_CACHE_KEY not in G.__networkx_cache__
    want = nx.pagerank(G, tol=1e-12)
    np.testing.assert_allclose(pagerank(G, tol=1e-12), [want[v] for v in G], atol=1e-9)
    assert G.__networkx_cache__[NX_CACHE_KEY] is not converted


def test_networkx_undirected_weighted_and_integer_labels():
    G = nx.Graph()
    G.add_weighted_edges_from([(10, 20, 1.0), (20, 30, 3.0), (30, 10, 0.5)])
    G.add_node(40)  # isolated: kept, as in NetworkX
    got = pagerank(G, tol=1e-12, as_frame=True)
    want = nx.pagerank(G, tol=1e-12)
    assert got["vertex"].tolist() == [10, 20, 30, 40]
    np.testing.assert_allclose(got["pagerank"], [want[v] for v in G], atol=1e-9)


def test_pandas_weight_column_and_scipy_weights_are_read():
    frame = pd.DataFrame({"source": ["x", "x", "y"], "target": ["y", "z", "x"], "weight": [1.0, 3.0, 2.0]})
    G = nx.DiGraph()
    G.add_weighted_edges_from(frame.itertuples(index=False))
    want = nx.pagerank(G, tol=1e-12)
    for shape in (frame, nx.to_scipy_sparse_array(G, nodelist=["x", "y", "z"])):
        np.testing.assert_allclose(pagerank(shape, tol=1e-12), [want[v] for v in "xyz"], atol=1e-9)


def test_pandas_frame_without_edge_columns_is_refused_by_name():
    with pytest.raises(
        graphs.GraphFormatError, match=r"'source' and 'target' \(or 'src' and 'dst'\).*\['u', 'v'\]"
    ):
        pagerank(pd.DataFrame({"u": [0], "v": [1]}))
    g = graphs.from_pandas(pd.DataFrame({"u": [0, 1], "v": [1, 0]}), source="u", target="v")
    assert (g.n, g.m) == (2, 2)


@pytest.mark.parametrize("bad", [[(0, 1)], {0: [1]}, np.ones((2, 2)), "edges.txt"])
def test_other_types_are_a_type_error_listing_the_accepted_ones(bad):
    accepted = r"graphs\.CSRGraph, a NetworkX graph, a SciPy sparse adjacency matrix .* pandas edge DataFrame"
    for call in (lambda: pagerank(bad), lambda: ppr(bad, [0]), lambda: influence_maximization(bad, 1)):
        with pytest.raises(TypeError, match=accepted):
            call()


def test_scipy_matrix_is_not_cached():
    A = sp.csr_array(np.array([[0, 1], [1, 0]], dtype=float))
    np.testing.assert_allclose(pagerank(A, tol=1e-12), [0.5, 0.5])
    A[0, 1] = 0  # changed in place: the next call converts it again
    A.eliminate_zeros()
    np.testing.assert_allclose(pagerank(A, tol=1e-12), pagerank(graphs.from_scipy(A), tol=1e-12))
