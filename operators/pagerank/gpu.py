"""PageRank on the GPU: the power-iteration driver, and the edge-centric push kernels.

One iteration is one launch (pull, see ``_pagerank_pull``) or two (push: scatter, then finish; binned:
fill, then sum, see ``_pagerank_binned_gpu``).
The iteration's vectors (in its dtype and over the ids it iterates) are made in one pass,
``gj_pagerank_start``. Iterations are launched in batches; a kernel whose predecessor converged does
nothing, so the host reads the errors once per batch and the converged vector stays in its buffer.
"""

from __future__ import annotations

import math

import numpy as np

from graphs._device import import_cupy
from operators._gpu.device import sm_count
from operators._gpu.launch import launch_config
from operators._gpu.registry import Kernel
from operators.pagerank.kernels import COMMON_CUDA, variant
from operators.pagerank.order import back
from operators.pagerank.pull import fill_isolated, persistent_pull

THREADS = 256  # push kernels

PUSH_KERNEL = r"""
extern "C" __global__ void __launch_bounds__(THREADS) gj_pagerank_push(const IDX* __restrict__ rows,
        const IDX* __restrict__ indices, const float* __restrict__ w, const VAL* __restrict__ c_old,
        VAL* __restrict__ acc, long long m, const double* __restrict__ acc_in, double threshold) {
    GJ_SKIP_IF_CONVERGED();
    const long long stride = (long long)gridDim.x * THREADS;
    for (long long e = (long long)blockIdx.x * THREADS + threadIdx.x; e < m; e += stride) {
#if WEIGHTED
        const VAL val = c_old[rows[e]] * (VAL)w[e];
#else
        const VAL val = c_old[rows[e]];
#endif
        if (val != (VAL)0) atomicAdd(&acc[__ldcs(&indices[e])], val);
    }
}
extern "C" __global__ void __launch_bounds__(THREADS) gj_pagerank_push_finish(VAL* __restrict__ acc, int n,
        GJ_VERTEX_ARGS) {
    GJ_SKIP_IF_CONVERGED();
    __shared__ double sh[32];
    double err = 0.0, dang = 0.0;
    const double dsum = acc_in[1];
    for (int v = blockIdx.x * THREADS + threadIdx.x; v < n; v += gridDim.x * THREADS) {
        const double s = (double)acc[v];
        acc[v] = (VAL)0;
        GJ_FINISH(v, s);
    }
    GJ_REDUCE_OUT();
}
"""


PUSH = Kernel(
    COMMON_CUDA + PUSH_KERNEL,
    ("gj_pagerank_push", "gj_pagerank_push_finish"),
    variants=tuple(
        variant(dtype, weighted, idx, THREADS)
        for dtype in (np.float32, np.float64)
        for weighted in (False, True)
        for idx in (np.int32, np.int64)
    ),
    label="pagerank-push",
)

START_KERNEL = r"""
// An iteration's start in one pass over the iterated ids i (G's id j = perm[i], or i): inv[i], x[i] (1/n
// where no x_in), c[i] = x[i] * inv[i], p[i] and dw[i] where given, in VAL. inv_in is over G's ids; x_in,
// p_in and dw_in too, unless `ordered` (then over the iterated ids already). Each block's sum of x over
// dangling vertices (inv 0) goes to part[blockIdx.x], so that the whole sum is taken in a fixed order.
extern "C" __global__ void __launch_bounds__(THREADS) gj_pagerank_start(const double* __restrict__ inv_in,
        const double* __restrict__ x_in, const double* __restrict__ p_in, const double* __restrict__ dw_in,
        const long long* __restrict__ perm, long long n, int has_x, int has_p, int has_dw, int has_perm,
        int ordered,
        VAL* __restrict__ inv, VAL* __restrict__ x, VAL* __restrict__ c, VAL* __restrict__ p,
        VAL* __restrict__ dw, double* __restrict__ part) {
    __shared__ double sh[THREADS / 32];
    const VAL uniform = (VAL)(1.0 / (double)n);
    const long long stride = (long long)gridDim.x * THREADS;
    double dang = 0.0;
    for (long long i = blockIdx.x * (long long)THREADS + threadIdx.x; i < n; i += stride) {
        const long long j = has_perm ? perm[i] : i, k = ordered ? i : j;
        const VAL w = (VAL)inv_in[j];
        const VAL xv = has_x ? (VAL)x_in[k] : uniform;
        inv[i] = w;
        x[i] = xv;
        c[i] = xv * w;
        if (has_p) p[i] = (VAL)p_in[k];
        if (has_dw) dw[i] = (VAL)dw_in[k];
        if (w == (VAL)0) dang += (double)xv;
    }
    for (int o = 16; o > 0; o >>= 1) dang += __shfl_down_sync(0xffffffffu, dang, o);
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = dang;
    __syncthreads();
    if (threadIdx.x == 0) {
        double total = 0.0;
        for (int k = 0; k < THREADS / 32; ++k) total += sh[k];
        part[blockIdx.x] = total;
    }
}
"""

