"""Single-source SimRank with an accuracy guarantee: ClipSim (Wu et al., SIGMOD 2023) and ExactSim's
allocation, on the CPU (Numba) and the GPU (CuPy kernels).

SimRank with decay c: s(u,u) = 1 and s(u,v) = c / (|I(u)| |I(v)|) sum s(u',v') over in-neighbours, so
S = c P^T S P + D with P the column-normalized in-neighbour transition matrix and D diagonal. With
pi^l = (1 - sqrt c)(sqrt c P)^l e_i, the column of the source is s_i = sum_l (sqrt c P^T)^l D pi^l /
(1 - sqrt c), truncated after L = ceil(log_{1/c}(10/eps)) hops and summed by Horner's rule. D(k,k) is
one minus the probability that two sqrt(c)-walks from k meet; it is estimated from R(k) pairs of
walks, with R(k) from ClipSim's clipping (Algorithm 2) or ExactSim's R pi(k).

Sample sizes. ``samples='bound'`` uses the R of the ClipSim analysis (MaxError <= eps with high
probability): R = 75 (1 + 1/sqrt n) ||pi||_2 log n / (8 (1 - sqrt c)^4 eps^2), about 10^4 / eps^2
samples after clipping, affordable to eps ~ 1e-3 on a GPU. ``samples='practical'`` uses
R = c K log2(n / 0.01) / eps^2 with the constants of the authors' published code (K = 4e-5 for ClipSim,
1e-5 for ExactSim): the setting of the published timings, 10^8 times fewer samples, with no proof;
its measured errors are in benchmarks/RESULTS.md. A number sets R directly.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from graphs import CSRGraph, vertex_frame
from graphs._device import array_module, to_host
from graphs._mix import GOLDEN, mix64_py, stream_key
from graphs.errors import OptionError
from operators._checks import check_graph
from operators._progress import compiling, report, within
from operators._ranked import RankedRows, clear_padding, padded_labels
from operators.options import SimRankOptions
from operators.simrank import cpu as _simrank_cpu
from operators.simrank import plan
from operators.simrank.plan import GROUP

_STREAM = 6  # random stream of the meeting walks (influence uses 0-4)
MAX_SAMPLES = 2e13  # a cap on the walks one query may ask for (minutes of GPU time)


@dataclass
class SimRankTopk(RankedRows):
    """Answers of a batch: row i holds source i's top k (original labels, decreasing score).

    Only vertices of positive score are listed: source i has ``counts[i]`` real rows (at most k, and 0
    for a source without in-neighbours, which is similar to no other vertex), first in its row of
    ``vertices`` and ``scores``; the slots after them hold vertex -1 and score 0 (never a vertex id).
    ``row(i)``, ``to_frame()`` and ``to_dict()`` give the real rows only. ``seconds`` excludes the
    one-time warm-up of the first call on a graph (compilation), which is ``compile_seconds``.
    """

    sources: np.ndarray
    vertices: np.ndarray
    scores: np.ndarray
    seconds: np.ndarray
    counts: np.ndarray
    compile_seconds: float = 0.0

    values_field: ClassVar[str] = "scores"
    values_column: ClassVar[str] = "simrank"


def simrank(
    G: CSRGraph,
    source,
    *,
    c: float = SimRankOptions.c,
    epsilon: float = SimRankOptions.epsilon,
    clip: bool = SimRankOptions.clip,
    samples=SimRankOptions.samples,
    seed: int = SimRankOptions.seed,
    info: dict | None = None,
    options: SimRankOptions | None = None,
    as_frame: bool = False,
    progress=None,
):
    """SimRank of every vertex with one source: ClipSim, or ExactSim's allocation with ``clip=False``.

    Parameters
    ----------
    G : CSRGraph, NetworkX graph, SciPy sparse matrix or pandas edge DataFrame
        The last three are converted with their labels first (``graphs.as_graph``).
        On the CPU or the GPU; the computation runs where the graph is. Edge weights are ignored;
        an undirected graph counts each edge in both directions.
    source : label
        Original label of the source vertex (KeyError when it is not in the graph).
    c : float
        Decay factor in (0, 1).
    epsilon : float
        Additive error target in (0, 1); sets the hops L and the samples R.
    clip : bool
        ClipSim's LargeCut / SmallCut allocation (Algorithm 2); ``False``: R(k) = ceil(R pi(k)).
    samples : {'bound', 'practical'} or float
        How R is chosen (see the module text): the guarantee's bound, the published codes'
        constants, or this many.
    seed : int
        Seed of the meeting walks; the same seed gives the same result on the CPU and the GPU.
    info : dict, optional
        Filled with ``levels``, ``R``, ``samples`` (drawn), ``sampled_vertices``, ``seconds``
        per phase (hops, sampling, horner, total).
    options : SimRankOptions, optional
        ``c``, ``epsilon``, ``clip``, ``samples`` and ``seed`` in one checked object (its ``k`` unused
        here), used as it is; a keyword among them that differs from it raises ``OptionError``.
    as_frame : bool
        Return a pandas DataFrame instead, columns ``vertex`` (original labels) and ``simrank``;
        ``dict(zip(frame.vertex, frame.simrank))`` is ``networkx.simrank_similarity(G, source)``'s shape.
    progress : callable, optional
        ``progress(done, total, "samples")`` over the meeting samples (``operators._progress``), called
        before the first is drawn (``done == 0``: ``total`` is what the query will draw) and after each
        batch of them; an exception it raises ends the query. Between batches the interpreter runs, so
        Ctrl-C (or another signal's handler) ends a long query within a batch's time.

    Returns
    -------
    array of float64, shape (n,)
        s(source, v) for every internal vertex id v (on the graph's device); s(source, source) = 1.
        With ``as_frame``, the DataFrame (on the host).

    Raises
    ------
    ValueError
        When the walks needed exceed ``MAX_SAMPLES`` (2e13), before any is drawn.

    Examples
    --------
    >>> import graphjobs as gj
    >>> G = gj.from_edges([0, 0, 1, 2, 3], [1, 2, 2, 0, 2])
    >>> gj.simrank(G, 2).round(3).tolist()  # sampled: the seed fixes the estimate
    [0.052, 0.206, 1.0, 0.0]
    """
    G = check_graph(G)
    o = SimRankOptions.resolve(options, c=c, epsilon=epsilon, clip=clip, samples=samples, seed=seed)
    sid = int(G.internal_ids(np.asarray([source], dtype=object if G.has_labels else None))[0])
    s = _single(
        G,
        sid,
        c=o.c,
        epsilon=o.epsilon,
        clip=o.clip,
        samples=o.samples,
        seed=o.seed,
        info=info,
        progress=progress,
    )
    return vertex_frame(G, s, "simrank") if as_frame else s


def simrank_topk(
    G: CSRGraph,
    sources,
    *,
    k: int = SimRankOptions.k,
    c: float = SimRankOptions.c,
    epsilon: float = SimRankOptions.epsilon,
    clip: bool = SimRankOptions.clip,
    samples=SimRankOptions.samples,
    seed: int = SimRankOptions.seed,
    options: SimRankOptions | None = None,
    progress=None,
) -> SimRankTopk:
    """The k vertices most similar to each source (the source excluded), by ``simrank``.

    Parameters are those of ``simrank`` (``options`` with its ``k`` too); ``sources`` is a label or a
    sequence of labels and ``k`` is capped at n - 1. Ties are broken by internal vertex id. Returns a
    ``SimRankTopk``: only vertices of positive score are listed (``counts``), so a source with fewer
    than k such vertices has fewer rows. The first call on a graph first compiles the kernels by an
    untimed query of few samples from the vertex of highest in-degree (``compile_seconds``);
    ``seconds`` are the sources' own. ``progress``, if given, hears of the compilation, then follows the
    meeting samples of each source as ``simrank``'s does, in the unit ``"samples, source i/N"``
    (``operators._progress.within``), and the sources done (``"sources"``); an exception it raises ends
    the batch.

    Examples
    --------
    >>> import graphjobs as gj
    >>> G = gj.from_edges([0, 0, 1, 2, 3], [1, 2, 2, 0, 2])
    >>> vertices, scores = gj.simrank_topk(G, [2], k=2).row(0)
    >>> vertices.tolist(), scores.round(3).tolist()
    ([1, 0], [0.206, 0.052])
    """
    G = check_graph(G)
    o = SimRankOptions.resolve(options, k=k, c=c, epsilon=epsilon, clip=clip, samples=samples, seed=seed)
    k, c, epsilon, samples = min(o.k, max(G.n - 1, 0)), o.c, o.epsilon, o.samples
    clip, seed = o.clip, o.seed
    labels = np.atleast_1d(np.asarray(sources, dtype=object if G.has_labels else None))
    ids = G.internal_ids(labels)
    xp = array_module(G.indptr)
    verts = np.empty((ids.size, k), dtype=np.int64)
    scores = np.empty((ids.size, k), dtype=np.float64)
    secs = np.empty(ids.size, dtype=np.float64)
    warm = 0.0
    if ids.size and not G.has_derived("simrank-warmed"):  # compile before any source is timed
        with compiling(progress):
            warm = G.derived("simrank-warmed", lambda g: _warm_up(g, c=c, epsilon=epsilon, clip=bool(clip)))
    for row, sid in enumerate(ids.tolist()):
        t0 = time.perf_counter()
        unit = within("samples", row, ids.size, "source")
        s = _single(
            G,
            sid,
            c=c,
            epsilon=epsilon,
            clip=clip,
            samples=samples,
            seed=seed,
            info=None,
            progress=progress,
            unit=unit,
        )
        s[sid] = -np.inf
        top = xp.argpartition(-s, k - 1)[:k] if 0 < k < G.n else xp.arange(G.n)[:k]
        order = xp.lexsort(xp.stack([top, -s[top]]))
        verts[row], scores[row] = to_host(top[order]), to_host(s[top[order]])
        secs[row] = time.perf_counter() - t0
        report(progress, row + 1, ids.size, "sources")
    counts = clear_padding(verts, scores)  # score 0: not similar, no answer
    return SimRankTopk(labels, padded_labels(G.ids, verts, counts), scores, secs, counts, warm)


WARM_SAMPLES = 1000.0  # meeting samples of the warm-up query (enough that the sampling kernel runs)


def _warm_up(G: CSRGraph, *, c, epsilon, clip) -> float:
    """One query with WARM_SAMPLES samples from the vertex of highest in-degree, so that the Numba
    functions and CUDA kernels of ``_single`` are compiled; its seconds."""
    t0 = time.perf_counter()
    sid = int(G.in_degree().argmax())
    _single(G, sid, c=c, epsilon=epsilon, clip=clip, samples=WARM_SAMPLES, seed=0, info=None)
    return time.perf_counter() - t0


def simrank_samples(
    G: CSRGraph,
    source,
    *,
    c: float = SimRankOptions.c,
    epsilon: float = SimRankOptions.epsilon,
    clip: bool = SimRankOptions.clip,
    samples=SimRankOptions.samples,
    options: SimRankOptions | None = None,
) -> int:
    """The meeting samples (walk pairs) that ``simrank`` of ``source`` with these options draws, found
    without drawing any (the hops and the allocation only): the measure of a query's cost, which grows
    as 1 / epsilon^2. Raises as ``simrank`` does when they exceed ``MAX_SAMPLES``."""
    G = check_graph(G)
    o = SimRankOptions.resolve(options, c=c, epsilon=epsilon, clip=clip, samples=samples)
    sid = int(G.internal_ids(np.asarray([source], dtype=object if G.has_labels else None))[0])
    return int(_plan(G, sid, c=o.c, epsilon=o.epsilon, clip=o.clip, samples=o.samples, times=None)[4].sum())


def _plan(G: CSRGraph, sid: int, *, c, epsilon, clip, samples, times):
    """``(G simple, hop vectors, ||pi||, R, samples per vertex, in-degrees)`` of a query."""
    xp = array_module(G.indptr)
    G = G.derived("simrank-simple", _simple)
    in_deg = G.derived("simrank-in-degree", lambda g: xp.diff(g.transpose().indptr))
    backend = _backend(xp)
    pis = backend.hops(G.indptr, G.indices, in_deg, sid, math.sqrt(c), plan.levels(c, epsilon))
    pi = pis.sum(axis=0)
    norm = float(xp.sqrt((pi * pi).sum()))
    if times is not None:
        _lap(times, "hops", xp is not np)
    total = plan.total_samples(samples, n=G.n, c=c, epsilon=epsilon, pi_norm=norm, clip=clip)
    counts = plan.allocate(xp, pi, total, c=c, epsilon=epsilon, clip=clip, in_degree=in_deg)
    drawn = int(counts.sum())
    if drawn > MAX_SAMPLES:
        raise OptionError(
            f"epsilon={epsilon:g} with samples={samples!r} needs {drawn:.3g} walk pairs "
            f"(over {MAX_SAMPLES:.3g}); use a larger epsilon, samples='practical' or a number of samples"
        )
    return G, pis, norm, total, counts, in_deg


def _backend(xp):
    if xp is not np:
        from operators.simrank import gpu

        return gpu
    return _simrank_cpu


def _single(G: CSRGraph, sid: int, *, c, epsilon, clip, samples, seed, info, progress=None, unit="samples"):
    xp = array_module(G.indptr)
    gpu = xp is not np
    backend = _backend(xp)
    times = {"start": time.perf_counter()}
    G, pis, norm, total, counts, in_deg = _plan(
        G, sid, c=c, epsilon=epsilon, clip=clip, samples=samples, times=times
    )
    Gt = G.transpose()
    sc, L = math.sqrt(c), pis.shape[0] - 1
    drawn = int(counts.sum())
    pv, pg0, pg1 = plan.portions(xp, counts)
    key = mix64_py(stream_key(seed, _STREAM) + (sid + 1) * GOLDEN)
    cont = np.uint64(min(int(c * 2.0**53), 2**53))
    q = _sample(backend, Gt, np.uint64(key), cont, counts, (pv, pg0, pg1), gpu, progress, unit)
    diag = plan.diagonal(xp, in_deg, counts, q, c)
    _lap(times, "sampling", gpu)
    s = backend.horner(Gt.indptr, Gt.indices, pis, diag, sc)
    s[sid] = 1.0
    _lap(times, "horner", gpu)
    if info is not None:
        seconds = {k: v for k, v in times.items() if k not in ("start", "mark")}
        seconds["total"] = sum(seconds.values())
        info.update(
            levels=L,
            R=total,
            samples=drawn,
            sampled_vertices=int((counts > 0).sum()),
            pi_norm=norm,
            seconds=seconds,
            device=G.device,
        )
    return s


# Meeting samples per call of a sampling kernel: per CPU thread, about a quarter of a second of walks
# (so an interrupt or a progress report waits no longer), and on a GPU enough portions to fill it
BATCH_PER_THREAD = 2**22
BATCH_GPU = 2**33


def _batches(xp, counts, portions, size: int) -> list:
    """Cut the portions (in their order) into consecutive ranges of at most about ``size`` samples each
    (a range holds one portion at least): ``[(lo, hi, samples up to hi)]``."""
    pv, pg0, pg1 = portions
    if pv.size == 0:
        return []
    drawn = xp.minimum(counts[pv] - GROUP * pg0, GROUP * (pg1 - pg0))
    ends = np.cumsum(to_host(drawn))
    cuts = np.searchsorted(ends, np.arange(size, int(ends[-1]), size), side="right")
    bounds = np.unique(np.concatenate([[0], np.maximum(cuts, 1), [ends.size]]))
    return [(int(lo), int(hi), int(ends[hi - 1])) for lo, hi in itertools.pairwise(bounds)]


def _sample(backend, Gt, key, cont, counts, portions, gpu: bool, progress, unit: str):
    """Meets per vertex (``backend.meets``) over the portions, a batch (``_batches``) per kernel call;
    ``progress(done, total, unit)`` in samples before the first and after each (an exception it raises
    ends the sampling there). The sums, hence the answer, do not depend on the batches."""
    xp = array_module(counts)
    total = int(counts.sum())
    size = BATCH_GPU if gpu else BATCH_PER_THREAD * _simrank_cpu.threads()
    report(progress, 0, total, unit)
    q = None
    for lo, hi, done in _batches(xp, counts, portions, size):
        part = backend.meets(Gt.indptr, Gt.indices, key, cont, counts, *(a[lo:hi] for a in portions))
        if q is None:
            q = part
        else:
            q += part
        report(progress, done, total, unit)
    return xp.zeros(counts.size, dtype=np.int64) if q is None else q


def _simple(G: CSRGraph) -> CSRGraph:
    """G with parallel edges counted once (SimRank's I(v) is a set); G itself when it has none."""
    from graphs._build import build_csr, expand_rows

    xp = array_module(G.indptr)
    rows = expand_rows(G.indptr, G.m)
    dup = (G.indices[1:] == G.indices[:-1]) & (rows[1:] == rows[:-1])  # rows are sorted by column
    if not bool(dup.any()):
        return G
    indptr, indices, _ = build_csr(rows, G.indices, None, G.n, dedupe=True)
    del xp
    return CSRGraph(indptr, indices, directed=True, validate=False)


def _lap(times: dict, name: str, gpu: bool) -> None:
    if gpu:
        from graphs._device import import_cupy

        import_cupy().cuda.Device().synchronize()
    now = time.perf_counter()
    times[name] = now - times.pop("mark", times["start"])
    times["mark"] = now


def _simrank_reference(G: CSRGraph, *, c: float = 0.6, tol: float = 1e-10, max_iter: int = 1000):
    """All-pairs SimRank by the dense iteration S <- c P^T S P with unit diagonal (tests only)."""
    import scipy.sparse as sp

    at = G.to("cpu").to_scipy().T.tocsr()  # row j: the in-neighbours of j
    at.data[:] = 1.0
    at.sum_duplicates()
    at.data[:] = 1.0  # I(j) is a set
    deg = np.maximum(np.diff(at.indptr), 1)
    pt = sp.csr_matrix(sp.diags(1.0 / deg) @ at)  # P^T: row j averages over I(j)
    S = np.eye(G.n)
    for _ in range(max_iter):
        nxt = c * (pt @ (pt @ S).T)
        np.fill_diagonal(nxt, 1.0)
        change = np.abs(nxt - S).max()
        S = nxt
        if change < tol:
            return S
    raise RuntimeError("reference SimRank did not converge")
