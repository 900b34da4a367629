"""Per-source rankings of at most k rows (top-k PPR, ``ppr(topk=)``, SimRank top-k): the shared contract.

A ranking is a pair of (sources, k) arrays, vertices and values, each row in decreasing value. Only
rows of positive value are real: a source that reaches fewer than k vertices (value 0 for the rest)
has fewer. Its ``count`` real rows come first; every slot after them holds vertex PAD_VERTEX and value 0,
never a vertex id. The long tables (``long_rows``, ``ranked_frame``), ``ranked_dict`` and the jobs' Parquet
files hold the real rows only.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

PAD_VERTEX = -1  # the vertex of a slot after a source's real rows


def real_counts(values: np.ndarray) -> np.ndarray:
    """Per row of ``values`` (host, (sources, k), decreasing), how many leading entries are positive."""
    values = np.asarray(values)
    if values.ndim != 2 or values.shape[1] == 0:
        return np.zeros(values.shape[0] if values.ndim else 0, dtype=np.int64)
    positive = values > 0
    return np.where(positive.all(axis=1), values.shape[1], positive.argmin(axis=1)).astype(np.int64)


def clear_padding(vertices: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Set every slot after a row's real rows to (PAD_VERTEX, 0), in place; returns the counts."""
    counts = real_counts(values)
    pad = np.arange(values.shape[1]) >= counts[:, None]
    if pad.any():
        vertices[pad] = PAD_VERTEX
        values[pad] = 0
    return counts


def padded_labels(ids: np.ndarray, vertices: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The labels ``ids[v]`` of the internal ids ``vertices``, PAD_VERTEX in the slots after ``counts``."""
    pad = np.arange(vertices.shape[1]) >= np.asarray(counts)[:, None]
    labels = np.asarray(ids)[np.where(pad, 0, vertices)]
    if pad.any():
        labels = labels if labels.dtype.kind in "iO" else labels.astype(object)  # -1 fits
        labels[pad] = PAD_VERTEX
    return labels


def long_rows(sources, vertices, values, counts) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(source, rank, vertex, value) columns of the real rows only, sources in order, ranks from 1."""
    counts = np.asarray(counts, dtype=np.int64)
    k = vertices.shape[1]
    real = (np.arange(k) < counts[:, None]).reshape(-1)
    rank = np.tile(np.arange(1, k + 1, dtype=np.int32), len(counts))[real]
    return np.repeat(np.asarray(sources), counts), rank, vertices.reshape(-1)[real], values.reshape(-1)[real]


def ranked_frame(sources, vertices, values, counts, name: str):
    """A pandas DataFrame with columns ``source``, ``rank`` (from 1), ``vertex`` and ``name``: each
    source's real rows (the ``to_frame()`` of the rankings and ``ppr(topk=, as_frame=True)``)."""
    import pandas as pd

    source, rank, vertex, value = long_rows(sources, vertices, values, counts)
    return pd.DataFrame({"source": source, "rank": rank, "vertex": vertex, name: value})


def ranked_dict(sources, vertices, values, counts) -> dict:
    """``{source: {vertex: value}}`` of the real rows, in decreasing value (NetworkX's nested shape, as
    ``networkx.simrank_similarity(G)`` returns)."""
    out = {}
    for i, s in enumerate(np.asarray(sources).tolist()):
        c = int(counts[i])
        row = zip(np.asarray(vertices[i, :c]).tolist(), np.asarray(values[i, :c]).tolist(), strict=True)
        out[s] = dict(row)
    return out


class RankedRows:
    """``row(i)``, ``to_frame()`` and ``to_dict()`` of a batch's answers: the fields ``sources``,
    ``vertices``, ``counts`` and the values in the field named ``values_field``, written as the column
    ``values_column``."""

    values_field: ClassVar[str]
    values_column: ClassVar[str]

    def row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(vertices, values) of source i's real rows, in decreasing value."""
        c = int(self.counts[i])
        return self.vertices[i, :c], getattr(self, self.values_field)[i, :c]

    def to_frame(self):
        """Long table with columns source, rank, vertex and the values (pandas): the real rows only."""
        values = getattr(self, self.values_field)
        return ranked_frame(self.sources, self.vertices, values, self.counts, self.values_column)

    def to_dict(self) -> dict:
        """``{source: {vertex: value}}`` of the real rows, each in decreasing value (the nested shape of
        ``networkx.simrank_similarity(G)``, restricted to the top k)."""
        return ranked_dict(self.sources, self.vertices, getattr(self, self.values_field), self.counts)
