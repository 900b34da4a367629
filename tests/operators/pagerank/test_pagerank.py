"""PageRank against NetworkX, an exact linear solve, hand-derived values and the reference version."""

from __future__ import annotations

import functools

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphs
from graphs._device import to_host
from operators import ConvergenceError, pagerank
from operators.pagerank import _pagerank_reference
from tests.conftest import DEVICES, as_vector, snap, to_networkx

GPU_DTYPES = [np.float64, np.float32]
METHODS = ["pull", "push", "binned"]


def run(g, device, method, dtype=np.float64, **kw):
    out = pagerank(g.to(device), method=method, dtype=dtype if device == "gpu" else None, **kw)
    assert out.shape == (g.n,)
    return to_host(out).astype(np.float64)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("method", METHODS)
def test_hand_checked_toys(device, method):
    a = 0.85
    np.testing.assert_allclose(run(graphs.toy.two_cycle(), device, method), [0.5, 0.5], atol=1e-7)
    # chain 0->1->2 (2 dangling): x = (1, 1+a, 1+a+a^2) / (3 + 2a + a^2)
    chain = run(graphs.toy.chain(3), device, method, tol=1e-12)
    np.testing.assert_allclose(chain, np.array([1, 1 + a, 1 + a + a * a]) / (3 + 2 * a + a * a), atol=1e-9)
    # four leaves -> centre (dangling): centre = (1 + 4a) / (5 + 4a)
    star = run(graphs.toy.star_in(4), device, method, tol=1e-12)
    np.testing.assert_allclose(star[0], (1 + 4 * a) / (5 + 4 * a), atol=1e-9)


def exact_pagerank(g, alpha, p=None, d=None):
    """Solve x = alpha (x P + (x . dangling) d) + (1 - alpha) p densely (small graphs)."""
    n = g.n
    a = g.to_scipy().toarray().astype(np.float64)
    out = a.sum(axis=1)
    P = np.divide(a, out[:, None], out=np.zeros_like(a), where=out[:, None] > 0)
    p = np.full(n, 1 / n) if p is None else p
    d = p if d is None else d
    M = P + np.outer(out == 0, d)
    return np.linalg.solve(np.eye(n) - alpha * M.T, (1 - alpha) * p)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("method", METHODS)
def test_exact_fixed_point_with_weights_personalization_and_dangling(device, method):
    g = graphs.erdos_renyi(300, m=900, seed=1)  # sparse: many dangling vertices
    rng = np.random.default_rng(0)
    w = graphs.from_edges(*g.edges()[:2], rng.uniform(0.1, 3, g.m), n=g.n, renumber=False)
    p, d = rng.random(g.n), rng.random(g.n) * (rng.random(g.n) < 0.3)
    exact = exact_pagerank(w, 0.9, p / p.sum(), d / d.sum())
    got = run(w, device, method, alpha=0.9, personalization=p, dangling=d, tol=1e-14, max_iter=1000)
    np.testing.assert_allclose(got, exact, atol=1e-11)


@functools.cache
def nx_graph(key):
    return to_networkx(graph(key))


def graph(key):
    name, *opts = key.split(":")
    if name == "rmat":
        return graphs.rmat(12, seed=3, device="cpu", dedupe=True, weighted="w" in opts)
    if name == "ba":
        return graphs.barabasi_albert(3000, 4, seed=2)
    if name == "er":
        g = graphs.erdos_renyi(4000, p=0.0008, seed=5)
        w = np.random.default_rng(1).uniform(0.5, 2.0, g.m)
        return graphs.from_edges(*g.edges()[:2], w, n=g.n, renumber=False)
    undirected = name.startswith(("ca-", "email-"))
    return snap(name, directed=not undirected, dedupe=True)


def personalization_of(g, seed=0):
    rng = np.random.default_rng(seed)
    chosen = rng.choice(g.n, size=10, replace=False)
    return {g.ids[i].item(): float(rng.uniform(0.5, 2)) for i in chosen}


