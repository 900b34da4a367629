"""Batched power iteration of personalized PageRank: Numba SpMM on the CPU, cuSPARSE SpMM on the GPU.

``tol`` is the L1 change of a row between iterations at which it stops.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from graphs import CSRGraph
from graphs._device import array_module

from ._checks import check_count
from .errors import ConvergenceError


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


def power_cpu(G, src, alpha, tol, max_iter):
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


def gpu_block(n: int) -> int:
    import cupy as cp

    free = cp.cuda.Device().mem_info[0]
    return int(max(1, min(256, free // 4 // (3 * 8 * max(n, 1)))))


def power_gpu(G, src, alpha, tol, max_iter):
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


def power_steps(G, alpha, tol, block, max_iter):
    """``ppr``'s step over blocks of sources by the batched power iteration (``block`` sources at once)."""
    gpu = G.device == "gpu"
    if max_iter is None:
        max_iter = math.ceil(math.log(tol / 2) / math.log(alpha)) + 100 if alpha > 0 else 100
    if block is None:
        block = gpu_block(G.n) if gpu else 32
    block = check_count("block", block)
    run = power_gpu if gpu else power_cpu

    def step(ids):
        ids = ids[:block]
        return run(G, ids, alpha, tol, max_iter), len(ids), {}

    return step
