"""Accuracy of top-k PPR answers against exact PPR: precision@k and NDCG@k as in the kPAR paper."""

from __future__ import annotations

import numpy as np


def precision_at_k(exact, returned, k: int, *, rtol: float = 1e-9) -> float:
    """Share of the true top k found among the returned vertices (internal ids, at most k).

    With ties at the k-th value every vertex whose exact PPR equals it counts as a true top-k vertex
    (``rtol`` relative slack), so the score does not depend on how ties were broken. A source with fewer
    than k vertices of positive PPR has only those as its top k: the share is of them.
    """
    exact = np.asarray(exact, dtype=np.float64)
    returned = np.asarray(returned)[:k]
    kth = np.partition(exact, exact.size - k)[exact.size - k]
    found = (exact[returned] >= kth * (1 - rtol)) & (exact[returned] > 0)
    return float(found.sum()) / max(min(k, int((exact > 0).sum())), 1)


def ndcg_at_k(exact, returned, k: int) -> float:
    """sum_i (2^pi(v_i) - 1) / log2(i + 1) over the returned order, divided by the ideal order's sum."""
    exact = np.asarray(exact, dtype=np.float64)
    returned = np.asarray(returned)[:k]
    disc = 1.0 / np.log2(np.arange(2, k + 2))
    ideal = np.sort(exact)[::-1][:k]
    z = float((np.expm1(ideal * np.log(2)) * disc[: ideal.size]).sum())
    got = float((np.expm1(exact[returned] * np.log(2)) * disc[: returned.size]).sum())
    return got / z if z > 0 else 1.0