CASES = [
    ("wiki-Vote", {}),
    ("wiki-Vote", {"alpha": 0.5}),
    ("wiki-Vote", {"alpha": 0.95, "personalization": 1, "dangling": 2}),
    ("soc-Epinions1", {}),
    ("soc-Epinions1", {"personalization": 3}),
    ("soc-Slashdot0902", {}),
    ("email-Enron", {}),
    ("ca-GrQc", {"personalization": 4}),
    ("rmat", {}),
    ("rmat", {"personalization": 5, "dangling": 6}),
    ("rmat:w", {}),
    ("ba", {}),
    ("er", {"nstart": 7}),
]


def materialize(g, kw):
    out = dict(kw)
    for key in ("personalization", "dangling", "nstart"):
        if key in out:
            out[key] = personalization_of(g, seed=out[key])
    return out


@functools.cache
def nx_result(key, case):
    g, kw = graph(key), materialize(graph(key), dict(CASES[case][1]))
    return as_vector(g, nx.pagerank(nx_graph(key), **kw))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("case", range(len(CASES)), ids=[f"{k}-{'-'.join(v) or 'plain'}" for k, v in CASES])
def test_equals_networkx(case, method, device):
    key, kw = CASES[case]
    g = graph(key)
    ref = nx_result(key, case)
    for dtype in GPU_DTYPES if device == "gpu" else [None]:
        got = run(g, device, method, dtype=dtype, **materialize(g, kw))
        assert np.abs(got - ref).sum() < 1e-6, (dtype, np.abs(got - ref).sum())


@pytest.mark.parametrize("device", DEVICES)
def test_hub_vertices_split_into_chunks_agree_with_cpu(device):
    # one vertex with 60,000 in-edges (GPU: many hub chunks), some warp- and group-sized ones
    rng = np.random.default_rng(3)
    n = 70_000
    src = np.concatenate([np.arange(1, 60_001), rng.integers(0, n, 200_000), np.repeat(np.arange(10), 300)])
    dst = np.concatenate(
        [np.zeros(60_000, dtype=np.int64), rng.integers(0, n, 200_000), rng.integers(0, 500, 3000)]
    )
    g = graphs.from_edges(src, dst, n=n, renumber=False)
    ref = _pagerank_reference(graphs.from_edges(src[:5000], dst[:5000], n=n, renumber=False), tol=1e-10)
    small = run(graphs.from_edges(src[:5000], dst[:5000], n=n, renumber=False), device, "pull", tol=1e-10)
    np.testing.assert_allclose(small, ref, atol=1e-12)
    cpu = pagerank(g, tol=1e-10)
    for method in METHODS:
        np.testing.assert_allclose(run(g, device, method, tol=1e-10), cpu, atol=1e-12)


def test_reordering_does_not_change_ranks_by_label():
    g = graph("rmat:w")
    r = graphs.reorder(g)
    by_label = dict(zip(r.ids.tolist(), pagerank(r).tolist(), strict=True))
    np.testing.assert_allclose(as_vector(g, by_label), pagerank(g), atol=1e-14)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("method", ["pull", "push"])
