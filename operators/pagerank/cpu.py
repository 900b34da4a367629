"""PageRank on the CPU (Numba, float64): the pull, push and binned iterations behind ``pagerank``."""

from __future__ import annotations

import numba as nb
import numpy as np

from operators.pagerank.parts import pull_rows_cpu


def pagerank_cpu(G, *, method, alpha, x0, p, dw, inv_out, weighted, max_iter, threshold):
    """``pagerank``'s iteration on the host by ``method``: ``(x, iterations, last L1 change)``."""
    n = G.n
    x0 = np.full(n, 1.0 / n) if x0 is None else x0
    p = np.full(n, 1.0 / n) if p is None else p
    dw = p if dw is None else dw
    if method == "binned":
        from operators.pagerank.binned import binned_cpu

        return binned_cpu(G, weighted, inv_out, x0.copy(), p, dw, alpha, max_iter, threshold)
    if method == "pull":
        T = G.transpose()
        w = T.weights if weighted else np.empty(0, dtype=np.float32)
        return _pull_cpu(
            T.indptr, T.indices, w, weighted, inv_out, x0.copy(), p, dw, alpha, max_iter, threshold
        )
    w = G.weights if weighted else np.empty(0, dtype=np.float32)
    # edge-range partitions, each with a private accumulator row (bounded to ~256 MB in all)
    parts = int(max(1, min(nb.get_num_threads(), (1 << 28) // (8 * n))))
    bounds = np.searchsorted(G.indptr, np.linspace(0, G.m, parts + 1)).astype(np.int64)
    bounds[-1] = n
    return _push_cpu(
        G.indptr, G.indices, w, weighted, inv_out, x0.copy(), p, dw, alpha, max_iter, threshold, bounds
    )


@nb.njit(parallel=True, cache=True)
def _dangling_mass(x, inv_out):
    total = 0.0
    for v in nb.prange(x.size):
        if inv_out[v] == 0.0:
            total += x[v]
    return total


@nb.njit(cache=True)
def _pull_cpu(indptr, indices, w, weighted, inv_out, x, p, dw, alpha, max_iter, threshold):
    c = x * inv_out
    dsum = _dangling_mass(x, inv_out)
    err = np.inf
    for it in range(max_iter):
        x, c, err, dsum = pull_rows_cpu(indptr, indices, w, weighted, 0, c, inv_out, x, p, dw, dsum, alpha)
        if err < threshold:
            return x, it + 1, err
    return x, max_iter, err


@nb.njit(parallel=True, cache=True)
def _push_cpu(indptr, indices, w, weighted, inv_out, x, p, dw, alpha, max_iter, threshold, bounds):
    n = x.size
    parts = bounds.size - 1
    acc = np.zeros((parts, n))
    x_next = np.empty(n)
    dsum = _dangling_mass(x, inv_out)
    err = np.inf
    for it in range(max_iter):
        for k in nb.prange(parts):
            row = acc[k]
            row[:] = 0.0
            for u in range(bounds[k], bounds[k + 1]):
                cu = x[u] * inv_out[u]
                if cu != 0.0:
                    for e in range(indptr[u], indptr[u + 1]):
                        row[indices[e]] += cu * w[e] if weighted else cu
        err = 0.0
        dnext = 0.0
        for v in nb.prange(n):
            s = 0.0
            for k in range(parts):
                s += acc[k, v]
            val = alpha * (s + dsum * dw[v]) + (1.0 - alpha) * p[v]
            err += abs(val - x[v])
            x_next[v] = val
            if inv_out[v] == 0.0:
                dnext += val
        x, x_next = x_next, x
        dsum = dnext
        if err < threshold:
            return x, it + 1, err
    return x, max_iter, err
