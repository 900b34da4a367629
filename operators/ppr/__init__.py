"""Single-source personalized PageRank: PowerPush (CPU), forward push, lock-free forward pull, their
hybrid, power iteration and Monte Carlo, on the CPU (Numba) and the GPU (CuPy).

PPR pi(s, t) is the probability that a walk from s, which at each step stops with probability
``1 - alpha`` or else moves to a uniform out-neighbour (jumping back to s from a vertex without
out-edges), stops at t: ``networkx.pagerank(G, alpha, personalization={s: 1})``.
"""

from __future__ import annotations

import math
import threading
import time

import numpy as np

from graphs import CSRGraph
from graphs._build import count_ids
from graphs._device import array_module, to_host
from graphs._mix import stream_key
from graphs.errors import MemoryLimitError, OptionError
from operators._checks import check_graph, warn_if_weighted
from operators._cpu_threads import cpu_threads, for_each_on_threads, threads_taken
from operators._progress import compiling, report
from operators._ranked import padded_labels, ranked_frame, real_counts
from operators.errors import ConvergenceError
from operators.options import PPROptions
from operators.ppr import power as _ppr_power
from operators.ppr.cost import HYBRID, PULL, PUSH, CostModel, cost_model, fit_grid, light_degree, pull_static
from operators.ppr.epochs import MAX_EPOCHS, first_threshold, floor_threshold, next_threshold, rounding
from operators.ppr.powerpush_cpu import solver as powerpush_solver
from operators.ppr.top_rows import top_entries
from operators.topk.walks import walk_ends

MC_CHUNK = 1 << 24  # Monte Carlo walks drawn at once (their ends: 64-128 MiB)
MODES = {"push": PUSH, "pull": PULL, "hybrid": HYBRID}
CPU_SOLVE_BYTES = 49  # per vertex and CPU solve: reserves, residues, messages (float64), flags, two lists