START = Kernel(
    START_KERNEL,
    ("gj_pagerank_start",),
    defines={"THREADS": THREADS},
    variants=({"VAL": "float"}, {"VAL": "double"}),
    label="pagerank-start",
)


def pagerank_gpu(
    G, *, method, alpha, x0, p, dw, inv_out, weighted, max_iter, threshold, dtype, ordered=False
):
    """Run the power iteration on the GPU; returns ``(x, iterations, last_error, timings)``.

    ``ordered``: ``x0``, ``p`` and ``dw`` are given over the ids the method iterates
    (``iterated_order(G, method)``: the binned layout's renumbering, or ``G``'s own) and ``x`` is
    returned over them, so that a caller running several phases permutes once."""
    cp = import_cupy()
    n = G.n
    dtype = np.dtype(dtype)
    start = cp.cuda.Event()
    start.record()
    dummy = cp.zeros(1, dtype=dtype)
    isolated = None
    perm = None
    if method == "binned":
        from operators.pagerank.binned.gpu import binned_step

        step, perm = binned_step(G, weighted, dtype)
    elif method == "pull":
        uniform = x0 is None and p is None and dw is None
        kernel, grid, block, smem, head, plan_args, sizes, isolated = persistent_pull(
            G, weighted, dtype, dummy, uniform
        )
    else:
        defines = variant(dtype, weighted, G.indices.dtype, THREADS)
        scatter = PUSH.get("gj_pagerank_push", **defines)
        finish = PUSH.get("gj_pagerank_push_finish", **defines)
        rows, _, _ = G.edges()
        w = G.weights if weighted else dummy.astype(cp.float32)
        accv = cp.zeros(n, dtype=dtype)
        egrid, _ = launch_config(G.m, THREADS, max_blocks=sm_count() * 32)
        vgrid, _ = launch_config(n, THREADS, max_blocks=sm_count() * 16)
    # per iteration: L1 change, dangling mass, isolated value
    acc = cp.zeros((max_iter + 1, 3), dtype=cp.float64)
    inv, x_old, c_old, pv, dwv = start_vectors(inv_out, x0, p, dw, perm, ordered, dtype, acc[0])
    x_new, c_new = cp.empty(n, dtype=dtype), cp.empty(n, dtype=dtype)
    has_p, has_dw = pv is not None, dwv is not None
    pv, dwv = (pv if has_p else dummy), (dwv if has_dw else dummy)
    tail = (np.int32(has_p), np.int32(has_dw))
    thr = np.float64(threshold)
    scal = (np.float64(alpha), np.float64(1.0 / n))
    if ordered:
        perm = None  # the caller's order: nothing to map back
    acc[0, 0] = math.inf  # "error before the first iteration": never converged
    bufs_x, bufs_c = (x_old, x_new), (c_old, c_new)
    loop = cp.cuda.Event()
    loop.record()
    it, batch = 0, 1
    while it < max_iter:
        stop = min(max_iter, it + batch)
        for k in range(it, stop):  # iteration k reads buffer k % 2 and writes the other one
            xo, xn, co, cn = bufs_x[k % 2], bufs_x[1 - k % 2], bufs_c[k % 2], bufs_c[1 - k % 2]
            vargs = (xo, xn, cn, inv, pv, dwv, *tail, acc[k], acc[k + 1], thr, *scal)
            if method == "binned":
                step(co, vargs)
            elif method == "pull":
                args = (*head, co, *plan_args, *sizes, *vargs)
                kernel(grid, block, args, shared_mem=smem)
            else:
                scatter(egrid, (THREADS,), (rows, G.indices, w, co, accv, np.int64(G.m), acc[k], thr))
                finish(vgrid, (THREADS,), (accv, np.int32(n), *vargs))
        errs = acc[it + 1 : stop + 1, 0].get()  # one synchronisation per batch
        done = np.flatnonzero(errs < threshold)
        if done.size:
            k = it + int(done[0])  # the first converged iteration; later launches were no-ops
            x = fill_isolated(bufs_x[1 - k % 2], isolated, acc[k + 1, 2])
            return _ids(x, perm), k + 1, float(errs[done[0]]), _timings(start, loop, stop)
        it, batch = stop, min(2 * batch, 16)
    x = fill_isolated(bufs_x[max_iter % 2], isolated, acc[max_iter, 2])
    return _ids(x, perm), max_iter, float(errs[-1]), _timings(start, loop, max_iter)


