"""Accuracy of top-k PPR answers against exact PPR: precision@k and NDCG@k as in the kPAR paper."""

from __future__ import annotations

import numpy as np


def precision_at_k(exact, returned, k: int, *, rtol: float = 1e-9) -> float:
    """Share of the k returned vertices (internal ids) that belong to the true top k.

    With ties at the k-th value every vertex whose exact PPR equals it counts as a true top-k vertex
    (``rtol`` relative slack), so the score does not depend on how ties were broken.
    """
    exact = np.asarray(exact, dtype=np.float64)
    returned = np.asarray(returned)[:k]
    kth = np.partition(exact, exact.size - k)[exact.size - k]
    return float((exact[returned] >= kth * (1 - rtol)).sum()) / k


def ndcg_at_k(exact, returned, k: int) -> float:
    """sum_i (2^pi(v_i) - 1) / log2(i + 1) over the returned order, divided by the ideal order's sum."""
    exact = np.asarray(exact, dtype=np.float64)
    returned = np.asarray(returned)[:k]
    disc = 1.0 / np.log2(np.arange(2, k + 2))
    ideal = np.sort(exact)[::-1][:k]
    z = float((np.expm1(ideal * np.log(2)) * disc[: ideal.size]).sum())
    got = float((np.expm1(exact[returned] * np.log(2)) * disc[: returned.size]).sum())
    return got / z if z > 0 else 1.0
