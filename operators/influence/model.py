"""Diffusion models of influence maximization as arrays: edge probabilities in both directions.

Every cascade in graphjobs is a reachability question in a random *live-edge graph* drawn from
counter-based random numbers, so the CPU and the GPU draw the same worlds for the same key:

- IC: edge ``e`` of the in-edge view is live when ``rand_unit(key, e) < p[e]``.
- LT: every vertex v picks at most one in-edge, the one whose interval ``[lo, lo + p)`` holds
  ``rand_unit(key, v)``; intervals of v's in-edges are laid end to end from 0 (Kempe et al.: the
  live-edge form of the linear threshold model).

A reverse-reachable (RR) set walks the in-edge view (``rev``) from a random root; a forward
simulation walks the out-edge view (``fwd``) from the seeds. Both views carry ``p`` and ``lo`` in
their own edge order; the in-edge view is built here (rows by destination, each row in forward-edge
order) so that the two orders are tied by one permutation.
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Real

import numba as nb
import numpy as np

from graphs import CSRGraph
from graphs._build import count_ids
from graphs._device import array_module, to_host
from graphs._mix import rand_u64, stream_key
from graphs.errors import OptionError
from operators._checks import check_choice

MODELS = ("IC", "LT")
WEIGHTS = ("wc", "trivalency", "graph")
TRIVALENCY = (0.1, 0.01, 0.001)
LT_SLACK = 1e-6  # in-weight sums up to 1 + LT_SLACK pass (float32 rounding of 1/d sums)


@dataclass(frozen=True)
class EdgeView:
    """One direction of the graph with live-edge parameters (arrays on the graph's device)."""

    indptr: object
    indices: object
    p: object  # float32, probability (IC) or LT interval length of each edge
    lo: object  # float32, LT interval start of each edge (zeros for IC)


@dataclass(frozen=True)
class DiffusionModel:
    kind: str  # 'IC' or 'LT'
    n: int
    m: int
    rev: EdgeView
    fwd: EdgeView


def check_model(model: str) -> str:
    return check_choice("model", model.upper() if isinstance(model, str) else model, MODELS)


def weights_spec(weights):
    """A hashable description of ``weights`` ('wc', 'trivalency', 'graph' or a float in [0, 1])."""
    if isinstance(weights, Real) and not isinstance(weights, bool):
        if not 0.0 <= float(weights) <= 1.0:
            raise OptionError(f"a uniform edge probability must be in [0, 1], got {weights}")
        return float(weights)
    return check_choice("weights", weights, WEIGHTS)


def diffusion_model(G: CSRGraph, model: str, weights, seed: int) -> DiffusionModel:
    """The live-edge parameters of ``model`` on ``G`` with ``weights``; built once per graph."""
    kind = check_model(model)
    spec = weights_spec(weights)
    key = ("im", kind, spec, seed if spec == "trivalency" else None)
    return G.derived(repr(key), lambda g: _build(g, kind, spec, seed))


def _build(G: CSRGraph, kind: str, spec, seed: int) -> DiffusionModel:
    xp = array_module(G.indptr)
    n, m = G.n, G.m
    src, dst, w = G.edges()
    # in-edge view: edges ordered by (destination, forward edge id); perm maps its edges to forward ids
    perm = xp.argsort(dst.astype(np.int64) * max(m, 1) + xp.arange(m, dtype=np.int64))
    in_deg = count_ids(dst, n)
    r_indptr = xp.zeros(n + 1, dtype=np.int64)
    xp.cumsum(in_deg, out=r_indptr[1:])
    r_indices = src[perm].astype(G.indices.dtype)
    r_dst = dst[perm]
    if spec == "wc":
        p = (1.0 / in_deg[r_dst]).astype(np.float32)
    elif spec == "trivalency":
        p = xp.asarray(_trivalency(m, seed))[perm]
    elif spec == "graph":
        if w is None:
            raise OptionError("weights='graph' needs a weighted graph (read it with weighted=True)")
        p = w[perm].astype(np.float32)
        bad = xp.flatnonzero((p < 0) | (p > 1) | ~xp.isfinite(p))
        if bad.size:
            e = int(bad[0])
            raise OptionError(
                f"edge probabilities must be in [0, 1]: edge {_label(G, int(r_indices[e]))} -> "
                f"{_label(G, int(r_dst[e]))} has weight {float(p[e])} ({bad.size} such edges)"
            )
    else:
        p = xp.full(m, spec, dtype=np.float32)
    lo = xp.zeros(m, dtype=np.float32)
    if kind == "LT":
        sums = count_ids(r_dst, n, weights=p)
        over = xp.flatnonzero(sums > 1.0 + LT_SLACK)
        if over.size:
            v = int(over[0])
            raise OptionError(
                f"LT needs the in-edge weights of every vertex to sum to at most 1: vertex "
                f"{_label(G, v)} sums to {float(sums[v]):.6g} ({over.size} vertices exceed 1); use "
                "weights='wc' or rescale the weights"
            )
        ends = xp.cumsum(p.astype(np.float64))
        row_base = xp.concatenate([xp.zeros(1), ends])[r_indptr[:-1]]
        lo = (ends - p - row_base[r_dst]).astype(np.float32)
    rev = EdgeView(r_indptr, r_indices, p, lo)
    f_p = xp.empty_like(p)
    f_p[perm] = p
    f_lo = xp.empty_like(lo)
    f_lo[perm] = lo
    fwd = EdgeView(G.indptr, G.indices, f_p, f_lo)
    return DiffusionModel(kind, n, m, rev, fwd)


def _trivalency(m: int, seed: int) -> np.ndarray:
    """0.1, 0.01 or 0.001 per forward edge, uniformly, from the seed's 'trivalency' stream."""
    return np.asarray(TRIVALENCY, dtype=np.float32)[_thirds(np.uint64(stream_key(seed, 0x7F1)), m)]


@nb.njit(cache=True)
def _thirds(key, m):
    out = np.empty(m, dtype=np.int64)
    for e in range(m):
        out[e] = rand_u64(key, np.uint64(e)) % np.uint64(3)
    return out


def _label(G: CSRGraph, v: int):
    return to_host(G.ids)[v].item() if G.ids is not None else v
