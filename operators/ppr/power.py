"""Batched power iteration of personalized PageRank: Numba SpMM on the CPU (float64); on the GPU float32
sweeps, then float64 steps that certify each row (``operators.ppr.power_gpu``).

The iteration ``x <- alpha x P_s + (1 - alpha) e_s`` (P_s: the walk's transition matrix, rows without
out-edges sent to s) contracts L1 distances by ``alpha``, so after an iteration that changed a row by
``delta`` in L1 the row is within ``alpha / (1 - alpha) * delta`` of exact PPR. That is each row's
certified bound; a block stops when every row's is at most ``tol``.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from graphs import CSRGraph
from graphs._device import array_module
from operators._checks import check_count
from operators.errors import ConvergenceError
from operators.ppr.epochs import rounding

CPU_BLOCK = 32  # sources iterated together on the CPU unless ``block`` is given


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


def power_cpu(G, src, alpha, tol, max_iter, out):
    tptr, tind, tval, dangling = _transition(G)
    b = len(src)
    cols = np.arange(b)
    x = np.zeros((G.n, b))
    x[src, cols] = 1.0
    y = np.empty_like(x)
    gain = alpha / (1.0 - alpha)
    for it in range(1, max_iter + 1):
        _spmm_cpu(tptr, tind, tval, x, y, alpha)
        y[src, cols] += alpha * x[dangling].sum(axis=0) + (1.0 - alpha)
        bound = gain * np.abs(y - x).sum(axis=0) + rounding(it, np.float64, out)
        x, y = y, x
        if bound.max() <= tol:
            return x.T, bound
    raise ConvergenceError("ppr", max_iter, float(bound.max()), tol)


def power_steps(G, alpha, tol, block, max_iter, dtype=np.float64):
    """``ppr``'s step over blocks of sources by the batched power iteration (``block`` sources at once;
    on the GPU at most ``power_gpu.LANES``)."""
    gpu = G.device == "gpu"
    if max_iter is None:
        max_iter = math.ceil(math.log(tol * (1 - alpha) / 2) / math.log(alpha)) + 100 if alpha > 0 else 100
    if gpu:
        from operators.ppr.power_gpu import LANES, block_size, power_gpu

        block = min(block or block_size(G.n), LANES)
    block = check_count("block", block or CPU_BLOCK)

    def step(ids):
        ids = ids[:block]
        if gpu:
            x, bound, it = power_gpu(G, ids, alpha, tol, max_iter, dtype)
        else:
            (x, bound), it = power_cpu(G, ids, alpha, tol, max_iter, dtype), None
        stats = {"l1_bound": [float(b) for b in bound]}
        return x, len(ids), stats | ({"iterations": [it] * len(ids)} if it is not None else {})

    return step
