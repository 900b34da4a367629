"""Top-k personalized PageRank queries over a kPAR index: Algorithm 3 of Shi et al. (PVLDB 13(1)).

Estimator (dangling vertices). The push sends the residue of a vertex without out-edges back to the
source, and an index walk that must leave such a vertex "returns to the source" (``ret[v]`` counts
them; they are not in the IRW). With a_v(t) = omega(v, t) / omega(v) and b_v = ret[v] / omega(v),
pi(s, t) = (pi0(s, t) + sum_v r(s, v) a_v(t)) / (1 - sum_v r(s, v) b_v): a walk from v either stops
at t before it returns, or returns and then continues as a walk from s. With first-step walks (the
index's default, ``build_ppr_index(first_step=True)``) a_v(t) = (1 - alpha) [t = v] + alpha a'_v(t)
and b_v = alpha b'_v, where a'_v and b'_v are the shares of the walks that took their first step:
the first term is added exactly ((1 - alpha) r(s, t), ``PPRParams.own_share``) and the walks'
weights carry alpha (``walk_share``), so estimates keep their mean and lose the variance of the
immediate stops. The bound below then counts (1 - alpha) omega(t) + alpha omega_I(t) walks for t
(``walks_bound``): r(s, t) <= rho omega(t) as each walk's share r(s, v) / omega(v) <= rho.

Stop test (our reading of lines 15-23): with pi_hat the normalised estimates of the candidates and of
H, eps' from ``PPRParams.eps_prime``, LB = pi_hat / (1 + eps') and UB = pi_hat / (1 - eps') (Eq. 12-14),
and the bound of every other vertex pi_ub = (tau + rho omega_I^ub) / (1 - sum r b) (Eq. 11), a round
succeeds when at least k vertices have estimates, LB(v_k) >= sqrt(delta delta_min) (above it eps' <= eps:
the guarantee covers the top k),
pi_ub <= LB(v_k) (no other vertex can enter), and UB(v_i) <= (1 + eps) LB(v_i) for i <= k.

Small reach (our addition): a source that reaches fewer than k vertices never has k estimates, so
Algorithm 3 would fail all L rounds and end in the fallback. When a failed round's touched vertices
have all been pushed, they are exactly the reachable set; up to ``EXACT_REACH`` of them, their exact
PPR is solved directly (``_topk_exact``) and the query ends there. Most such sources are answered so
before any round: those without out-edges to other vertices (``lone_topk``), and, where the graph is
on the CPU or a host copy of it is kept (GPU graphs up to 2**25 edges), those whose search of at most
256 vertices finds everything they reach (``small_reaches``).
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from graphs._device import to_host
from graphs._mix import stream_key
from operators._cpu_threads import cpu_threads
from operators._gpu.memory import MemoryEstimate, build_bytes, graph_bytes
from operators._gpu.streams import exhaust, stream_count
from operators._progress import compiling, report
from operators._ranked import RankedRows, clear_padding, padded_labels
from operators.options import TopkOptions, TopkTuning
from operators.topk.batch import CPU_CONSTANT_BYTES, CPU_WORKSPACE_BYTES, answer_all, workspace
from operators.topk.cpu import tie_order
from operators.topk.exact import EXACT_REACH, closed_reach_topk, without_rounds
from operators.topk.index import PPRIndex, walks_bound
from operators.topk.refine import REFINE_BYTES, in_edges

# per vertex, of what the GPU workspaces of an index share: inverse omega (8), the H-list records (32) and
# two kinds of push thresholds (4 each); ``_topk_gpu_lists.round_constants``, ``GPUQuery.load_thresholds``
CONSTANT_BYTES = 48
WORKSPACE_BYTES = 81  # per vertex, of one GPU query workspace (``_topk_gpu.GPUQuery``; not its constants)
MAX_JUMP = 16  # most halvings of delta after one failed round
# per source, what ``_query`` returns after the answer, and their types in ``TopkPPR``
STATS = dict(
    rounds=np.int32,
    pushes=np.int64,
    candidates=np.int64,
    fallback=bool,
    exact=bool,
    delta=float,
    refined=np.int32,
)


@dataclass
class TopkPPR(RankedRows):
    """Answers of a batch: row i holds source i's top k (original labels, decreasing estimate).

    Only vertices of positive estimate are listed: source i has ``counts[i]`` real rows (at most k; at
    least 1, as pi(s, s) >= 1 - alpha), first in its row of ``vertices`` and ``ppr``; a source that
    reaches fewer than k vertices has fewer, and the slots after them hold vertex -1 and PPR 0 (never
    a vertex id). ``row(i)``, ``to_frame()`` and ``to_dict()`` give the real rows only. ``seconds``
    excludes the one-time warm-up of the first call on an index (compilation), which is
    ``compile_seconds``. ``memory``: the device memory estimate checked before the queries allocated
    (``query_memory``'s, as a record: estimate_bytes, free_bytes, device, parts).
    """

    sources: np.ndarray
    vertices: np.ndarray
    ppr: np.ndarray
    rounds: np.ndarray
    pushes: np.ndarray
    candidates: np.ndarray
    fallback: np.ndarray
    exact: np.ndarray
    delta: np.ndarray
    seconds: np.ndarray
    refined: np.ndarray
    counts: np.ndarray
    compile_seconds: float = 0.0
    memory: dict | None = None

    values_field: ClassVar[str] = "ppr"
    values_column: ClassVar[str] = "ppr"


def topk_ppr(
    index: PPRIndex,
    sources,
    *,
    k: int = TopkOptions.k,
    epsilon: float | None = TopkOptions.epsilon,
    delta_init: float | None = TopkOptions.delta_init,
    max_rounds: int = TopkOptions.max_rounds,
    seed: int = TopkOptions.seed,
    refine: bool = TopkOptions.refine,
    streams: int | None = None,
    options: TopkOptions | None = None,
    tuning: TopkTuning | None = None,
    progress=None,
) -> TopkPPR:
    """The k vertices of highest personalized PageRank from each source, with kPAR's guarantees.

    Each round pushes residues (adaptive forward push, per-vertex thresholds beta(v) r_max), takes as
    candidates the vertices with reserve >= tau = delta / 2, estimates them from the inverted random
    walks and the high-IRW set H, and stops when the bounds certify the top k (see the module text);
    otherwise delta is halved (by default as many times as the round's estimates show the test
    needs: see ``TopkTuning.jump``). After ``max_rounds`` failed rounds it falls back to fresh random
    walks from every vertex with residue (Algorithm 3, lines 27-32), ceil(r(v) psi / d) from v
    with d = min(sqrt(delta delta_min), max(k-th estimate, 1/n)) of the last round. A failed round
    whose touched vertices have all been pushed and number at most 256 has found every vertex
    reachable from the source: the query then ends with their exact PPR (``exact``), and with fewer
    than k of them the source's answer has fewer than k rows. Most such sources are answered so
    before any round (0 rounds): those without out-edges to other vertices, and those that a bounded
    search over the graph (a host copy of a GPU graph up to 2**25 edges, kept with it) shows to reach
    at most 256 vertices.

    Parameters
    ----------
    index : PPRIndex
        From ``build_ppr_index`` or ``load_ppr_index``; the query runs on its graph's device.
    sources : label or sequence of labels
        Original vertex labels; all are checked before any work starts.
    k : int
        Vertices per source (at most n).
    epsilon : float, optional
        Relative error target (default: the index's epsilon).
    delta_init : float, optional
        First delta (default 1 / (10 k log n)), halved after each failed round.
    max_rounds : int
        Rounds (L) before the Monte-Carlo fallback.
    seed : int
        Seed of the fallback walks (source s uses stream (seed, s)).
    refine : bool
        Once the stop test passes, re-estimate the listed vertices within a bounded standard deviation of
        the k-th estimate from their in-neighbours': pi(s, t) = alpha sum_{u -> t} pi(s, u) / d_out(u) has a
        fraction of the variance (``_topk_refine``, our addition; it needs the graph's in-edge lists, built
        at the first call and kept with the graph): higher precision at the k-th value for some more time
        a query (``benchmarks/RESULTS.md``, top-k section). False answers as Algorithm 3 does.
    streams : int, optional
        GPU only: sources answered at once, each on its own CUDA stream and workspace, driven in turn
        from the calling thread, so that one query's kernels run while the host reads another's
        round. Default: up to 8 from 2**23 vertices for k below 100, else up to 4; fewer when the
        free device memory holds fewer workspaces (93 bytes per vertex each, 81 with refine=False;
        they are kept with the index for the next call: ``index.forget_workspaces()`` frees them).
        1 answers the sources one after another. On the CPU the batch answers
        ``numba.get_num_threads()`` sources at once instead, on threads with a workspace each (37
        bytes per vertex, kept likewise; at most as many as a quarter of the free memory holds).
        Each source's answer does not depend on this. While the rounds of a GPU call with at least
        256 sources run, the device fetches 32 bytes per L2 miss (a process-wide hint, restored
        after the call; setting and restoring it costs too much for smaller calls).
    options : TopkOptions, optional
        ``k``, ``epsilon``, ``delta_init``, ``max_rounds``, ``seed`` and ``refine`` in one checked
        object, used as it is; a keyword among them that differs from it raises ``OptionError``.
    tuning : TopkTuning, optional
        The ablation's switches (default: all on). ``adaptive``, ``high_irw``, ``tiling``: per-vertex
        thresholds (off: beta = 1), the H set's bound reduction and tighter bound (off: H vertices are
        ordinary candidates and omega_I^ub is the maximum over all vertices), tile-based GPU kernels
        (off: a thread per vertex). ``persistent`` (GPU only): run each round's push in one cooperative
        launch, its frontiers' edges spread evenly over the whole GPU (off: the paper's launch per
        frontier, tiled per ``tiling``). ``jump``: after a failed round, halve delta as many times as
        needed for the stop test to pass on that round's estimates (at least once; at most 16). The
        test itself, and so the guarantee, is unchanged; rounds that the bounds of the failed one
        already show to be too coarse are skipped. Off halves once per round, as Algorithm 3 does.
    progress : callable, optional
        ``progress(done, total, "sources")`` as sources are answered, and the first call's compilation
        announced (``operators._progress``).

    Returns
    -------
    TopkPPR
        ``vertices`` and ``ppr`` of shape (len(sources), k) with ``counts``, each source's real rows
        (vertices of positive estimate; the slots after them hold vertex -1 and PPR 0), plus per
        source the rounds, pushes, candidates of the last round, whether the fallback ran, whether the
        answer is exact (a closed touched set), the last delta, seconds (from its first round to its
        answer, plus an equal share of the search for sources answered before any round), and how
        many vertices were re-estimated by ``refine``. The first call on an index first compiles the
        query's functions and kernels by a query from the vertex of highest out-degree, untimed by
        the sources: its seconds are ``compile_seconds`` (0 on later calls).

    Examples
    --------
    >>> import graphjobs as gj
    >>> G = gj.from_edges([0, 0, 1, 2, 3], [1, 2, 2, 0, 2])
    >>> res = gj.topk_ppr(gj.build_ppr_index(G, seed=0), [3], k=2)
    >>> vertices, values = res.row(0)
    >>> vertices.tolist(), values.round(4).tolist()
    ([2, 0], [0.3774, 0.3019])
    """
    if not isinstance(index, PPRIndex):
        raise TypeError(f"expected a PPRIndex (build_ppr_index / load_ppr_index), got {type(index).__name__}")
    G, P = index.graph, index.params
    o = TopkOptions.resolve(
        options, k=k, epsilon=epsilon, delta_init=delta_init, max_rounds=max_rounds, seed=seed, refine=refine
    )
    if tuning is None:
        tuning = TopkTuning()
    elif not isinstance(tuning, TopkTuning):
        raise TypeError(f"tuning must be a TopkTuning, got {type(tuning).__name__}")
    k, max_rounds, seed, refine = min(o.k, G.n), o.max_rounds, o.seed, o.refine
    eps = P.epsilon if o.epsilon is None else o.epsilon
    delta_init = 1.0 / (10 * k * math.log(G.n)) if o.delta_init is None else o.delta_init
    labels = np.atleast_1d(np.asarray(sources, dtype=object if G.has_labels else None))
    src = G.internal_ids(labels)
    ops = workspace(index)
    b = src.size
    out = _empty_result(G.labels_of(src), k)  # the labels as the graph holds them (3.0 given is 3)
    streams, memory = query_memory(index, b, k=k, refine=refine, streams=streams)
    more = (
        "fewer streams, or a GPU with more memory" if G.device == "gpu" else "or a machine with more memory"
    )
    out.memory = memory.check(f"refine=False (no in-edges), {more}")
    high_irw = tuning.high_irw
    ub_walks = index.omega_i_ub if high_irw else walks_bound(index.params, index.arrays, slice(None))
    opts = dict(k=k, eps=eps, delta=delta_init, max_rounds=max_rounds, adaptive=tuning.adaptive)
    opts.update(high_irw=high_irw, tiling=tuning.tiling, persistent=tuning.persistent, jump=tuning.jump)
    opts["ub_walks"] = ub_walks
    opts["edges"] = in_edges(index) if refine else None

    def answer(i, s, ops):  # a generator: it yields while a round runs on the GPU (see ``_query``)
        t0 = time.perf_counter()
        verts, est, stats = yield from _query(ops, index, s, key=stream_key(seed, s), **opts)
        out.vertices[i], out.ppr[i] = verts, est
        for name, value in zip(STATS, stats, strict=True):
            getattr(out, name)[i] = value
        out.seconds[i] += time.perf_counter() - t0  # after its share of ``without_rounds``
        if progress is not None:
            with lock:  # sources answered on threads, counted in order
                answered[0] += 1
                report(progress, answered[0], b, "sources")

    if "warmed" not in index.cache:  # first call on this index: compile before any source is timed
        with compiling(progress):
            out.compile_seconds = _warm_up(index, ops, k, P.alpha, delta_init, seed, opts)
    done = without_rounds(G, src, k, P.alpha, out, delta_init, tie_order(index))
    todo = [(i, s) for i, s in enumerate(src.tolist()) if not done[i]]
    answered, lock = [b - len(todo)], threading.Lock()  # those without rounds are answered already
    report(progress, answered[0], b, "sources")
    streams = min(streams, max(1, len(todo) - 1))  # the sources left to rounds
    answer_all(answer, todo, streams, index, ops)
    # estimates equal in float32 rank by vertex id (``select_top``); their float64 values, which differ
    # by less than a float32 step, are made non-increasing too
    np.minimum.accumulate(out.ppr, axis=1, out=out.ppr)
    out.counts = clear_padding(out.vertices, out.ppr)  # estimates of 0 (unreached) are no answer
    out.vertices = padded_labels(G.ids, out.vertices, out.counts) if G.has_labels else out.vertices
    return out


def query_memory(index: PPRIndex, queries: int, *, k: int, refine: bool, streams: int | None = None):
    """``(streams, estimate)``: how many of ``queries`` sources ``topk_ppr`` answers at once on the index's
    device (``operators._gpu.streams.stream_count``: the workspaces that fit) and its device memory
    estimate (``operators._gpu.memory.MemoryEstimate``): the index's arrays, its graph, with ``refine``
    the graph's in-edges (a transpose, whose build's transient - on the host its counts and cursors -
    comes before new workspaces are made), the constants the workspaces share (``CONSTANT_BYTES`` a
    vertex on the GPU, ``batch.CPU_CONSTANT_BYTES`` on the CPU), and the query
    workspaces: on the GPU the calling thread's own and one a stream, of which those kept from earlier
    calls and idle now are reused; on the CPU one a thread (``batch.CPU_WORKSPACE_BYTES`` a vertex; a
    second thread only where a quarter of the free memory holds its workspace). The index, its graph,
    in-edges already made and the reused workspaces are ``held``: only the rest must fit in the free
    memory."""
    G = index.graph
    gpu = G.device == "gpu"
    per_vertex = WORKSPACE_BYTES + (REFINE_BYTES if refine else 0) if gpu else CPU_WORKSPACE_BYTES
    pool = index.cache.get("stream_pool")  # workspaces of earlier batches, reused
    idle = 0 if pool is None else pool.idle
    streams = stream_count(G, queries - 1, streams, per_vertex, k, idle)
    at_once = 1 + streams if gpu else cpu_threads(G.n, CPU_WORKSPACE_BYTES, queries)
    own = threading.get_ident() in index.cache.get("workspaces", {})
    kept = (1 if own else 0) + (min(idle, streams) if streams > 1 else 0)
    g = graph_bytes(G.n, G.m)
    # the in-edges' build beyond its result: the GPU's sort keys and temporary; the host's counts
    transient = build_bytes(G.n, G.m) if gpu else 16 * (G.n + 1)
    build = transient if refine and not G.has_derived("transpose") else 0
    parts = (
        ("index", index.nbytes),
        ("graph", g),
        ("in-edges", g if refine else 0),
        ("constants", (CONSTANT_BYTES if gpu else CPU_CONSTANT_BYTES) * G.n),
        ("workspaces kept", kept * per_vertex * G.n),
        ("in-edges build or new workspaces", max(build, max(at_once - kept, 0) * per_vertex * G.n)),
    )
    held = ("index", "graph", "workspaces kept") + (("in-edges",) if G.has_derived("transpose") else ())
    held += ("constants",) if not gpu and "cpu_query_constants" in index.cache else ()
    return streams, MemoryEstimate(f"top-{k} PPR of {queries:,} sources, n={G.n:,}", G.device, parts, held)


def _empty_result(sources, k: int) -> TopkPPR:
    b = len(sources)
    return TopkPPR(
        sources=sources,
        vertices=np.zeros((b, k), dtype=np.int64),
        ppr=np.zeros((b, k)),
        seconds=np.zeros(b),
        counts=np.zeros(b, dtype=np.int64),
        **{name: np.zeros(b, dtype=dtype) for name, dtype in STATS.items()},
    )


def _warm_up(index, ops, k, alpha, delta_init, seed, opts) -> float:
    """Once per index, untimed by the sources: the search before the rounds and one query from the
    vertex of highest out-degree, so that their Numba functions and CUDA kernels are compiled before
    the first source's clock starts; returns its seconds (marks the index as warmed)."""
    t0 = time.perf_counter()
    G = index.graph
    s = int(G.out_degree().argmax())
    without_rounds(
        G, np.array([s], dtype=np.int64), k, alpha, _empty_result([s], k), delta_init, tie_order(index)
    )
    if G.device == "gpu":
        ops.replay = True  # as the batch runs its rounds (``answer_all``)
    exhaust(_query(ops, index, s, key=stream_key(seed, s), **opts))
    index.cache.setdefault("warmed", lambda: True)
    return time.perf_counter() - t0


