"""Finding original vertex labels among a graph's labels (``CSRGraph.internal_ids``)."""

from __future__ import annotations

import math

import numpy as np


def find_labels(ids: np.ndarray, derived, flat: np.ndarray) -> np.ndarray:
    """Internal ids (int64) of the labels ``flat`` among a graph's labels ``ids``, -1 where absent.

    Integer labels are found by binary search in a sorted copy that the graph keeps (``derived``):
    no per-call set-up, which a pandas lookup pays even for one label. Other labels go through a
    pandas Index, also kept.
    """
    signed = _as_int64(flat) if ids.dtype.kind == "i" else None
    if signed is not None:
        return _find_sorted(*derived("label_sorted", lambda g: _sorted_labels(ids)), signed)
    index = derived("label_index", lambda g: _pandas().Index(ids))
    if flat.dtype == object and index.dtype.kind in "iu" and _all_ints(flat):
        try:  # else pandas casts the whole index to object on every call
            flat = flat.astype(index.dtype)
        except OverflowError:  # beyond int64: looked up as objects (and not found)
            pass
    return np.asarray(index.get_indexer(flat), dtype=np.int64)


def _pandas():
    import pandas as pd

    return pd


def _as_int64(values: np.ndarray) -> np.ndarray | None:
    """``values`` as int64 when they are all integers that fit; None otherwise (the general lookup)."""
    if values.dtype.kind == "i":
        return values.astype(np.int64, copy=False)
    if values.dtype.kind == "u":
        return values.astype(np.int64) if values.size == 0 or values.max() <= np.iinfo(np.int64).max else None
    if values.dtype == object and _all_ints(values):
        try:
            return np.array(values, dtype=np.int64)
        except OverflowError:
            return None
    return None


def _sorted_labels(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The integer labels sorted (int64), and the internal id of each."""
    order = np.argsort(ids, kind="stable")
    return np.ascontiguousarray(ids[order], dtype=np.int64), order.astype(np.int64)


def _find_sorted(keys: np.ndarray, order: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Internal ids of ``values`` among the sorted unique labels ``keys`` (-1 where absent)."""
    if keys.size == 0:
        return np.full(values.shape, -1, dtype=np.int64)
    at = np.minimum(np.searchsorted(keys, values), keys.size - 1)
    return np.where(keys[at] == values, order[at], -1).astype(np.int64)


def _all_ints(values: np.ndarray) -> bool:
    """Every element an integer (not a bool): safe to cast to an integer dtype without changing it."""
    return all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in values)


def whole_label(x) -> bool:
    """An integer, or a float holding one (not a bool, not a string): a label of an unlabelled graph."""
    if isinstance(x, bool | np.bool_):
        return False
    if isinstance(x, int | np.integer):
        return True
    return isinstance(x, float | np.floating) and math.isfinite(x) and x == int(x)
