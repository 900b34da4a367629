"""Degree order: the graph renumbered by decreasing degree, and vectors carried into and out of it.

PageRank (``reorder=True``) gathers ``x / d_out`` along in-edges; with the hubs first those gathers
share cache lines. cuGraph renumbers its graphs in the same spirit when it builds them. There the copy
and its transpose cost about twice the graph's memory, and building them costs more than one run
saves: worth it for repeated runs on one graph, hence kept with the graph (``degree_ordered``) and not
the default.

The kPAR index (``build_ppr_index(order='degree')``, its default from 2^22 vertices on) holds its own
renumbered copy (``renumbered``): a query's pushes add into the records of hubs, which then share
sectors and stay in L2 (``benchmarks/RESULTS.md``, top-k section).
"""

from __future__ import annotations

import numpy as np

from graphs import CSRGraph
from graphs._device import array_module
from graphs.reorder import order_permutation, renumber

KEY = "pagerank_degree_order"


def degree_order(g: CSRGraph, by: str = "degree") -> tuple[CSRGraph, np.ndarray]:
    """``(R, perm)``: ``g`` renumbered by decreasing degree (``by`` as in ``graphs.reorder``, ties by id,
    the same on the CPU and the GPU: both sorts are stable); new vertex i is old vertex ``perm[i]``
    (int64, on ``g``'s device)."""
    perm = order_permutation(g, by).astype(np.int64, copy=False)
    return renumber(g, perm), perm


def renumbered(G: CSRGraph, by: str) -> tuple[CSRGraph, np.ndarray | None]:
    """``degree_order(G, by)``, or ``(G, None)`` when ``G`` is in that order already (no copy built)."""
    perm = order_permutation(G, by).astype(np.int64, copy=False)
    if bool((perm == array_module(perm).arange(G.n)).all()):
        return G, None
    return renumber(G, perm), perm


def degree_ordered(G: CSRGraph) -> tuple[CSRGraph, np.ndarray]:
    """``degree_order(G)``, built once and kept with ``G`` (PageRank's ``reorder=True``)."""
    return G.derived(KEY, degree_order)


def into(vec, perm):
    """A vector over ``G``'s ids as one over the reordered ids, on ``perm``'s device (None stays None)."""
    return None if vec is None else array_module(perm).asarray(vec)[perm]


def back(x, perm):
    """A result over the reordered ids as a vector over ``G``'s ids (``x`` and ``perm`` on one device)."""
    out = array_module(x).empty_like(x)
    out[perm] = x
    return out
