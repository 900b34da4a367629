"""PageRank on the GPU: the power-iteration driver, and the edge-centric push kernels.

One iteration is one launch (pull, see ``_pagerank_pull``) or two (push: scatter, then finish; binned:
fill, then sum, see ``_pagerank_binned_gpu``).
Iterations are launched in batches; a kernel whose predecessor converged does nothing, so the host
reads the errors once per batch and the converged vector stays in its buffer.
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


def pagerank_gpu(G, *, method, alpha, x0, p, dw, inv_out, weighted, max_iter, threshold, dtype):
    """Run the power iteration on the GPU; returns ``(x, iterations, last_error)``."""
    cp = import_cupy()
    n = G.n
    dtype = np.dtype(dtype)
    start = cp.cuda.Event()
    start.record()
    vec = {k: (None if a is None else cp.asarray(a, dtype=dtype)) for k, a in (("p", p), ("dw", dw))}
    inv = cp.asarray(inv_out, dtype=dtype)
    dummy = cp.zeros(1, dtype=dtype)
    x_old = cp.full(n, 1.0 / n, dtype=dtype) if x0 is None else cp.asarray(x0, dtype=dtype)
    x_new = cp.empty(n, dtype=dtype)
    c_old, c_new = x_old * inv, cp.empty(n, dtype=dtype)
    acc = cp.zeros(
        (max_iter + 1, 3), dtype=cp.float64
    )  # per iteration: L1 change, dangling mass, isolated value
    acc[0, 1] = cp.where(inv == 0, x_old.astype(cp.float64), 0.0).sum()
    acc[0, 2] = float(x_old[0]) if n else 0.0
    has_p, has_dw = vec["p"] is not None, vec["dw"] is not None
    pv, dwv = (vec["p"] if has_p else dummy), (vec["dw"] if has_dw else dummy)
    tail = (np.int32(has_p), np.int32(has_dw))
    thr = np.float64(threshold)
    scal = (np.float64(alpha), np.float64(1.0 / n))
    isolated = None
    perm = None
    if method == "binned":
        from operators.pagerank.binned.gpu import binned_step

        step, perm = binned_step(G, weighted, dtype)
        if perm is not None:  # iterate over the layout's ids; the result comes back in G's
            inv, x_old, c_old = inv[perm], x_old[perm], c_old[perm]
            pv, dwv = (pv[perm] if has_p else pv), (dwv[perm] if has_dw else dwv)
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
