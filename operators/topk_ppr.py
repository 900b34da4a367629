"""Top-k personalized PageRank queries over a kPAR index: Algorithm 3 of Shi et al. (PVLDB 13(1)).

Estimator (dangling vertices). The push sends the residue of a vertex without out-edges back to the
source, and an index walk that must leave such a vertex "returns to the source" (``ret[v]`` counts
them; they are not in the IRW). With a_v(t) = omega(v, t) / omega(v) and b_v = ret[v] / omega(v),
pi(s, t) = (pi0(s, t) + sum_v r(s, v) a_v(t)) / (1 - sum_v r(s, v) b_v): a walk from v either stops
at t before it returns, or returns and then continues as a walk from s.

Stop test (our reading of lines 15-23): with pi_hat the normalised estimates of the candidates and of
H, eps' from ``PPRParams.eps_prime``, LB = pi_hat / (1 + eps') and UB = pi_hat / (1 - eps') (Eq. 12-14),
and the bound of every other vertex pi_ub = (tau + rho omega_I^ub) / (1 - sum r b) (Eq. 11), a round
succeeds when at least k vertices have estimates, LB(v_k) >= sqrt(delta delta_min) (above it eps' <= eps:
the guarantee covers the top k),
pi_ub <= LB(v_k) (no other vertex can enter), and UB(v_i) <= (1 + eps) LB(v_i) for i <= k.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass

import numpy as np

from graphs._device import array_module, to_host
from graphs._mix import stream_key

from ._checks import check_count, check_positive, check_probability
from ._streams import StreamPool, stream_count
from .ppr_index import PPRIndex

WORKSPACE_BYTES = 72  # per vertex, of one GPU query workspace (``_topk_gpu.GPUQuery``)


@dataclass
class TopkPPR:
    """Answers of a batch: row i holds source i's top k (original labels, decreasing estimate)."""

    sources: np.ndarray
    vertices: np.ndarray
    ppr: np.ndarray
    rounds: np.ndarray
    pushes: np.ndarray
    candidates: np.ndarray
    fallback: np.ndarray
    delta: np.ndarray
    seconds: np.ndarray

    def to_frame(self):
        """Long table with columns source, rank, vertex, ppr (pandas)."""
        import pandas as pd

        b, k = self.vertices.shape
        return pd.DataFrame(
            {
                "source": np.repeat(self.sources, k),
                "rank": np.tile(np.arange(1, k + 1, dtype=np.int32), b),
                "vertex": self.vertices.reshape(-1),
                "ppr": self.ppr.reshape(-1),
            }
        )


def topk_ppr(
    index: PPRIndex,
    sources,
    *,
    k: int = 100,
    epsilon: float | None = None,
    delta_init: float | None = None,
    max_rounds: int = 10,
    seed: int = 0,
    adaptive: bool = True,
    high_irw: bool = True,
    tiling: bool = True,
    streams: int | None = None,
) -> TopkPPR:
    """The k vertices of highest personalized PageRank from each source, with kPAR's guarantees.

    Each round pushes residues (adaptive forward push, per-vertex thresholds beta(v) r_max), takes as
    candidates the vertices with reserve >= tau = delta / 2, estimates them from the inverted random
    walks and the high-IRW set H, and stops when the bounds certify the top k (see the module text);
    otherwise delta is halved. After ``max_rounds`` failed rounds it falls back to fresh random
    walks from every vertex with residue (Algorithm 3, lines 27-32), ceil(r(v) psi / d) from v
    with d = min(sqrt(delta delta_min), max(k-th estimate, 1/n)) of the last round.

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
    adaptive, high_irw, tiling : bool
        Switches for the ablation: per-vertex thresholds (off: beta = 1), the H set's bound
        reduction and tighter bound (off: H vertices are ordinary candidates and omega_I^ub is the
        maximum over all vertices), tile-based GPU kernels (off: a thread per vertex).
    streams : int, optional
        GPU only: sources answered at once, each in its own thread, CUDA stream and workspace, so
        that one query's kernels run while another waits on a host read. Default: 1 below 2**20
        vertices (there the threads only contend for the GIL), else up to 8, fewer when the free
        device memory holds fewer workspaces (about 72 bytes per vertex each; they are kept with the
        index for the next call). 1 answers the sources one after another, as the CPU always does.
        Each source's answer does not depend on this.

    Returns
    -------
    TopkPPR
        ``vertices`` and ``ppr`` of shape (len(sources), k), plus per source the rounds, pushes,
        candidates of the last round, whether the fallback ran, the last delta, and seconds.
    """
    if not isinstance(index, PPRIndex):
        raise TypeError(f"expected a PPRIndex (build_ppr_index / load_ppr_index), got {type(index).__name__}")
    G, P = index.graph, index.params
    k = min(check_count("k", k), G.n)
    eps = P.epsilon if epsilon is None else check_positive("epsilon", epsilon)
    max_rounds = check_count("max_rounds", max_rounds)
    if delta_init is None:
        delta_init = 1.0 / (10 * k * math.log(G.n))
    delta_init = check_probability("delta_init", delta_init)
    labels = np.atleast_1d(np.asarray(sources, dtype=object if G.has_labels else None))
    src = G.internal_ids(labels)
    ops = _workspace(index)
    b = src.size
    out = TopkPPR(
        sources=labels,
        vertices=np.zeros((b, k), dtype=np.int64),
        ppr=np.zeros((b, k)),
        rounds=np.zeros(b, dtype=np.int32),
        pushes=np.zeros(b, dtype=np.int64),
        candidates=np.zeros(b, dtype=np.int64),
        fallback=np.zeros(b, dtype=bool),
        delta=np.zeros(b),
        seconds=np.zeros(b),
    )
    streams = stream_count(G, b - 1, streams, WORKSPACE_BYTES)
    ub_walks = index.omega_i_ub if high_irw else int(to_host(index.arrays["omega_i"]).max())
    opts = dict(k=k, eps=eps, delta=delta_init, max_rounds=max_rounds, adaptive=adaptive)
    opts.update(high_irw=high_irw, tiling=tiling, ub_walks=ub_walks)

    def answer(i, s, ops):
        t0 = time.perf_counter()
        verts, est, stats = _query(ops, index, s, key=stream_key(seed, s), **opts)
        out.vertices[i], out.ppr[i] = verts, est
        out.rounds[i], out.pushes[i], out.candidates[i], out.fallback[i], out.delta[i] = stats
        out.seconds[i] = time.perf_counter() - t0

    todo = list(enumerate(src.tolist()))
    if streams > 1:  # the first alone (it builds every kernel), the others at once
        from ._topk_gpu import GPUQuery

        answer(*todo[0], ops)
        pool = index.__dict__.setdefault("_stream_pool", StreamPool(lambda: GPUQuery(index)))
        pool.map(lambda item, work: answer(*item, work), todo[1:], streams)
    else:
        for i, s in todo:
            answer(i, s, ops)
    out.vertices = G.ids[out.vertices] if G.ids is not None else out.vertices
    return out