def iterated_order(G, method: str):
    """The ids ``method`` iterates over: ``perm`` (iterated id i is ``G``'s ``perm[i]``), None for ``G``'s."""
    if method != "binned":
        return None
    from operators.pagerank.binned import binned_order

    return binned_order(G)


def start_vectors(inv_out, x0, p, dw, perm, ordered, dtype, acc0):
    """``(inv, x, c, p, dw)`` over the iterated ids (``G``'s ``perm[i]`` at i; ``perm`` None: the same
    ids) in ``dtype``, in one pass (``gj_pagerank_start``): ``x`` is ``x0`` (1/n where None), ``c`` is
    ``x * inv``; ``p`` and ``dw`` are None where not given, one array where they are one. ``inv_out`` is
    over ``G``'s ids; ``x0``, ``p`` and ``dw`` too, unless ``ordered`` (over the iterated ids already).
    Writes the dangling mass of ``x`` (summed in a fixed order) and ``x[0]`` into ``acc0[1]`` and
    ``acc0[2]``."""
    cp = import_cupy()
    n = len(inv_out)
    f64 = lambda v: None if v is None else cp.asarray(v, dtype=cp.float64)  # noqa: E731
    inv_in, x_in, p_in = f64(inv_out), f64(x0), f64(p)
    dw_in = p_in if dw is p else f64(dw)
    out = {k: cp.empty(n, dtype=dtype) for k in ("inv", "x", "c")}
    out["p"] = None if p_in is None else cp.empty(n, dtype=dtype)
    out["dw"] = out["p"] if dw is p else (None if dw_in is None else cp.empty(n, dtype=dtype))
    grid, _ = launch_config(n, THREADS, max_blocks=sm_count() * 8)
    part = cp.empty(grid[0], dtype=cp.float64)
    none64, none = cp.zeros(1, dtype=cp.float64), cp.zeros(1, dtype=dtype)
    kernel = START.get("gj_pagerank_start", VAL="float" if dtype == np.float32 else "double")
    args = (
        inv_in,
        none64 if x_in is None else x_in,
        none64 if p_in is None else p_in,
        none64 if dw_in is None or dw is p else dw_in,
        cp.zeros(1, dtype=cp.int64) if perm is None else perm,
        np.int64(n),
        np.int32(x_in is not None),
        np.int32(p_in is not None),
        np.int32(dw_in is not None and dw is not p),
        np.int32(perm is not None),
        np.int32(bool(ordered)),
        *(none if out[k] is None else out[k] for k in ("inv", "x", "c", "p", "dw")),
        part,
    )
    if n:
        kernel(grid, (THREADS,), args)
        acc0[1] = part.sum()
        acc0[2] = out["x"][0]
    return out["inv"], out["x"], out["c"], out["p"], out["dw"]


def _ids(x, perm):
    """``x`` over ``G``'s ids (the binned iteration may run over renumbered ones)."""
    return x if perm is None else back(x, perm)


def _timings(start, loop, launched: int) -> dict:
    """Seconds of set-up and of the iteration loop, from CUDA events (the loop has synchronised)."""
    cp = import_cupy()
    end = cp.cuda.Event()
    end.record()
    end.synchronize()
    return {
        "setup_s": cp.cuda.get_elapsed_time(start, loop) / 1e3,
        "loop_s": cp.cuda.get_elapsed_time(loop, end) / 1e3,
        "launched": launched,
    }
