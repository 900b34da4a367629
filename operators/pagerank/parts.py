"""One worker's share of partitioned PageRank: the pull iteration over its destination range.

The math is ``pagerank``'s: ``x_v <- alpha * (sum_{u->v} c_u + dsum * dw_v) + (1 - alpha) * p_v`` with
``c_u = x_u / outweight_u`` and ``dsum`` the rank held by dangling vertices. A worker owns the rows of
``lo <= v < hi``; it needs the whole vector ``c`` (gathered after every iteration) and returns its slice
of ``x`` with its shares of the L1 change and of the dangling mass (summed over the workers).
CPU: one Numba step per call (the caller exchanges ``c`` through Dask). GPU: the whole loop on the
worker, with the persistent pull kernel of ``_pagerank_pull`` or the binned passes of
``_pagerank_binned_gpu`` (a layout of the part's in-edges over its own rows, kept with the part), and
collectives through ``comm``.
"""

from __future__ import annotations

import math
import time

import numba as nb
import numpy as np

from graphs._device import import_cupy, to_device
from graphs.errors import OptionError
from operators._gpu.memory import pagerank_estimate


def pagerank_bytes(n: int, m: int, *, weighted: bool, parts: int = 1, device: str = "gpu") -> int:
    """Estimated working set of pull PageRank on one device: the graph and its transpose (whole), or one
    part with a row pointer over all vertices; the value vectors, inverse out-weights and the plan. On
    one GPU: ``operators._gpu.memory.pagerank_estimate``, the builds of the transpose and layout included."""
    if parts <= 1 and device == "gpu":
        return pagerank_estimate(n, m, weighted=weighted).bytes
    edge = 8 if weighted else 4
    value = 4 if device == "gpu" else 8
    vectors = n * (4 * value + 8 + 8)
    if parts <= 1:
        return 2 * (8 * (n + 1) + edge * m) + vectors
    return 8 * (n + 1) + edge * -(-m // parts) + vectors + 8 * n


def reciprocal(outw, xp=np):
    """``1 / outw`` in float64, 0 where ``outw`` is 0 (dangling vertices)."""
    outw = xp.asarray(outw, dtype=np.float64)
    return xp.where(outw > 0, 1.0 / xp.maximum(outw, np.finfo(np.float64).tiny), 0.0)


def inverse_out(part, weighted: bool, xp=np):
    """``1 / out-weight`` of every vertex of a part's graph, 0 where dangling (NumPy or CuPy by ``xp``)."""
    return reciprocal(part.out_weight if weighted else part.out_degree, xp)


@nb.njit(parallel=True, cache=True)
def pull_rows_cpu(indptr, indices, w, weighted, lo, c, inv_out, x_old, p, dw, dsum, alpha):
    """One pull iteration over rows ``lo .. lo+rows-1`` (``x_old``, ``p``, ``dw`` over those rows;
    ``c`` and ``inv_out`` over all vertices): new values and contributions, L1 change, dangling mass."""
    y = np.empty(indptr.size - 1)
    for i in nb.prange(y.size):
        s = 0.0
        for e in range(indptr[i], indptr[i + 1]):
            s += c[indices[e]] * w[e] if weighted else c[indices[e]]
        y[i] = s
    return finish_rows_cpu(y, lo, inv_out, x_old, p, dw, dsum, alpha)


@nb.njit(parallel=True, cache=True)
def finish_rows_cpu(y, lo, inv_out, x_old, p, dw, dsum, alpha):
    """``pull_rows_cpu``'s result from the rows' sums ``y`` of ``c`` over their in-edges."""
    rows = y.size
    x = np.empty(rows)
    c_new = np.empty(rows)
    err = 0.0
    dang = 0.0
    for i in nb.prange(rows):
        val = alpha * (y[i] + dsum * dw[i]) + (1.0 - alpha) * p[i]
        err += abs(val - x_old[i])
        x[i] = val
        c_new[i] = val * inv_out[lo + i]
        if inv_out[lo + i] == 0.0:
            dang += val
    return x, c_new, err, dang


def _kept(part, key: str, make):
    """``make(part)``, kept with the part for later calls on this worker."""
    return part.derived(key, make)


def part_layout(part, indptr, indices, weights, dtype) -> dict:
    """The binned layout of a part's in-edges (``indptr``, ``indices``, ``weights`` on the device that
    computes): sources over all ``n`` vertices, destinations its own rows; kept with the part."""
    from operators.pagerank.binned import TUNING, binned_layout

    bits = TUNING[np.dtype(dtype).itemsize]
    where = "cpu" if isinstance(indices, np.ndarray) else "gpu"
    key = f"_binned_{weights is not None}_{bits['chunk_bits']}_{bits['bin_bits']}_{where}"
    return _kept(
        part, key, lambda pt: binned_layout(indptr, indices, weights, pt.n, rows=pt.hi - pt.lo, **bits)
    )


def step_cpu(part, c, x_old, p, dw, dsum: float, *, alpha: float, weighted: bool, method: str = "pull"):
    """One iteration on a host part: ``(x, c, err, dangling)`` of its range from the full ``c``, by
    ``method`` 'pull' (its in-edges row by row) or 'binned' (``_pagerank_binned``'s passes)."""
    inv = _kept(part, f"_inv_{bool(weighted)}", lambda pt: inverse_out(pt, weighted))
    w = part.weights if weighted else np.empty(0, dtype=np.float32)
    if method == "binned":
        from operators.pagerank.binned import binned_sums_cpu

        lay = part_layout(
            part, np.asarray(part.indptr), np.asarray(part.indices), w if weighted else None, np.float64
        )
        y = binned_sums_cpu(lay, c, weighted)
        return finish_rows_cpu(y, part.lo, inv, x_old, p, dw, float(dsum), float(alpha))
    return pull_rows_cpu(
        np.asarray(part.indptr),
        np.asarray(part.indices),
        np.asarray(w),
        weighted,
        part.lo,
        c,
        inv,
        x_old,
        p,
        dw,
        float(dsum),
        float(alpha),
    )


def loop_gpu(
    part,
    comm,
    bounds,
    *,
    alpha,
    x0,
    p,
    dw,
    weighted,
    max_iter,
    threshold,
    dtype,
    exchange="halo",
    method="auto",
):
    """The power iteration of one rank: its slice of x (host float64), iterations, last L1 change and
    timings (``loop_s``; ``comm_s``, the share spent in collectives, from per-iteration CUDA events;
    ``method``, the one it ran).

    ``x0``, ``p`` and ``dw`` are full host vectors or None (uniform); ``comm`` all-reduces a float64
    array and exchanges ``x / outweight`` on the current stream: 'halo' (the default) sends each rank
    only the entries its in-edges read (lists swapped once at set-up; on R-MAT about half of the other
    ranges, so less traffic than 'broadcast'); 'broadcast' all-gathers every range
    (a broadcast per rank); 'allgather' does it by one all-gather of equal, padded slots. ``method``:
    'pull', 'binned', or 'auto' (``pagerank``'s rule for the whole graph, applied to the part's edges;
    pull when the layout does not fit after all).
    """
    cp = import_cupy()
    n, lo = part.n, part.lo
    dtype = np.dtype(dtype)
    if exchange not in ("halo", "broadcast", "allgather"):
        raise OptionError(f"exchange must be 'halo', 'broadcast' or 'allgather', got {exchange!r}")
    indices = to_device(part.indices, "gpu")  # no pinned copy of a large part on the host
    w = to_device(part.weights, "gpu") if weighted else None
    inv = inverse_out(part, weighted, cp).astype(dtype)
    dummy = cp.zeros(1, dtype=dtype)
    launch, chosen = None, method == "auto"
    method = _part_method(part, method, dtype, weighted)
    if method == "binned":
        from operators.pagerank.binned.gpu import check_fits, layout_step

        check_fits(n, dtype)
        try:
            launch = layout_step(
                part_layout(part, cp.asarray(part.indptr), indices, w, dtype), weighted, dtype, lo
            )
        except MemoryError:
            if not chosen:
                raise
            cp.get_default_memory_pool().free_all_blocks()
            method = "pull"
    halo = comm.halo_plan(cp.unique(indices).astype(cp.int64), bounds) if exchange == "halo" else None
    if launch is None:
        launch = _pull_launch(part, indices, w, weighted, dtype, dummy)
    del indices, w  # binned: the layout holds what it needs (4-8 bytes an edge less while it runs)
    vec = {k: None if a is None else cp.asarray(a, dtype=dtype) for k, a in (("p", p), ("dw", dw))}
    pv, dwv = (vec[k] if vec[k] is not None else dummy for k in ("p", "dw"))
    flags = (np.int32(vec["p"] is not None), np.int32(vec["dw"] is not None))
    x_old = cp.full(n, 1.0 / n, dtype=dtype) if x0 is None else cp.asarray(x0, dtype=dtype)
    x_new = cp.empty(n, dtype=dtype)
    c_old, c_new = x_old * inv, cp.empty(n, dtype=dtype)
    acc = cp.zeros((max_iter + 1, 3), dtype=cp.float64)
    acc[0, 0] = math.inf
    acc[0, 1] = cp.where(inv == 0, x_old.astype(cp.float64), 0.0).sum()
    scal = (np.float64(threshold), np.float64(alpha), np.float64(1.0 / n))
    events = [cp.cuda.Event() for _ in range(2 * max_iter + 2)]
    bx, bc = (x_old, x_new), (c_old, c_new)
    comm.barrier()
    t0 = time.perf_counter()
    events[0].record()
    it, batch, done = 0, 1, None
    while it < max_iter and done is None:
        stop = min(max_iter, it + batch)
        for k in range(it, stop):
            xo, xn, co, cn = bx[k % 2], bx[1 - k % 2], bc[k % 2], bc[1 - k % 2]
            vargs = (xo, xn, cn, inv, pv, dwv, *flags, acc[k], acc[k + 1], *scal)
            launch(co, vargs)
            events[2 * k + 1].record()
            comm.allreduce(acc[k + 1, :2])
            if halo is not None:
                comm.halo(cn, halo)
            else:
                comm.allgather(cn, bounds, padded=exchange == "allgather")
            events[2 * k + 2].record()
        errs = acc[it + 1 : stop + 1, 0].get()  # one synchronisation per batch
        hit = np.flatnonzero(errs < threshold)
        done = it + int(hit[0]) if hit.size else None
        it, batch = stop, min(2 * batch, 16)
    k = done if done is not None else max_iter - 1
    events[2 * it].synchronize()
    runs = k + 1  # iterations that computed (later launches in the batch were no-ops but still exchanged)
    comm_s = sum(cp.cuda.get_elapsed_time(events[2 * j + 1], events[2 * j + 2]) for j in range(runs)) / 1e3
    loop_s = cp.cuda.get_elapsed_time(events[0], events[2 * runs]) / 1e3
    x = bx[1 - k % 2][lo : part.hi].get().astype(np.float64)
    timings = {
        "loop_s": loop_s,
        "comm_s": comm_s,
        "wall_s": time.perf_counter() - t0,
        "launched": it,
        "method": method,
    }
    return x, runs, float(errs[hit[0]] if hit.size else errs[-1]), timings


def _pull_launch(part, indices, w, weighted, dtype, dummy):
    """``launch(c_old, vertex_args)``: one pull iteration over the part's rows (persistent kernel)."""
    from operators.pagerank.pull import pull_launch, pull_plan

    cp = import_cupy()
    n, lo, hi = part.n, part.lo, part.hi
    full = cp.empty(n + 1, dtype=cp.int64)  # row pointer by global id: empty rows outside [lo, hi)
    full[: lo + 1] = 0
    full[lo : hi + 1] = cp.asarray(part.indptr)
    full[hi + 1 :] = part.m
    plan = pull_plan(full, cp.asarray(part.out_degree), lo, hi)
    prefix = lambda h: int(part.out_degree[:h].sum())  # noqa: E731
    kernel, grid, block, smem, head, plan_args, sizes, _ = pull_launch(
        (full, indices, w), plan, n, int(part.out_degree.sum()), prefix, weighted, dtype, dummy, False
    )
    return lambda co, vargs: kernel(grid, block, (*head, co, *plan_args, *sizes, *vargs), shared_mem=smem)


def _part_method(part, method: str, dtype, weighted: bool) -> str:
    """'pull' or 'binned' for this rank: ``method`` itself, or for 'auto' the single-GPU rule
    (``_pagerank_binned_gpu.binned_pays``) on the whole graph's size and degrees and the part's edges."""
    if method != "auto":
        return method
    from operators.pagerank.binned import TUNING
    from operators.pagerank.binned.gpu import binned_pays

    deg = part.out_degree  # NumPy or CuPy, as the part was loaded
    total = int(deg.sum())
    hot = int(deg[: TUNING["hot_vertices"]].sum()) / total if total else 1.0
    return "binned" if binned_pays(part.n, part.m, hot, dtype, weighted) else "pull"