def test_degree_order_inside_pagerank_returns_the_graph_numbering(device, method):
    """``reorder=True`` iterates on the degree-ordered copy and maps back: the same vector, with
    label-keyed personalization, dangling and start vectors; the copy is kept with the graph."""
    g = graphs.rmat(11, seed=4, weighted=True, device=device)
    label = [int(v) for v in (np.arange(g.n) if g.ids is None else to_host(g.ids))[[7, 100, 3, 9]]]
    opts = dict(
        tol=1e-12,
        method=method,
        dtype=np.float64,
        personalization={label[0]: 2.0, label[1]: 1.0},
        dangling={label[2]: 1.0},
        nstart={label[3]: 1.0},
    )
    info = {}
    plain = to_host(pagerank(g, reorder=False, **opts))
    ordered = to_host(pagerank(g, reorder=True, info=info, **opts))
    assert info["degree_order"] and g.has_derived("pagerank_degree_order")
    np.testing.assert_allclose(ordered, plain, atol=1e-13)
    assert abs(plain - to_host(pagerank(g.to("cpu"), **opts | {"method": "pull"}))).sum() < 1e-9
    default = {}
    pagerank(g, tol=1e-10, info=default)
    assert default["degree_order"] is False
    g.forget_derived("pagerank_degree_order")  # its memory can go
    assert not g.has_derived("pagerank_degree_order")
    pagerank(g, reorder=True, **opts)
    assert g.has_derived("pagerank_degree_order") and g.has_derived("transpose")
    g.forget_derived()  # everything kept with the graph: the copy, the plans, the transpose
    assert not any(g.has_derived(key) for key in ("pagerank_degree_order", "pagerank_pull_plan", "transpose"))
    np.testing.assert_allclose(to_host(pagerank(g, reorder=True, **opts)), plain, atol=1e-13)  # rebuilt


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 25), st.integers(0, 80), st.integers(0, 2**31), st.floats(0.05, 0.95), st.booleans())
def test_pull_push_and_reference_agree(n, m, seed, alpha, weighted):
    rng = np.random.default_rng(seed)
    w = rng.uniform(0, 2, m) if weighted else None
    g = graphs.from_edges(rng.integers(0, n, m), rng.integers(0, n, m), w, n=n, renumber=False)
    ref = _pagerank_reference(g, alpha=alpha, tol=1e-12, max_iter=10_000)
    for method in METHODS:
        np.testing.assert_allclose(
            pagerank(g, alpha=alpha, method=method, tol=1e-12, max_iter=10_000), ref, atol=1e-12
        )


def test_convergence_error_and_bad_arguments():
    g = graph("rmat")
    with pytest.raises(ConvergenceError, match="did not converge in 2 iterations") as info:
        pagerank(g, max_iter=2)
    assert info.value.iterations == 2 and info.value.error > info.value.threshold
    bad = [
        ({"alpha": 1.5}, ValueError, "alpha"),
        ({"max_iter": 0}, ValueError, "max_iter"),
        ({"tol": 0}, ValueError, "tol"),
        ({"method": "scatter"}, ValueError, "method"),
        ({"personalization": {-5: 1.0}}, KeyError, "not in the graph"),
        ({"personalization": np.zeros(g.n)}, ValueError, "positive sum"),
        ({"personalization": np.ones(3)}, ValueError, "array of length"),
        ({"dangling": {0: -1.0}}, ValueError, "non-negative"),
        ({"weighted": True}, ValueError, "no edge weights"),
        ({"dtype": np.int32}, ValueError, "dtype"),
    ]
    for kw, exc, msg in bad:
        with pytest.raises(exc, match=msg):
            pagerank(g, **kw)
    with pytest.raises(TypeError, match="CSRGraph, a NetworkX graph, a SciPy sparse adjacency matrix"):
        pagerank(g.to_scipy().toarray())  # a dense matrix is no graph; a sparse one is (test_input_shapes)
    empty = graphs.from_edges(np.array([], dtype=np.int64), np.array([], dtype=np.int64), n=0, renumber=False)
    assert pagerank(empty).shape == (0,)


def test_string_labels_and_networkx_parity():
    g = graphs.toy.labeled()
    ref = nx.pagerank(to_networkx(g), personalization={"a": 1, "e": 3})
    np.testing.assert_allclose(pagerank(g, personalization={"a": 1, "e": 3}), as_vector(g, ref), atol=1e-12)


def test_loose_tolerance_on_large_graphs_warns():
    g = graphs.erdos_renyi(1_200_000, m=2_400_000, seed=1)
    with pytest.warns(UserWarning, match="L1 change < n \\* tol"):
        loose = pagerank(g)  # n * tol = 1.2: NetworkX's rule
    tight = pagerank(g, tol=1e-6 / g.n)
    assert np.abs(loose - tight).sum() > 1e-4  # the loose answer is measurably off
    assert np.abs(tight - pagerank(g, tol=1e-7 / g.n)).sum() < 2e-6
