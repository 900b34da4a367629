"""Exact personalized PageRank by batched power iteration: ground truth for the top-k queries.

PPR pi(s, t) is the probability that a walk from s, which at each step stops with probability
``1 - alpha`` or else moves to a uniform out-neighbour (jumping back to s from a vertex without
out-edges), stops at t: ``networkx.pagerank(G, alpha, personalization={s: 1})``.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from graphs import CSRGraph
from graphs._device import array_module

from ._checks import check_choice, check_count, check_graph, check_positive, check_probability
from .errors import ConvergenceError

METHODS = ("power",)


def ppr(
    G: CSRGraph,
    sources,
    *,
    alpha: float = 0.8,
    tol: float = 1e-10,
    max_iter: int = 1000,
    method: str = "power",
    block: int | None = None,
):
    """Exact personalized PageRank of a batch of sources, as dense rows.

    Power iteration on a block of sources at once (a sparse-times-dense product: Numba on the CPU,
    cuSPARSE SpMM on the GPU) until every row changes by less than ``tol`` in L1 norm. Edge weights
    are ignored: walks move to a uniform out-neighbour.

    Parameters
    ----------
    G : CSRGraph
        On the CPU or the GPU; the computation runs where the graph is.
    sources : label or sequence of labels
        Original vertex labels of the sources.
    alpha : float
        Probability of following an edge (0.8: the stop probability 0.2 of the PPR literature).
    tol : float
        L1 change per source at which the iteration stops.
    max_iter : int
        Iterations allowed before ``ConvergenceError``.
    method : {'power'}
        Only batched power iteration for now.
    block : int, optional
        Sources per SpMM block (default 32 on the CPU; on the GPU as many as fit 1/4 of free memory).

    Returns
    -------
    ndarray
        float64 array of shape (len(sources), n), on the graph's device; row i sums to 1.
    """
    G = check_graph(G)
    alpha = check_probability("alpha", alpha, closed_right=False)
    tol = check_positive("tol", tol)
    max_iter = check_count("max_iter", max_iter)
    check_choice("method", method, METHODS)
    src = G.internal_ids(np.atleast_1d(np.asarray(sources, dtype=object if G.has_labels else None)))
    xp = array_module(G.indptr)
    out = xp.zeros((len(src), G.n), dtype=np.float64)
    if len(src) == 0:
        return out
    gpu = G.device == "gpu"
    if block is None:
        block = _gpu_block(G.n) if gpu else 32
    block = check_count("block", block)
    run = _ppr_gpu if gpu else _ppr_cpu
    for lo in range(0, len(src), block):
        out[lo : lo + block] = run(G, src[lo : lo + block], alpha, tol, max_iter)
    return out


def _transition(G: CSRGraph):
    """In-neighbour CSR with entry 1/d_out(u) for edge u -> t, and the dangling mask (cached)."""

    def build(g):
        t = g.transpose()
        deg = g.out_degree()
        xp = array_module(deg)
        inv = xp.where(deg > 0, 1.0 / xp.maximum(deg, 1), 0.0)
        return t.indptr, t.indices, inv[t.indices].astype(np.float64), deg == 0

    return G.derived("ppr_transition", build)


@nb.njit(parallel=True, cache=True)
def _spmm_cpu(tptr, tind, tval, x, y, alpha):
    n, b = x.shape
    for t in nb.prange(n):
        acc = np.zeros(b)
        for e in range(tptr[t], tptr[t + 1]):
            u = tind[e]
            w = tval[e]
            for j in range(b):
                acc[j] += w * x[u, j]
        for j in range(b):
            y[t, j] = alpha * acc[j]


def _ppr_cpu(G, src, alpha, tol, max_iter):
    tptr, tind, tval, dangling = _transition(G)
    b = len(src)
    cols = np.arange(b)
    x = np.zeros((G.n, b))
    x[src, cols] = 1.0
    y = np.empty_like(x)
    for _ in range(max_iter):
        _spmm_cpu(tptr, tind, tval, x, y, alpha)
        y[src, cols] += alpha * x[dangling].sum(axis=0) + (1.0 - alpha)
        err = float(np.abs(y - x).sum(axis=0).max())
        x, y = y, x
        if err < tol:
            return x.T
    raise ConvergenceError("ppr", max_iter, err, tol)


def _gpu_block(n: int) -> int:
    import cupy as cp

    free = cp.cuda.Device().mem_info[0]
    return int(max(1, min(256, free // 4 // (3 * 8 * max(n, 1)))))


def _ppr_gpu(G, src, alpha, tol, max_iter):
    import cupy as cp
    import cupyx.scipy.sparse as csp

    def build(g):
        tptr, tind, tval, dangling = _transition(g)
        return csp.csr_matrix((tval, tind, tptr), shape=(g.n, g.n)), dangling

    pt, dangling = G.derived("ppr_cusparse", build)
    b = len(src)
    rows = cp.asarray(src)
    cols = cp.arange(b)
    x = cp.zeros((G.n, b), dtype=cp.float64)
    x[rows, cols] = 1.0
    err = cp.inf
    for it in range(1, max_iter + 1):
        y = alpha * (pt @ x)
        y[rows, cols] += alpha * x[dangling].sum(axis=0) + (1.0 - alpha)
        diff = cp.abs(y - x).sum(axis=0).max()
        x = y
        if it % 8 == 0 or it == max_iter:  # one host sync per 8 iterations
            err = float(diff)
            if err < tol:
                return x.T
    raise ConvergenceError("ppr", max_iter, err, tol)


def _ppr_reference(G: CSRGraph, s: int, alpha: float = 0.8) -> np.ndarray:
    """Slow and obvious: solve pi = (1 - alpha) e_s + alpha pi P_s densely (tests only, small n)."""
    n = G.n
    import scipy.sparse as sp

    g = G.to("cpu")
    A = sp.csr_matrix((np.ones(g.m), g.indices, g.indptr), shape=(n, n)).toarray()  # multi-edges add up
    P = np.zeros((n, n))
    for u in range(n):
        d = A[u].sum()
        if d > 0:
            P[u] = A[u] / d
        else:
            P[u, s] = 1.0
    e = np.zeros(n)
    e[s] = 1.0
    return np.linalg.solve((np.eye(n) - alpha * P).T, (1.0 - alpha) * e)