def ppr(
    G: CSRGraph,
    sources,
    *,
    alpha: float = PPROptions.alpha,
    tol: float = PPROptions.tol,
    method: str = PPROptions.method,
    max_iter: int | None = PPROptions.max_iter,
    dtype=PPROptions.dtype,
    topk: int | None = PPROptions.topk,
    seed: int = PPROptions.seed,
    block: int | None = PPROptions.block,
    r_max: float | None = PPROptions.r_max,
    cost: CostModel | None = None,
    info: dict | None = None,
    options: PPROptions | None = None,
    as_frame: bool = False,
    progress=None,
):
    """Personalized PageRank of each source: dense rows, or the top entries of each.

    Parameters
    ----------
    G : CSRGraph, NetworkX graph, SciPy sparse matrix or pandas edge DataFrame
        The last three are converted with their labels first (``graphs.as_graph``).
        On the CPU or the GPU; the computation runs where the graph is. Edge weights are ignored
        (a UserWarning says so; ``pagerank(G, personalization={s: 1})`` follows them).
    sources : label or sequence of labels
        Original vertex labels of the sources.
    alpha : float
        Probability of following an edge (0.8: the stop probability 0.2 of the PPR literature).
    tol : float
        Bound on each row's L1 error against exact PPR (``info['l1_bound']`` certifies it).
        ``powerpush``, ``push``, ``pull``, ``hybrid``: epochs of decreasing residue thresholds
        (``operators.ppr.epochs``) run until the row's residue mass, which equals its L1 error, plus a
        rounding allowance is at most ``tol`` (``powerpush`` stops at the push that gets there).
        ``power``: until ``alpha / (1 - alpha)`` times the L1 change of an iteration (plus the
        allowance) is at most ``tol``. ``montecarlo``: ``ceil(1 / tol)`` walks per source, so each
        entry has a standard deviation of at most ``sqrt(pi(s, t) * tol)`` (no certified bound).
        float32 results cannot certify a ``tol`` below 1e-4 (an ``OptionError`` says so).
    method : {'auto', 'powerpush', 'hybrid', 'push', 'pull', 'power', 'montecarlo'}
        ``auto``: ``powerpush`` on the CPU, ``power`` on the GPU (``hybrid`` with ``r_max``). ``powerpush``
        (CPU only; Wu et al., SIGMOD 2021): sequential forward push that updates residues in place, from a
        FIFO queue while few vertices are active, then by sweeps over all vertices in id order (Gauss-Seidel),
        so a row depends on the vertex order within ``tol``; ``O((m + n) log(1 / tol))`` time per source, like
        power iteration, less where the source reaches few vertices, and ``O(n)`` memory
        (``operators.ppr.powerpush_cpu``). ``push``: synchronous forward push from the active vertices (atomic
        adds into a separate residue array). ``pull``: every vertex sums the messages of its active
        in-neighbours, no atomics. ``hybrid``: before each iteration the cost model ``Psi`` picks push or pull
        (on the CPU too, to mirror the GPU's decisions). ``power``: batched power iteration from ``e_s`` (on
        the GPU float32 steps, then float64 steps that certify the row: ``operators.ppr.power_gpu``).
        ``montecarlo``: walks.
    max_iter : int, optional
        Iterations allowed before ``ConvergenceError``; a ``powerpush`` iteration is a sweep or a
        queue pass of n pushes. PowerPush, push, pull and the hybrid always end, so the default is
        no limit; power iteration's default is the provable bound plus 100.
    dtype : {float64, float32}
        Result type (on the GPU also the type of the residues of push, pull and the hybrid; the CPU
        computes in float64 and casts).
    topk : int, optional
        Return only the ``topk`` largest entries of each row, on the host, ranked by value to 24
        significant bits (values that differ only below them, as batches may leave them, tie), ties
        by vertex id. Only positive entries are listed: a row with fewer than ``topk`` of them (a
        source that reaches fewer vertices) has them first, then slots of label -1 and value 0,
        never a vertex (``info['counts']``: each row's positive entries).
    seed : int
        Seed of the Monte Carlo walks.
    block : int, optional
        Sources solved together: the SpMM block of ``power`` (on the GPU at most 32, by default as
        many as fit in a quarter of the free memory); on the GPU also the rows of the residue
        matrix that ``push``, ``pull`` and the hybrid iterate at once (by default, within a quarter of
        the free GPU memory, up to 2**20 residues, so batches only on small graphs, where they pay;
        with ``r_max`` up to 128 sources, except ``pull``). Each iteration of such a batch runs one
        model for all its sources, and it ends when every source's row is within ``tol``. The CPU
        solves powerpush, push, pull and hybrid a source at a time, on
        ``numba.get_num_threads()`` threads at once (each solve then sweeps in its own thread; about
        49 bytes per vertex each, at most as many as a quarter of the free memory holds).
    r_max : float, optional
        ``powerpush``, ``push``, ``pull``, ``hybrid``: run the seed paper's algorithm exactly instead,
        one run until no vertex holds a residue above ``r_max * max(d_out, 1)``; ``tol`` is then not
        applied, and each row's L1 error (its residue mass, at most ``r_max * (m + n)``) is reported
        in ``info``.
    cost : CostModel, optional
        Weights and block layout of the hybrid's cost model; by default measured once per GPU
        model and cached on disk (the paper's 2.3 : 1.1 : 1 on the CPU); 8 blocks per SM, 4 where
        no iteration can read 2**22 edges (``_ppr_cost.fit_grid``). The GPU runs its grid.
    info : dict, optional
        Filled with per-source ``l1_bound`` (the certified bound of the row's L1 error: None for Monte
        Carlo), ``iterations``, ``models`` (one letter per iteration: ``P`` push, ``L`` pull;
        ``powerpush``: ``Q`` a queue pass, ``S`` a sweep),
        ``residual`` mass and ``seconds`` (on the GPU, iterations, models and seconds
        are those of the source's batch, seconds divided by its size), with ``topk`` the ``counts``
        of listed entries, and ``compile_seconds``: the first call on a graph with a method, dtype,
        ``topk`` and ``block`` first solves its first batch once untimed, so that the Numba functions
        and CUDA kernels are compiled before the sources' seconds start (0 on later calls).
    options : PPROptions, optional
        ``alpha``, ``tol``, ``method``, ``max_iter``, ``dtype``, ``topk``, ``seed`` and ``block`` in one
        checked object, used as it is; a keyword among them that differs from it raises ``OptionError``.
    as_frame : bool
        Return one pandas DataFrame instead, with original labels: columns ``source``, ``vertex`` and
        ``ppr``, a row per source and vertex; with ``topk``, ``source``, ``rank`` (from 1), ``vertex``
        and ``ppr``, each source's listed entries only (``TopkPPR.to_frame()``'s shape).
    progress : callable, optional
        ``progress(done, total, "sources")`` as sources are solved, and the first call's compilation
        announced (``operators._progress``).

    Returns
    -------
    ndarray or (ndarray, ndarray)
        A ``dtype`` array of shape (len(sources), n) on the graph's device; with ``topk``, the
        labels and the values of the top entries, two host arrays of shape (len(sources), topk).
        With ``as_frame``, the DataFrame (on the host).

    Examples
    --------
    >>> import graphjobs as gj
    >>> G = gj.from_edges([0, 0, 1, 2, 3], [1, 2, 2, 0, 2])
    >>> gj.ppr(G, [3], method="power", tol=1e-12).round(4).tolist()  # a dense row per source
    [[0.3019, 0.1208, 0.3774, 0.2]]
    """
    G = check_graph(G)
    warn_if_weighted(G, "ppr")
    o = PPROptions.resolve(
        options,
        alpha=alpha,
        tol=tol,
        method=method,
        max_iter=max_iter,
        dtype=dtype,
        topk=topk,
        seed=seed,
        block=block,
        r_max=r_max,
    )
    alpha, tol, method, max_iter, dtype, topk = o.alpha, o.tol, o.method, o.max_iter, o.dtype, o.topk
    seed, block = o.seed, o.block
    topk = None if topk is None else min(topk, G.n)
    src = G.internal_ids(np.atleast_1d(np.asarray(sources, dtype=object if G.has_labels else None)))
    if method == "auto":  # on the GPU power (the hybrid where r_max asks for the paper's threshold)
        method = ("hybrid" if o.r_max is not None else "power") if G.device == "gpu" else "powerpush"
    if method == "powerpush" and G.device == "gpu":
        raise OptionError("ppr: powerpush runs on the CPU; on the GPU use method='hybrid'")
    try:
        if method == "power":
            step = _ppr_power.power_steps(G, alpha, tol, block, max_iter, dtype)
        elif method == "montecarlo":
            walks = math.ceil(1.0 / tol)
            step = lambda ids: _montecarlo(G, ids, alpha, walks, seed)  # noqa: E731
        else:
            step = _push_steps(G, method, o, cost, len(src))
            if G.device == "cpu":  # several sources at once on threads
                with threads_taken(cpu_threads(G.n, CPU_SOLVE_BYTES, len(src))) as threads:
                    warm = (method, dtype, topk, block)
                    out = _collect(G, src, step, dtype, topk, info, threads, warm=warm, progress=progress)
                return _frame(G, src, out, topk) if as_frame else out
        out = _collect(G, src, step, dtype, topk, info, warm=(method, dtype, topk, block), progress=progress)
    except ConvergenceError as e:
        if max_iter is not None or e.advice is not None or o.r_max is not None:
            raise
        raise ConvergenceError(e.algorithm, e.iterations, e.error, e.threshold, ROUNDING_ADVICE) from None
    return _frame(G, src, out, topk) if as_frame else out


