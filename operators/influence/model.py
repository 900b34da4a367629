"""Diffusion models of influence maximization as arrays: edge probabilities in both directions.

Every cascade in graphjobs is a reachability question in a random *live-edge graph* drawn from
counter-based random numbers, so the CPU and the GPU draw the same worlds for the same key:

- IC: edge ``e`` of the in-edge view is live when ``rand_unit(key, e) < p[e]``, except in a row whose
  edges share one probability ``q`` (every row under weighted cascade or a uniform probability: the
  view's ``equal_rows``) with ``0 < q < 1`` and ``d * q <= SKIP_LIVE`` for its ``d`` edges (constants of
  ``cpu``, where Numba's cache reads them). Such a row
  of vertex ``v`` draws its live edges by geometric skips (SUBSIM: Guo, Liu, Wei, Chen, SIGMOD 2020):
  draw ``i`` is ``u = rand_unit(key, SKIP_DRAWS | v << 32 | i)`` (the top bit keeps these counters
  apart from every edge id), the gap ``floor(log(u) / log(1 - q))`` edges are passed over and the
  next one is live, until the row ends. The live edges have the same law (each edge independently
  with probability q), and the row costs its live edges instead of its degree. Both logarithms are
  ``cpu.log_unit`` / ``cpu.log_one_minus`` (series in rounded +, -, *, / only, mirrored on the GPU), so
  both sides compute every gap to the same bit.
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
from graphs._build import count_ids, expand_rows, in_edge_order_cpu
from graphs._device import array_module
from graphs._large import cumsum
from graphs._mix import rand_u64, stream_key
from graphs.errors import OptionError
from operators._checks import check_choice
from operators._gpu.memory import MemoryEstimate, graph_bytes

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
    equal_rows: bool = False  # every row's edges share one p (IC rows may then be drawn by skips)


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
    key = repr(("im", kind, spec, seed if spec == "trivalency" else None))
    if not G.has_derived(key):
        build_estimate(G, kind).check("a GPU with more memory, or --device cpu")
    return G.derived(key, lambda g: _build(g, kind, spec, seed))


def build_estimate(G: CSRGraph, kind: str) -> MemoryEstimate:
    """The memory ``diffusion_model`` needs while it builds on ``G``'s device: the graph and
    ``model_build_bytes``."""
    return MemoryEstimate(
        f"the {check_model(kind)} diffusion model of n={G.n:,}, m={G.m:,}",
        G.device,
        (
            ("graph", graph_bytes(G.n, G.m, weighted=G.weighted)),
            ("model build", model_build_bytes(G.n, G.m, kind)),
        ),
    )


def model_bytes(n: int, m: int, kind: str) -> int:
    """Bytes of a built ``DiffusionModel`` beyond the graph's own arrays: the in-edge view's row pointer
    and sources, and ``p`` in both edge orders; LT adds ``lo`` in both (IC's two are one array of zeros)."""
    return 8 * (n + 1) + (20 if check_model(kind) == "LT" else 16) * m


def model_build_bytes(n: int, m: int, kind: str) -> int:
    """The most bytes ``diffusion_model`` holds at once while it builds, the graph apart: the sort of the
    edge keys (8 bytes an edge, and as much for the sort's buffer), or the built arrays with the
    permutation and the in-edge destinations (8 bytes an edge more; LT's interval ends, 16 more)."""
    built = model_bytes(n, m, kind) + 8 * m + 8 * n
    if check_model(kind) == "LT":
        built += 16 * m
    return max(16 * m + 8 * n, built)


_KEY_CHUNK = 1 << 24  # edges whose ids are added to the sort keys at once (bounds that temporary)


def _build(G: CSRGraph, kind: str, spec, seed: int) -> DiffusionModel:
    xp = array_module(G.indptr)
    n, m = G.n, G.m
    dst = G.indices
    # the in-edge view orders edges by (destination, forward edge id); perm maps its places to forward ids
    if xp is np:  # a stable counting sort by destination
        r_indptr, r_indices, perm = in_edge_order_cpu(G.indptr, dst, n)
        in_deg = np.diff(r_indptr)
        r_dst = expand_rows(r_indptr, m)
    else:  # the keys dst * m + id are distinct: sorted in place, key % m is the forward id at each place
        key = dst.astype(np.int64)
        key *= max(m, 1)
        for lo_e in range(0, m, _KEY_CHUNK):
            hi_e = min(m, lo_e + _KEY_CHUNK)
            key[lo_e:hi_e] += xp.arange(lo_e, hi_e, dtype=np.int64)
        key.sort()
        key %= max(m, 1)
        perm = key.astype(np.int32) if m < 2**31 else key
        del key
        in_deg = count_ids(dst, n)
        r_indptr = xp.zeros(n + 1, dtype=np.int64)
        xp.cumsum(in_deg, out=r_indptr[1:])
        src = G.edges()[0]
        r_indices = src[perm].astype(G.indices.dtype, copy=False)
        del src
        r_dst = dst[perm]
    if spec == "wc":
        inv = (1.0 / xp.maximum(in_deg, 1)).astype(np.float32)  # a vertex with in-edges has in_deg >= 1
        p = inv[r_dst]
        del inv
    elif spec == "trivalency":
        p = xp.asarray(_trivalency(m, seed))[perm]
    elif spec == "graph":
        w = G.weights
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
    del in_deg
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
        del sums
        # each in-edge's interval starts where the row's earlier in-edges' lengths end
        ends = cumsum(p, dtype=np.float64)
        row_base = xp.concatenate([xp.zeros(1), ends])[r_indptr[:-1]]
        ends -= p
        ends -= row_base[r_dst]
        lo = ends.astype(np.float32)
        del ends, row_base
        f_lo = xp.empty_like(lo)
        f_lo[perm] = lo
    else:
        lo = f_lo = xp.zeros(m, dtype=np.float32)  # IC reads no interval: one array serves both views
    del r_dst
    equal = kind == "IC" and spec not in ("trivalency", "graph")  # weighted cascade or one probability
    rev = EdgeView(r_indptr, r_indices, p, lo, equal_rows=equal)
    f_p = xp.empty_like(p)
    f_p[perm] = p
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
    return G.labels_of(v).item()
