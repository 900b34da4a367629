"""Power iteration of personalized PageRank on the GPU, in mixed precision: float32 sweeps, then float64
steps that certify the row.

The iteration ``T(x) = alpha x P_s + (1 - alpha) e_s`` (P_s: the walk's transition matrix, rows
without out-edges sent to s) contracts L1 distances by ``alpha``, so for any ``x`` the row ``T(x)`` is
within ``alpha / (1 - alpha) * |T(x) - x|_1`` of exact PPR. Started from ``e_s``, the iterates approach
PPR much faster than ``alpha ** t`` where the graph mixes well (their error sums to zero and the walk
spreads it out), which is what makes power iteration the fast accurate method on large expanders.

Phase 1 iterates in float32 (half the bytes an edge) until the L1 change falls to ``tol``'s certifying
change, or stops falling (float32's rounding floor, about 1e-7). Phase 2 continues in float64 from
that iterate until ``alpha / (1 - alpha)`` times the change of a float64 step, plus the rounding
allowance (``epochs.rounding``), is at most ``tol``: the certified bound of each row is computed from
float64 steps only, so float32's rounding never enters it. One source: both phases are PageRank's
own GPU iteration (``pagerank_gpu``, binned or pull as ``auto_method`` picks) with personalization and
dangling vector ``e_s``. Several sources: an SpMM kernel over the transposed CSR with the rows of the
iterate held source-minor (a warp per vertex, a lane per source), so each in-edge costs one coalesced
read of all the block's values.
"""

from __future__ import annotations

import numpy as np

from graphs._device import free_memory, import_cupy
from operators._gpu.device import sm_count
from operators._gpu.launch import launch_config
from operators._gpu.registry import Kernel
from operators.errors import ConvergenceError
from operators.ppr.epochs import rounding

LANES = 32  # sources a batch iterates together: a warp's lanes
THREADS = 256
F32_FLOOR = 1e-6  # float32 steps stop once their L1 change is this small (float32 rounds at about 1e-7)
STALL_SPAN = 3  # ... or once it fell by less than alpha ** STALL_SPAN over that many steps: only rounding
# keeps a contraction by alpha from doing that
BYTES_PER_VERTEX_SOURCE = 3 * 4 + 3 * 8  # float32 and float64 iterates, next iterates, scaled copies