# why a solve with no max_iter stops short of tol: its finest threshold (or power iteration's provable
# count) is reached and only rounding keeps the certified bound above tol
ROUNDING_ADVICE = (
    "with no max_iter it stopped at its finest step, where the rounding of float64 sums (counted in the "
    "certified bound) keeps the bound above tol on this graph; use a larger tol (on soc-Epinions1, "
    "1e-12 is certified and 1e-14 is not)"
)


def _frame(G, src, out, topk):
    """``ppr``'s result as one DataFrame (``as_frame``): dense rows, or the top entries' real rows."""
    sources = G.ids[src]
    if not topk:  # a row per (source, vertex), source after source
        import pandas as pd

        rows = {"source": np.repeat(sources, G.n), "vertex": np.tile(G.ids, len(src))}
        return pd.DataFrame(rows | {"ppr": to_host(out).reshape(-1)})
    labels, values = out
    return ranked_frame(sources, labels, values, real_counts(values), "ppr")


def _collect(G, src, step, dtype, topk, info, threads=1, warm=None, progress=None):
    """Run ``step`` over blocks of sources; keep dense rows, or only the top entries of each. With
    ``threads`` > 1 (the CPU's push, pull and hybrid: a source a step), that many sources at once.
    The first call on ``G`` with the options ``warm`` runs the first step once untimed (``_warm_up``).
    ``progress(done, total, "sources")`` after each step (``operators._progress``)."""
    dense = None if topk else _dense_result(G, len(src), dtype)  # before any work: it may not fit
    parts = {}
    compile_seconds = _warm_up(G, src, step, dtype, topk, warm, progress)
    solved, lock = [0], threading.Lock()

    def solve(lo, **serial):
        t0 = time.perf_counter()
        block, hi, extra = step(src[lo:], **serial)
        took = (time.perf_counter() - t0) / (hi)
        if topk:
            block = _top_entries(G, block.astype(dtype, copy=False), topk)
        else:
            dense[lo : lo + hi] = block
        parts[lo] = (block if topk else None, hi, extra, took)
        if progress is not None:
            with lock:  # the threads' counts, in order
                solved[0] += hi
                report(progress, solved[0], len(src), "sources")
        return hi

    if threads > 1:
        for_each_on_threads(range(len(src)), [lambda lo: solve(lo, serial=True)] * threads)
    else:
        lo = 0
        while lo < len(src):
            lo += solve(lo)
    tops = []
    stats = {"iterations": [], "models": [], "residual": [], "l1_bound": [], "seconds": []}
    for lo in sorted(parts):
        top, hi, extra, took = parts[lo]
        if topk:
            tops.append(top)
        for key in ("iterations", "models", "residual", "l1_bound"):
            stats[key] += extra.get(key, [None] * hi)
        stats["seconds"] += [took] * hi
    if topk:
        stats["counts"] = [int(c) for r in tops for c in r[2]]
    stats["compile_seconds"] = compile_seconds
    if info is not None:
        info.update(stats)
    if not topk:
        return dense
    if not tops:
        return np.empty((0, topk), dtype=_label_dtype(G)), np.empty((0, topk), dtype=dtype)
    return np.concatenate([r[0] for r in tops]), np.concatenate([r[1] for r in tops])