def _query(
    ops,
    index,
    s,
    *,
    k,
    eps,
    delta,
    max_rounds,
    adaptive,
    high_irw,
    tiling,
    persistent,
    jump,
    ub_walks,
    edges,
    key,
):
    """Algorithm 3 for source ``s``, a generator returning (vertices, estimates, stats): it yields once a
    round's work is queued (on the GPU, on the current stream) and reads its result when resumed."""
    P = index.params
    ops.start(s)
    for rnd in range(1, max_rounds + 1):
        rmax, tau = P.r_max(delta), 0.5 * delta  # line 4-6 (Eq. 5, 6)
        ops.push(rmax, adaptive=adaptive, tiling=tiling, persistent=persistent)  # ParallelAFP
        # candidates pi0(s, v) >= tau, Alg. 4 over H, Alg. 6 over the candidates, the top k
        ops.estimate_launch(tau, k, high_irw=high_irw, tiling=tiling)
        yield
        verts, raw, ncand, returned = ops.estimate_finish()
        est = raw / (1.0 - returned)
        if not _failed(P, est, k, delta, eps, ub_walks, returned):
            band = 0
            if edges is not None:  # the order at the k-th value from the in-neighbours (``refine``)
                ops.refine_launch(verts, raw, k, tau=tau, rho=P.rho(delta), high_irw=high_irw, edges=edges)
                yield
                verts, raw, band = ops.refine_finish()
                est = raw / (1.0 - returned)
            return verts, est, (rnd, ops.pushes(), ncand, False, False, delta, band)
        reach = ops.closed_reach(EXACT_REACH)
        exact = (
            None if reach is None else closed_reach_topk(index.graph, reach, s, P.alpha, k, tie_order(index))
        )
        if exact is not None:
            return *exact, (rnd, ops.pushes(), ncand, False, True, delta, 0)
        kth = est[k - 1] if est.size >= k else 0.0
        theta = math.sqrt(delta * P.delta_min)
        halvings = 1
        if jump and est.size >= k:  # as many halvings as these estimates need to pass the test
            while halvings < MAX_JUMP and _failed(P, est, k, delta / 2**halvings, eps, ub_walks, returned):
                halvings += 1
        delta /= 2**halvings
    # lines 27-32: Monte-Carlo walks from every vertex with residue, enough for the guarantee at the
    # k-th estimate of the last round (never beyond the index's level, nor below 1/n)
    target = min(theta, max(kth, 1.0 / index.graph.n))
    best, est, _ = ops.fallback(P.psi / target, key)
    best = to_host(best[:k])
    return best, to_host(est[best]), (rnd, ops.pushes(), ncand, True, False, delta, 0)


def _failed(P, est, k, delta, eps, ub_walks, returned) -> bool:
    """The stop test of lines 15-23 (see the module text) fails for these normalised estimates. eps'
    falls as the estimate grows, so the smallest of the top k decides every one of its conditions."""
    if est.size < k:
        return True
    x = float(est[:k].min())
    pi_ub = (0.5 * delta + P.rho(delta) * ub_walks) / (1.0 - returned)  # Eq. 11
    e = float(P.eps_prime(x, delta, eps))
    lb = x / (1 + e)
    theta = math.sqrt(delta * P.delta_min)  # eps' <= eps from here up
    return not (e < 1 and lb >= theta and pi_ub <= lb and x / (1 - e) <= (1 + eps) * lb)
