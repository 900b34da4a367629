"""Accuracy of top-k PPR answers against exact PPR: precision@k and NDCG@k as in the kPAR paper."""

from __future__ import annotations

import math

import numpy as np


def top_values(exact, k: int) -> np.ndarray:
    """The ``k`` largest values of ``exact`` in decreasing order (all of them when it has fewer): what
    ``precision_at_k`` and ``ndcg_at_k`` read for any k up to this one.

    On a long vector a threshold from a strided sample keeps the sort to the few values above it (two
    passes over the vector; a partition of the whole, slow where most values tie at 0, only when fewer
    than k values reach the threshold). Exact either way: every value above the k-th largest is kept."""
    exact = np.asarray(exact, dtype=np.float64)
    k = min(k, exact.size)
    if not k:
        return exact[:0]
    step = exact.size // SAMPLE
    if step >= 2:
        sample = exact[::step]
        j = min(sample.size, 2 * math.ceil(k / step) + 8)  # about twice k values of the whole reach it
        threshold = np.partition(sample, sample.size - j)[sample.size - j]
        above = np.sort(exact[exact > threshold])[::-1]
        if above.size >= k:
            return above[:k]
        if above.size + np.count_nonzero(exact == threshold) >= k:  # the k-th largest is the threshold
            return np.concatenate([above, np.full(k - above.size, threshold)])
    return np.sort(np.partition(exact, exact.size - k)[exact.size - k :])[::-1]


SAMPLE = 1 << 20  # values of ``top_values``'s sample


def _top(exact, k: int, top) -> np.ndarray:
    """``top`` where it holds at least the k largest values of ``exact``, else ``top_values(exact, k)``."""
    return top_values(exact, k) if top is None or top.size < min(k, exact.size) else top


def precision_at_k(exact, returned, k: int, *, rtol: float = 1e-9, top=None) -> float:
    """Share of the true top k found among the returned vertices (internal ids, at most k).

    With ties at the k-th value every vertex whose exact PPR equals it counts as a true top-k vertex
    (``rtol`` relative slack), so the score does not depend on how ties were broken. A source with fewer
    than k vertices of positive PPR has only those as its top k: the share is of them. ``top``:
    ``top_values(exact, K)`` for some K >= k, made once for several k.
    """
    exact = np.asarray(exact, dtype=np.float64)
    returned = np.asarray(returned)[:k]
    top = _top(exact, k, top)
    if not top.size:
        return 0.0
    kth = top[min(k, top.size) - 1]
    found = (exact[returned] >= kth * (1 - rtol)) & (exact[returned] > 0)
    return float(found.sum()) / max(int((top[:k] > 0).sum()), 1)


def ndcg_at_k(exact, returned, k: int, *, top=None) -> float:
    """sum_i (2^pi(v_i) - 1) / log2(i + 1) over the returned order, divided by the ideal order's sum;
    ``top`` as in ``precision_at_k``."""
    exact = np.asarray(exact, dtype=np.float64)
    returned = np.asarray(returned)[:k]
    disc = 1.0 / np.log2(np.arange(2, k + 2))
    ideal = _top(exact, k, top)[:k]
    z = float((np.expm1(ideal * np.log(2)) * disc[: ideal.size]).sum())
    got = float((np.expm1(exact[returned] * np.log(2)) * disc[: returned.size]).sum())
    return got / z if z > 0 else 1.0