def _dense_result(G, rows: int, dtype):
    """The (rows, n) result array, or a ``MemoryLimitError`` (a MemoryError) that says what to do instead."""
    xp = array_module(G.indptr)
    try:
        return xp.empty((rows, G.n), dtype=dtype)
    except MemoryError as err:  # CuPy's OutOfMemoryError is one too
        need = rows * G.n * np.dtype(dtype).itemsize / 2**30
        raise MemoryLimitError(
            f"ppr: the dense result of {rows} sources x {G.n:,} vertices ({need:,.1f} GiB "
            f"of {np.dtype(dtype).name}) does not fit on the {G.device}: pass topk= (top "
            f"entries only) or fewer sources per call"
        ) from err


def _label_dtype(G):
    return to_host(G.ids).dtype if G.has_labels else np.int64


def _warm_up(G, src, step, dtype, topk, key, progress=None) -> float:
    """Seconds of the first step (and top-entry selection) run once, untimed, when ``G`` has not run
    one with the options ``key`` yet: it compiles what the timed steps then run (announced to
    ``progress``); 0 otherwise."""
    seen = G.derived("ppr-warmed", lambda g: set())
    if key is None or key in seen or not len(src):
        return 0.0
    t0 = time.perf_counter()
    with compiling(progress):
        block = step(src)[0]
        if topk:
            _top_entries(G, block.astype(dtype, copy=False), topk)
    seen.add(key)
    return time.perf_counter() - t0


def _top_entries(G, block, k):
    """Labels, values and counts of the k largest positive entries of each row (``_top_rows``: ties to
    the smaller id; -1 and 0 after a row's positive entries)."""
    verts, vals = top_entries(block, k)
    counts = real_counts(vals)
    if G.ids is None:
        return verts, vals, counts
    return padded_labels(to_host(G.ids), verts, counts), vals, counts


def _montecarlo(G, ids, alpha, walks, seed):
    """Walks from the first source, MC_CHUNK at a time (one stream each); the share stopping at t
    (returned walks restart)."""
    xp = array_module(G.indptr)
    s = int(ids[0])
    counts, stopped = xp.zeros(G.n, dtype=np.float64), 0
    for c, done in enumerate(range(0, walks, MC_CHUNK)):
        omega = xp.zeros(G.n, dtype=np.int64)
        omega[s] = min(MC_CHUNK, walks - done)
        key = stream_key(seed, s) if c == 0 else stream_key(stream_key(seed, s), c)
        end, _ = walk_ends(G.indptr, G.indices, omega, key, alpha)
        hit = end[end >= 0]
        counts += count_ids(hit, G.n)
        stopped += int(hit.size)
    return (counts / max(stopped, 1))[None, :], 1, {}


