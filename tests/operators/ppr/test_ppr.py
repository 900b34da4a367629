"""Exact PPR against NetworkX and a dense solve; accuracy metrics on hand-checked cases."""

from __future__ import annotations

import warnings

import networkx as nx
import numpy as np
import pytest

import graphs
from graphs._device import to_host
from operators import ConvergenceError, build_ppr_index, pagerank, ppr
from operators.ppr.metrics import ndcg_at_k, precision_at_k
from operators.ppr.reference import _ppr_reference
from tests.conftest import DEVICES, to_networkx


def _with_dangling():
    # 5 and 6 have no out-edges; 7 is unreachable from most sources
    src = [0, 0, 1, 2, 2, 3, 4, 4, 7, 1]
    dst = [1, 2, 3, 3, 5, 0, 6, 0, 0, 4]
    return graphs.from_edges(np.array(src), np.array(dst), n=8, renumber=False)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("alpha", [0.8, 0.5])
def test_ppr_matches_networkx_and_dense_solve(device, alpha):
    g = _with_dangling()
    sources = [0, 4, 5, 7]
    x = to_host(ppr(g.to(device), sources, alpha=alpha, tol=1e-13))
    nxg = to_networkx(g)
    for row, s in zip(x, sources, strict=True):
        want = nx.pagerank(nxg, alpha=alpha, personalization={s: 1}, tol=1e-15, max_iter=10_000)
        np.testing.assert_allclose(row, [want[v] for v in range(g.n)], atol=1e-10)
        np.testing.assert_allclose(row, _ppr_reference(g, s, alpha), atol=1e-11)
        assert row.sum() == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_power_counts_repeated_edges_as_networkx_multigraphs_do(device):
    # 0 -> 1 three times, 0 -> 2 once, a self-loop twice at 3, 4 dangling: a walk leaving 0 goes to 1
    # with probability 3/4 (NetworkX sums parallel edges); on the GPU a batch of two sums each repeated
    # edge's entry of the transposed CSR
    src, dst = [0, 0, 0, 0, 1, 2, 3, 3, 3, 1], [1, 2, 1, 1, 3, 0, 3, 3, 4, 0]
    g = graphs.from_edges(np.array(src), np.array(dst), n=5, renumber=False).to(device)
    x = to_host(ppr(g, [0, 3], method="power", tol=1e-13))
    m = nx.MultiDiGraph()
    m.add_nodes_from(range(5))
    m.add_edges_from(zip(src, dst, strict=True))
    for row, s in zip(x, [0, 3], strict=True):
        want = nx.pagerank(m, alpha=0.8, personalization={s: 1}, tol=1e-15, max_iter=10_000)
        np.testing.assert_allclose(row, [want[v] for v in range(5)], atol=1e-12)


def test_weighted_graphs_are_told_that_ppr_ignores_weights():
    """ppr and the top-k index follow out-edges uniformly: a weighted graph gets a warning that names
    pagerank(personalization=...), which follows the weights (and equals ppr on the same graph unweighted)."""
    src, dst, w = np.array([0, 0, 1, 2]), np.array([1, 2, 2, 0]), np.array([9.0, 1.0, 1.0, 1.0])
    weighted = graphs.from_edges(src, dst, weights=w, n=3, renumber=False)
    plain = graphs.from_edges(src, dst, n=3, renumber=False)
    with pytest.warns(UserWarning, match=r"ignores this graph's edge weights.*personalization"):
        x = ppr(weighted, [0], method="power", tol=1e-13)[0]
    with pytest.warns(UserWarning, match="the top-k PPR index follows out-edges uniformly"):
        build_ppr_index(weighted, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # none for a graph without weights
        np.testing.assert_allclose(x, ppr(plain, [0], method="power", tol=1e-13)[0], atol=1e-12)
    follows = pagerank(weighted, alpha=0.8, personalization={0: 1.0}, tol=1e-15, max_iter=1000)
    for rows, got in (
        ([[0, 0.9, 0.1], [0, 0, 1], [1, 0, 0]], follows),
        ([[0, 0.5, 0.5], [0, 0, 1], [1, 0, 0]], x),
    ):
        want = np.linalg.solve(np.eye(3) - 0.8 * np.array(rows).T, [0.2, 0, 0])  # pi = 0.2 e_0 + 0.8 P^T pi
        np.testing.assert_allclose(got, want, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_ppr_batches_and_labels(device):
    g = graphs.rmat(9, seed=3, device="cpu")
    r = graphs.reorder(g)  # labels differ from internal ids
    labels = [int(r.ids[5]), int(r.ids[77]), int(r.ids[300])]
    a = to_host(ppr(r.to(device), labels, block=2))
    b = to_host(ppr(g.to(device), labels))
    ids = r.ids.tolist()
    perm = [ids.index(v) for v in range(g.n)]
    if device == "gpu":  # the hybrid's synchronous iterates do not depend on the vertex order
        np.testing.assert_allclose(a[:, perm], b, atol=1e-10)
    else:  # powerpush sweeps in id order: both rows are within tol (1e-6) of the exact ones
        assert np.abs(a[:, perm] - b).sum(axis=1).max() <= 2e-6


def test_ppr_errors():
    g = _with_dangling()
    with pytest.raises(KeyError, match="not in the graph"):
        ppr(g, [0, 99])
    with pytest.raises(ConvergenceError):
        ppr(g, [0], max_iter=3)
    with pytest.raises(ValueError, match="alpha"):
        ppr(g, [0], alpha=1.0)


def test_metrics_on_hand_checked_rankings():
    exact = np.array([0.5, 0.2, 0.1, 0.1, 0.05, 0.05])
    assert precision_at_k(exact, [0, 1, 2], 3) == 1.0
    assert precision_at_k(exact, [0, 1, 3], 3) == 1.0  # 2 and 3 tie at the 3rd value
    assert precision_at_k(exact, [0, 4, 5], 3) == pytest.approx(1 / 3)
    assert ndcg_at_k(exact, [0, 1, 2], 3) == pytest.approx(1.0)
    swapped = ndcg_at_k(exact, [1, 0, 2], 3)
    g = lambda p: 2**p - 1  # noqa: E731
    want = (g(0.2) + g(0.5) / np.log2(3) + g(0.1) / 2) / (g(0.5) + g(0.2) / np.log2(3) + g(0.1) / 2)
    assert swapped == pytest.approx(want)