def _workspace(index: PPRIndex):
    """The calling thread's query workspace for ``index`` (kept with the index, one per thread)."""
    cache = index.__dict__.setdefault("_workspaces", {})
    key = threading.get_ident()
    ops = cache.get(key)
    if ops is None:
        if index.graph.device == "gpu":
            from ._topk_gpu import GPUQuery as Query
        else:
            from ._topk_cpu import CPUQuery as Query
        ops = cache[key] = Query(index)
    return ops


def _query(ops, index, s, *, k, eps, delta, max_rounds, adaptive, high_irw, tiling, ub_walks, key):
    P = index.params
    high = index.arrays["high"]
    ops.start(s)
    pushes = 0
    for rnd in range(1, max_rounds + 1):
        rmax, rho, tau = P.r_max(delta), P.rho(delta), 0.5 * delta  # line 4-6 (Eq. 5, 6, 10)
        pushes += ops.push(rmax, adaptive, tiling)  # ParallelAFP from the regenerated frontier
        cand = ops.candidates(tau, exclude_h=high_irw)  # pi0(s, v) >= tau, by reserve
        est_h = ops.bound_reduction()  # Alg. 4 over H
        est_c = ops.compute_ppr(cand, est_h, tiling)  # Alg. 6 over the candidates
        norm = 1.0 / (1.0 - ops.returned())
        if high_irw:
            verts, est = ops.top(_concat(cand, high), _concat(est_c, ops.pi0_of(high) + est_h), k)
        else:
            verts, est = ops.top(cand, est_c, k)
        verts, est = to_host(verts), to_host(est) * norm
        pi_ub = (tau + rho * ub_walks) * norm  # Eq. 11
        e = P.eps_prime(est, delta, eps)
        lb = est / (1 + e)
        ub = np.where(e < 1, est / np.maximum(1 - e, 1e-300), np.inf)
        theta = math.sqrt(delta * P.delta_min)  # eps' <= eps from here up
        if est.size >= k and lb[k - 1] >= theta and pi_ub <= lb[k - 1] and (ub <= (1 + eps) * lb).all():
            return verts, est, (rnd, pushes, cand.size, False, delta)
        kth = est[k - 1] if est.size >= k else 0.0
        delta /= 2
    # lines 27-32: Monte-Carlo walks from every vertex with residue, enough for the guarantee at the
    # k-th estimate of the last round (never beyond the index's level, nor below 1/n)
    target = min(theta, max(kth, 1.0 / index.graph.n))
    best, est, _ = ops.fallback(P.psi / target, key)
    best = to_host(best[:k])
    return best, to_host(est[best]), (rnd, pushes, cand.size, True, delta)


def _concat(a, b):
    return array_module(a).concatenate([a, b])