def block_size(n: int) -> int:
    """Sources one GPU batch iterates together: up to ``LANES``, whose float32 and float64 iterates fit
    in a quarter of the free memory (``free_memory``: ``$GRAPHJOBS_MEMORY_LIMIT`` applied)."""
    return int(max(1, min(LANES, free_memory("gpu") // 4 // (BYTES_PER_VERTEX_SOURCE * max(n, 1)))))


def power_gpu(G, src, alpha: float, tol: float, max_iter: int, out):
    """Rows of PPR of the sources ``src`` (at most ``LANES``), each within ``tol`` in L1, and each row's
    certified bound; ``ConvergenceError`` once ``max_iter`` steps (both phases) did not certify it."""
    if len(src) == 1:
        return _one_source(G, int(src[0]), alpha, tol, max_iter, out)
    return _batch(G, np.asarray(src, dtype=np.int64), alpha, tol, max_iter, out)


def _certifying_change(alpha: float, tol: float, steps: int, out) -> float:
    """The largest float64 L1 change of a step after which the row is within ``tol``."""
    return max(0.0, tol - rounding(steps, np.float64, out)) * (1.0 - alpha) / alpha if alpha > 0 else np.inf


def _f32_steps(alpha: float, change: float) -> int:
    """float32 steps after which exact arithmetic would have brought the L1 change (at most
    ``2 alpha ** t``) below ``change``: more only stall at float32's rounding."""
    return int(np.ceil(np.log(change / 2) / np.log(alpha))) + 1 if 0 < alpha < 1 else 1


def _one_source(G, s, alpha, tol, max_iter, out):
    from operators.pagerank import auto_method, inverse_out_weight
    from operators.pagerank.binned.gpu import binned_fits

    inv = inverse_out_weight(G, False)
    certify = _certifying_change(alpha, tol, max_iter, out)
    first = max(certify, F32_FLOOR)
    method = auto_method(G, np.float32, False)
    # each phase runs over the ids its method iterates (binned: its layout's renumbering), so the row is
    # permuted once, at the end; where binned runs out of memory, the phase pulls instead
    narrow = ["binned", "pull"] if method == "binned" else [method]
    steps = min(max_iter, _f32_steps(alpha, first))
    x, it32, _, order, e, ran = _phase(G, s, narrow, None, None, None, alpha, inv, steps, first, np.float32)
    # where float32 steps were binned, so are float64 ones (a second layout, kept with G), unless the
    # layout does not fit
    wide = ["binned", "pull"] if ran == "binned" and binned_fits(G.n, np.float64) else ["pull"]
    steps = max(1, max_iter - it32)
    x, it64, change, order, _, _ = _phase(G, s, wide, x, order, e, alpha, inv, steps, certify, np.float64)
    bound = alpha / (1.0 - alpha) * change + rounding(it64, np.float64, out)
    if not bound <= tol:
        raise ConvergenceError("ppr", it32 + it64, float(bound), tol)
    return _reorder(x, order, None)[None, :], np.array([bound]), it32 + it64


def _phase(G, s, methods, x, order, e, alpha, inv, max_iter, threshold, dtype):
    """PageRank's GPU iteration personalized to ``s`` in ``dtype`` by the first of ``methods`` that
    finds the memory (a ``MemoryError`` moves on to the next), from ``x`` over the ids of ``order`` (x
    None: from ``e_s``; ``e``: ``e_s`` over them, where made already). Returns the result over the ids
    its method iterates, its iterations, its last L1 change, those ids, ``e_s`` over them and the method."""
    cp = import_cupy()
    from operators.pagerank.gpu import iterated_order, pagerank_gpu

    for i, method in enumerate(methods):
        try:
            to = iterated_order(G, method)
            e = e if e is not None and to is order else _one_hot(G.n, s, to)
            x0 = e if x is None else _reorder(x, order, to).astype(cp.float64)
            y, it, change, _ = pagerank_gpu(
                G,
                method=method,
                alpha=alpha,
                x0=x0,
                p=e,
                dw=e,
                inv_out=inv,
                weighted=False,
                ordered=True,
                max_iter=max_iter,
                threshold=threshold,
                dtype=dtype,
            )
            return y, it, change, to, e, method
        except MemoryError:
            x0 = e = None  # freed before the next method's try
            if i + 1 == len(methods):
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _one_hot(n: int, s: int, order):
    """``e_s`` (float64) over the ids of ``order`` (iterated id i is ``G``'s ``order[i]``; None: ``G``'s)."""
    from operators.pagerank.order import into

    cp = import_cupy()
    e = cp.zeros(n, dtype=cp.float64)
    e[s] = 1.0
    return e if order is None else into(e, order)


def _reorder(x, order, to):
    """``x`` over the ids of ``order`` as a vector over those of ``to`` (None: ``G``'s own)."""
    if order is to:
        return x
    from operators.pagerank.order import back, into

    x = x if order is None else back(x, order)
    return x if to is None else into(x, to)


SPMM_CUDA = r"""
// One step of the batch: for each vertex t and source j,
//   x_new[t][j] = alpha * sum over in-edges u -> t of c[u][j],   c_new[t][j] = x_new[t][j] * inv[t],
// with c[u][j] = x[u][j] / d_out(u). The L1 change |x_new - x_old| of each source (its own vertex left
// out: gj_ppr_spmm_source adds it) and the mass on dangling vertices (inv 0) are summed per source.
// Rows are held source-minor (row t: b values), so an in-edge reads all the batch's values in one
// coalesced load: a warp per vertex, a lane per source. Vertices of more than LONG in-edges are split
// into pieces of LONG edges (gj_ppr_spmm_pieces adds each piece into sums[slot]) and finished by
// gj_ppr_spmm_long, so that no warp walks a hub's edges alone.
#define GJ_WARPS_PER_BLOCK (THREADS / 32)
struct gj_sums { double change, dangling; };

__device__ __forceinline__ double gj_edges(const int* __restrict__ tind, const VAL* __restrict__ c,
        long long e, long long hi, int b, int lane, bool on) {
    double acc = 0.0;
    for (; e + 4 <= hi; e += 4) {  // four loads in flight
        const int u0 = tind[e], u1 = tind[e + 1], u2 = tind[e + 2], u3 = tind[e + 3];
        if (on) {
            const VAL a0 = c[(long long)u0 * b + lane], a1 = c[(long long)u1 * b + lane];
            const VAL a2 = c[(long long)u2 * b + lane], a3 = c[(long long)u3 * b + lane];
            acc += ((double)a0 + (double)a1) + ((double)a2 + (double)a3);
        }
    }
    for (; e < hi; ++e) {
        const int u = tind[e];
        if (on) acc += (double)c[(long long)u * b + lane];
    }
    return acc;
}

__device__ __forceinline__ void gj_finish(long long t, double acc, const VAL* __restrict__ x_old,
        VAL* __restrict__ x_new, VAL* __restrict__ c_new, const double* __restrict__ inv, long long s,
        int b, int lane, double alpha, gj_sums& sums) {
    const long long k = t * b + lane;
    const double w = inv[t], old = (double)x_old[k];
    const VAL y = (VAL)(alpha * acc);
    x_new[k] = y;
    c_new[k] = (VAL)((double)y * w);
    if (t != s) sums.change += fabs((double)y - old);
    if (w == 0.0) sums.dangling += old;
}

__device__ __forceinline__ void gj_add_sums(const gj_sums& sums, int lane, bool on, double* change,
        double* dangling) {
    __shared__ double part[2][GJ_WARPS_PER_BLOCK][32];
    const int warp = threadIdx.x >> 5;
    part[0][warp][lane] = sums.change;
    part[1][warp][lane] = sums.dangling;
    __syncthreads();
    if (warp == 0 && on) {
        double a = 0.0, d = 0.0;
        for (int w = 0; w < GJ_WARPS_PER_BLOCK; ++w) { a += part[0][w][lane]; d += part[1][w][lane]; }
        atomicAdd(change + lane, a);
        atomicAdd(dangling + lane, d);
    }
}

extern "C" __global__ void __launch_bounds__(THREADS) gj_ppr_spmm(const long long* __restrict__ tptr,
        const int* __restrict__ tind, const VAL* __restrict__ c, const VAL* __restrict__ x_old,
        VAL* __restrict__ x_new, VAL* __restrict__ c_new, const double* __restrict__ inv,
        const long long* __restrict__ src, long long n, int b, double alpha, double* change,
        double* dangling) {
    const int lane = threadIdx.x & 31;
    const bool on = lane < b;
    const long long s = on ? src[lane] : -1;
    gj_sums sums = {0.0, 0.0};
    for (long long t = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5; t < n;
         t += ((long long)gridDim.x * blockDim.x) >> 5) {
        const long long lo = tptr[t], hi = tptr[t + 1];
        if (hi - lo > LONG) continue;  // gj_ppr_spmm_long's
        const double acc = gj_edges(tind, c, lo, hi, b, lane, on);
        if (on) gj_finish(t, acc, x_old, x_new, c_new, inv, s, b, lane, alpha, sums);
    }
    gj_add_sums(sums, lane, on, change, dangling);
}

// a warp per piece: LONG in-edges (or a row's last, fewer) of long row rows[slot[p]], added into sums
extern "C" __global__ void __launch_bounds__(THREADS) gj_ppr_spmm_pieces(const long long* __restrict__ tptr,
        const int* __restrict__ tind, const VAL* __restrict__ c, const long long* __restrict__ rows,
        const int* __restrict__ slot, const long long* __restrict__ start, long long pieces, int b,
        double* __restrict__ sums) {
    const int lane = threadIdx.x & 31;
    const bool on = lane < b;
    for (long long p = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5; p < pieces;
         p += ((long long)gridDim.x * blockDim.x) >> 5) {
        const int r = slot[p];
        const long long lo = start[p], hi = min(lo + LONG, tptr[rows[r] + 1]);
        const double acc = gj_edges(tind, c, lo, hi, b, lane, on);
        if (on) atomicAdd(sums + (long long)r * b + lane, acc);
    }
}

// a warp per long row: its summed pieces finished as gj_ppr_spmm finishes the others
extern "C" __global__ void __launch_bounds__(THREADS) gj_ppr_spmm_long(const long long* __restrict__ rows,
        long long count, const double* __restrict__ sums, const VAL* __restrict__ x_old,
        VAL* __restrict__ x_new, VAL* __restrict__ c_new, const double* __restrict__ inv,
        const long long* __restrict__ src, int b, double alpha, double* change, double* dangling) {
    const int lane = threadIdx.x & 31;
    const bool on = lane < b;
    const long long s = on ? src[lane] : -1;
    gj_sums acc = {0.0, 0.0};
    for (long long r = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5; r < count;
         r += ((long long)gridDim.x * blockDim.x) >> 5)
        if (on) gj_finish(rows[r], sums[r * b + lane], x_old, x_new, c_new, inv, s, b, lane, alpha, acc);
    gj_add_sums(acc, lane, on, change, dangling);
}

// Each source's own vertex: the dangling mass and the restart come back to it.
extern "C" __global__ void gj_ppr_spmm_source(const VAL* __restrict__ x_old, VAL* __restrict__ x_new,
        VAL* __restrict__ c_new, const double* __restrict__ inv, const long long* __restrict__ src, int b,
        double alpha, double* change, const double* dangling) {
    const int j = threadIdx.x;
    if (j >= b) return;
    const long long k = src[j] * b + j;
    const VAL v = (VAL)((double)x_new[k] + alpha * dangling[j] + (1.0 - alpha));
    x_new[k] = v;
    c_new[k] = (VAL)((double)v * inv[src[j]]);
    change[j] += fabs((double)v - (double)x_old[k]);
}

// x (float32) into float64, with c = x * inv
extern "C" __global__ void gj_ppr_spmm_widen(const float* __restrict__ x32, double* __restrict__ x,
        double* __restrict__ c, const double* __restrict__ inv, long long n, int b) {
    for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < n * b;
         k += (long long)gridDim.x * blockDim.x) {
        const double v = (double)x32[k];
        x[k] = v;
        c[k] = v * inv[k / b];
    }
}
"""

LONG = 256  # in-edges above which a vertex is summed in pieces of this many by several warps

SPMM = Kernel(
    SPMM_CUDA,
    ("gj_ppr_spmm", "gj_ppr_spmm_pieces", "gj_ppr_spmm_long", "gj_ppr_spmm_source", "gj_ppr_spmm_widen"),
    defines={"THREADS": THREADS, "LONG": LONG},
    variants=({"VAL": "float"}, {"VAL": "double"}),
    label="ppr-power-spmm",
)


def _long_rows(G):
    """The transposed CSR, its vertices of more than ``LONG`` in-edges and their pieces (the slot of
    each piece's row and its first edge), kept with ``G``."""

    def build(g):
        cp = import_cupy()
        t = g.transpose()
        deg = cp.diff(t.indptr)
        rows = cp.flatnonzero(deg > LONG).astype(cp.int64)
        count = (deg[rows] + LONG - 1) // LONG
        slot = cp.repeat(cp.arange(rows.size, dtype=cp.int32), count)
        first = cp.cumsum(count) - count  # each row's first piece
        start = t.indptr[rows][slot] + (cp.arange(slot.size, dtype=cp.int64) - first[slot]) * LONG
        return t, rows, slot, start

    return G.derived("ppr_spmm_long_rows", build)


def _batch(G, src, alpha, tol, max_iter, out):
    cp = import_cupy()
    from operators.pagerank import inverse_out_weight

    t, rows, slot, start = _long_rows(G)
    if t.indices.dtype != cp.int32:
        raise NotImplementedError("GPU power iteration supports graphs with fewer than 2**31 vertices")
    inv = inverse_out_weight(G, False)
    n, b = G.n, len(src)
    if b > LANES:
        raise ValueError(f"a GPU power batch takes at most {LANES} sources, not {b}")
    srcd = cp.asarray(src)
    cols = cp.arange(b)
    grid, block = launch_config(n * 32, THREADS, max_blocks=sm_count() * 32)
    pgrid, _ = launch_config(slot.size * 32, THREADS, max_blocks=sm_count() * 32)
    lgrid, _ = launch_config(rows.size * 32, THREADS, max_blocks=sm_count() * 32)
    certify = _certifying_change(alpha, tol, max_iter, out)
    first = max(certify, F32_FLOOR)

    def run(x, c, val, stop, steps):
        """Steps in ``val`` from ``x`` (with ``c``) until ``stop(changes, history)``; the last x, changes."""
        spmm, fix = SPMM.get("gj_ppr_spmm", VAL=val), SPMM.get("gj_ppr_spmm_source", VAL=val)
        pieces, finish = SPMM.get("gj_ppr_spmm_pieces", VAL=val), SPMM.get("gj_ppr_spmm_long", VAL=val)
        xn, cn = cp.empty_like(x), cp.empty_like(c)
        acc = cp.zeros((2, b), dtype=cp.float64)
        sums = cp.zeros((rows.size, b), dtype=cp.float64)
        history, it = [], 0
        while it < steps:
            acc[...] = 0.0
            b32, a64 = np.int32(b), np.float64(alpha)
            spmm(
                grid,
                block,
                (t.indptr, t.indices, c, x, xn, cn, inv, srcd, np.int64(n), b32, a64, acc[0], acc[1]),
            )
            if rows.size:
                sums[...] = 0.0
                pieces(
                    pgrid, block, (t.indptr, t.indices, c, rows, slot, start, np.int64(slot.size), b32, sums)
                )
                finish(
                    lgrid,
                    block,
                    (rows, np.int64(rows.size), sums, x, xn, cn, inv, srcd, b32, a64, acc[0], acc[1]),
                )
            fix((1,), (LANES,), (x, xn, cn, inv, srcd, b32, a64, acc[0], acc[1]))
            x, xn, c, cn = xn, x, cn, c
            it += 1
            history.append(acc[0].get())  # one synchronisation a step
            if stop(history):
                break
        return x, c, history, it

    x = cp.zeros((n, b), dtype=cp.float32)
    x[srcd, cols] = 1.0
    c = x * inv.astype(cp.float32)[:, None]

    def stalled(h):
        worst = float(h[-1].max())
        past = float(h[-1 - STALL_SPAN].max()) if len(h) > STALL_SPAN else np.inf
        return worst <= first or worst > alpha**STALL_SPAN * past

    x32, _, _, it32 = run(x, c, "float", stalled, min(max_iter, _f32_steps(alpha, first)))
    del x, c
    x64, c64 = cp.empty((n, b), dtype=cp.float64), cp.empty((n, b), dtype=cp.float64)
    wide = launch_config(n * b, THREADS, max_blocks=sm_count() * 32)
    SPMM.get("gj_ppr_spmm_widen", VAL="double")(*wide, (x32, x64, c64, inv, np.int64(n), np.int32(b)))
    del x32
    done = lambda h: float(h[-1].max()) <= certify  # noqa: E731
    x64, _, h64, it64 = run(x64, c64, "double", done, max(1, max_iter - it32))
    bound = alpha / (1.0 - alpha) * h64[-1] + rounding(it64, np.float64, out)
    if not float(bound.max()) <= tol:
        raise ConvergenceError("ppr", it32 + it64, float(bound.max()), tol)
    return cp.ascontiguousarray(x64.T), bound, it32 + it64