def _push_steps(G, method, o: PPROptions, cost, count):
    """``ppr``'s step by push, pull, the hybrid or PowerPush: epochs to a residue mass <= ``tol``
    (``epochs``), or one run to the threshold ``r_max``."""
    limit = o.max_iter if o.max_iter is not None else np.iinfo(np.int64).max
    smallest = o.r_max if o.r_max is not None else floor_threshold(o.tol, G.m, G.n)
    mode = MODES.get(method)
    if method == "powerpush":
        solve, block = powerpush_solver(G, o.alpha, o.tol, o.r_max, o.dtype), 1
    elif G.device == "gpu":
        from operators.ppr.push_gpu import reused_solver
        from operators.ppr.push_plan import batch_size

        full = cost or cost_model("gpu")  # block was checked by PPROptions
        dense = o.r_max is None  # to an L1 bound: rows end up dense
        block = o.block or (batch_size(G.n, o.dtype, full, mode=mode, dense=dense) if count > 1 else 1)
        block = max(1, min(block, count))
        cost = cost or fit_grid(full, m=G.m, rows=block, tol=smallest, mode=mode)
        solve = reused_solver(G, mode, o.alpha, o.tol, o.dtype, cost, batch=block, r_max=o.r_max)
    else:
        cost = cost or fit_grid(cost_model("cpu"), m=G.m, rows=1, tol=smallest, mode=mode)
        solve, block = _cpu_solver(G, mode, o.alpha, o.tol, o.r_max, cost, o.dtype), 1

    def step(ids, **serial):  # serial=True: a CPU solve on a thread of a batch
        ids = ids[:block]
        x, it, models, residual, *allowance = solve(ids, limit, **serial)
        if it is None:  # the bound it could certify: the residue mass plus, where known, its rounding
            left = [r + a for r, a in zip(residual, allowance[0], strict=True)] if allowance else residual
            raise ConvergenceError("ppr", limit, float(np.max(left)), o.tol)
        k, res = len(ids), [float(v) for v in residual]
        allowance = allowance[0] if allowance else [rounding(it, x.dtype, o.dtype)] * k
        bound = [v + a for v, a in zip(res, allowance, strict=True)]
        return x, k, {"iterations": [it] * k, "models": [models] * k, "residual": res, "l1_bound": bound}

    return step


def _cpu_solver(G, mode, alpha, tol, r_max, cost, dtype):
    from operators.ppr.push_cpu import solve

    tptr, tind = _transpose(G)
    deg = np.diff(G.indptr)
    static = G.derived(f"ppr_pull_static_{cost}", lambda g: pull_static(np.diff(tptr), cost))
    weights = np.array([cost.l1, cost.l2, cost.l3])
    layout = (cost.blocks, cost.warps, cost.lanes)
    dmax = int(deg.max(initial=0))
    degrees = (light_degree(cost, static[2], dmax), dmax)
    floor = floor_threshold(tol, G.m, G.n)

    def run(sources, limit, serial=False):  # one source at a time, in epochs (``epochs``)
        s = int(sources[0])
        p = np.zeros(G.n)
        r = np.zeros(G.n)
        trace = np.zeros((4096, 5))
        theta = r_max if r_max is not None else first_threshold(tol, G.m, G.n)
        it, done = 0, False
        for _ in range(MAX_EPOCHS):
            args = (G.indptr, G.indices, tptr, tind, deg, s, alpha, theta, mode, limit, weights, layout)
            it, out = solve(*args, static, degrees, p, r, trace, serial, it)
            residual = float(r.sum())
            done = not out and (r_max is not None or residual + rounding(it, np.float64, dtype) <= tol)
            theta = None if done or out else next_threshold(theta, residual, tol, floor)
            if theta is None:
                break
        models = "".join("PL"[int(m) == PULL] for m in trace[: min(it, len(trace)), 0])
        return p[None, :], (it if done else None), models, [residual], [rounding(it, np.float64, dtype)]

    return run


def _transpose(G):
    t = G.transpose()
    return t.indptr, t.indices
