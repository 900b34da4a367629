"""Tiny graphs with hand-checked properties, shared by tests, docs and notebooks."""

from __future__ import annotations

import numpy as np

from .csr import CSRGraph
from .edges import from_edges


def two_cycle() -> CSRGraph:
    """0 <-> 1. PageRank is (1/2, 1/2) for any alpha."""
    return from_edges(np.array([0, 1]), np.array([1, 0]), renumber=False)


def chain(n: int = 3) -> CSRGraph:
    """0 -> 1 -> ... -> n-1; the last vertex is dangling."""
    return from_edges(np.arange(n - 1), np.arange(1, n), n=n, renumber=False)


def star_in(leaves: int = 4) -> CSRGraph:
    """Every leaf 1..leaves points to the centre 0 (the centre is dangling)."""
    return from_edges(np.arange(1, leaves + 1), np.zeros(leaves, dtype=np.int64), renumber=False)


def labeled() -> CSRGraph:
    """String labels: a->b, a->c, b->c, c->a, d->c, d->e.

    Internal ids follow first appearance in (sources, then targets): a=0, b=1, c=2, d=3, e=4.
    'e' has no out-edges (dangling) and 'd' no in-edges.
    """
    src = np.array(["a", "a", "b", "c", "d", "d"], dtype=object)
    dst = np.array(["b", "c", "c", "a", "c", "e"], dtype=object)
    return from_edges(src, dst)


def weighted_triangle() -> CSRGraph:
    """0 -> 1 (w=1), 0 -> 2 (w=3), 1 -> 2 (w=2), 2 -> 0 (w=1)."""
    return from_edges(
        np.array([0, 0, 1, 2]), np.array([1, 2, 2, 0]), np.array([1.0, 3.0, 2.0, 1.0]), renumber=False
    )
