"""Batched power iteration of personalized PageRank: Numba SpMM on the CPU, cuSPARSE SpMM on the GPU.

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
from graphs._device import array_module, free_memory
from operators._checks import check_count
from operators._gpu.launch import launch_config
from operators._gpu.registry import Kernel
from operators.errors import ConvergenceError
from operators.ppr.epochs import rounding


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


def gpu_block(n: int) -> int:
    """Sources a GPU batch iterates together: three dense float64 blocks in a quarter of the free memory
    (``free_memory``: CuPy's unused pool included, ``$GRAPHJOBS_MEMORY_LIMIT`` applied)."""
    return int(max(1, min(256, free_memory("gpu") // 4 // (3 * 8 * max(n, 1)))))


MERGE_CUDA = r"""
// rows of the transposed graph (in-neighbour ids sorted within each row, repeated edges side by side):
// cnt[r] = distinct in-neighbours of r; then each distinct u of row r written once at nptr[r] + j with
// the value (its edges u -> r) / d_out(u). A thread a row: one pass at build time
#define GJ_ROWS for (long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x; r < n; \
                         r += (long long)gridDim.x * blockDim.x)
extern "C" __global__ void gj_ppr_row_distinct(const long long* ptr, const int* ind, long long n,
        long long* cnt) {
    GJ_ROWS {
        long long c = 0;
        for (long long e = ptr[r]; e < ptr[r + 1]; ++e) c += e == ptr[r] || ind[e] != ind[e - 1];
        cnt[r] = c;
    }
}
extern "C" __global__ void gj_ppr_row_merge(const long long* ptr, const int* ind, const long long* deg,
        long long n, const long long* nptr, int* cols, double* val) {
    GJ_ROWS {
        long long w = nptr[r];
        for (long long e = ptr[r], end = ptr[r + 1], k; e < end; e = k, ++w) {
            for (k = e + 1; k < end && ind[k] == ind[e]; ++k) {}
            cols[w] = ind[e];
            val[w] = (double)(k - e) / (double)deg[ind[e]];
        }
    }
}
"""


MERGE = Kernel(MERGE_CUDA, ("gj_ppr_row_distinct", "gj_ppr_row_merge"), label="ppr-power-merge")


def _cusparse_matrix(g):
    """The transition matrix over in-neighbours as a canonical cuSPARSE CSR (repeated edges summed), and
    the dangling mask. Built by two kernels into 12 bytes an entry: CuPy's own ``sum_duplicates``, which
    its product runs first on a matrix not known to be canonical, sorts a copy of every entry, which
    does not fit in device memory beside the largest graphs."""
    import cupy as cp
    import cupyx.scipy.sparse as csp

    t, deg = g.transpose(), g.out_degree()
    if t.indices.dtype != cp.int32:
        raise NotImplementedError("GPU power iteration supports graphs with fewer than 2**31 vertices")
    n, grid = np.int64(g.n), launch_config(g.n, 256, max_blocks=65535)
    cnt = cp.empty(g.n, dtype=cp.int64)
    MERGE.get("gj_ppr_row_distinct")(*grid, (t.indptr, t.indices, n, cnt))
    nptr = cp.zeros(g.n + 1, dtype=cp.int64)
    cp.cumsum(cnt, out=nptr[1:])
    del cnt
    nnz = int(nptr[-1])
    cols, val = cp.empty(nnz, dtype=cp.int32), cp.empty(nnz, dtype=cp.float64)
    MERGE.get("gj_ppr_row_merge")(*grid, (t.indptr, t.indices, deg, n, nptr, cols, val))
    pt = csp.csr_matrix((val, cols, nptr), shape=(g.n, g.n))
    pt.has_canonical_format = True  # rows sorted, each entry once: the product need not sort a copy
    return pt, deg == 0


def power_gpu(G, src, alpha, tol, max_iter, out):
    import cupy as cp

    pt, dangling = G.derived("ppr_cusparse", _cusparse_matrix)
    b = len(src)
    rows = cp.asarray(src)
    cols = cp.arange(b)
    x = cp.zeros((G.n, b), dtype=cp.float64)
    x[rows, cols] = 1.0
    err, gain = cp.inf, alpha / (1.0 - alpha)
    for it in range(1, max_iter + 1):
        y = alpha * (pt @ x)
        y[rows, cols] += alpha * x[dangling].sum(axis=0) + (1.0 - alpha)
        diff = cp.abs(y - x).sum(axis=0)
        x = y
        if it % 8 == 0 or it == max_iter:  # one host sync per 8 iterations
            bound = gain * diff.get() + rounding(it, np.float64, out)
            err = float(bound.max())
            if err <= tol:
                return x.T, bound
    raise ConvergenceError("ppr", max_iter, err, tol)


def power_steps(G, alpha, tol, block, max_iter, dtype=np.float64):
    """``ppr``'s step over blocks of sources by the batched power iteration (``block`` sources at once)."""
    gpu = G.device == "gpu"
    if max_iter is None:
        max_iter = math.ceil(math.log(tol * (1 - alpha) / 2) / math.log(alpha)) + 100 if alpha > 0 else 100
    if block is None:
        block = gpu_block(G.n) if gpu else 32
    block = check_count("block", block)
    run = power_gpu if gpu else power_cpu

    def step(ids):
        ids = ids[:block]
        x, bound = run(G, ids, alpha, tol, max_iter, dtype)
        return x, len(ids), {"l1_bound": [float(b) for b in bound]}

    return step
