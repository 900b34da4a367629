"""Streamed reading of a Parquet edge dataset into one CSRGraph, never holding its edge list whole.

Two passes over the files' record batches (three for an undirected graph, whose reversed copies are
placed after every edge, as ``assemble`` orders them): the first checks every batch and counts
out-degrees (so finds n), the next places each edge's destination at its row's cursor in the
preallocated CSR; then each row is sorted. The host holds the CSR (``indices``: 4 bytes an edge
while ids fit in int32, plus float32 weights), two vertex arrays (row pointer and cursors, 8 bytes a
vertex each) and one batch, never the dataset's edge list (16 bytes an edge as int64 pairs) nor the
COO -> CSR build's copies of it; a GPU graph is then copied to the device once. The result equals
``from_edges`` of the files' edges in the same order (rows sorted by column, equal edges in input
order, ``dedupe`` keeping the first), for integer vertex ids ``0..n-1``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numba as nb
import numpy as np

from ._build import _dedupe_sorted_cpu, index_dtype
from ._device import free_memory, resolve_device
from .csr import CSRGraph
from .edges import first_bad_weight
from .errors import GraphFormatError, InsufficientMemoryError
from .read import parquet_columns

BATCH_ROWS = 1 << 22  # rows of a record batch read at once
PARQUET_SUFFIXES = (".parquet", ".pq")


def dataset_parquet_files(path) -> list[str] | None:
    """The Parquet files of a dataset folder, sorted by name; None when ``path`` is not a folder."""
    path = Path(path)
    if not path.is_dir():
        return None
    files = sorted(str(p) for p in path.iterdir() if p.is_file() and p.suffix.lower() in PARQUET_SUFFIXES)
    if not files:
        raise GraphFormatError(
            path, None, "expected a folder of Parquet edge files (.parquet, .pq), found none"
        )
    others = [p.name for p in path.iterdir() if p.is_file() and p.suffix.lower() not in PARQUET_SUFFIXES]
    if [o for o in others if not o.startswith((".", "_"))]:
        raise GraphFormatError(
            path, None, f"expected only Parquet edge files in the folder, found also {sorted(others)[:3]}"
        )
    return files


def read_parquet_dataset(
    path,
    *,
    src_col: int | str = 0,
    dst_col: int | str = 1,
    weight_col: int | str | None = None,
    directed: bool = True,
    dedupe: bool = False,
    self_loops: bool = True,
    n: int | None = None,
    device: str = "cpu",
    batch_rows: int = BATCH_ROWS,
) -> CSRGraph:
    """A CSRGraph from a folder of Parquet edge files (or a list of them), read batch by batch.

    Parameters
    ----------
    path : folder or list of paths
        The dataset's files (a folder: its ``.parquet`` / ``.pq`` files in name order; files starting
        with ``.`` or ``_``, such as ``_SUCCESS`` or ``_metadata``, are left out).
    src_col, dst_col, weight_col : int or str
        Columns by position or name, as in ``read_edgelist`` (the default positions give way to
        columns named as an edge's ends: ``src``/``dst``, ``source``/``target``, ...). Vertex ids must
        be integers >= 0: vertex i is id i (labels need ``read_edgelist`` or the ingest job).
    directed, dedupe, self_loops : bool
        As in ``read_edgelist`` (``dedupe`` writes the compacted rows to new arrays: one more copy of
        the CSR's indices, briefly).
    n : int, optional
        Vertices (default: the largest id + 1); an id >= n is an error naming its file and row.
    device : {'cpu', 'gpu', 'auto'}
        Where the graph goes once built (on the host).
    batch_rows : int
        Rows read at once.
    """
    listed = isinstance(path, list | tuple)
    files = [os.fspath(p) for p in path] if listed else dataset_parquet_files(path)
    if files is None:
        raise GraphFormatError(path, None, "expected a folder of Parquet edge files")
    device = resolve_device(device)
    weighted = weight_col is not None
    columns = [parquet_columns(f, src_col, dst_col, weight_col, labels=False)[0] for f in files]
    rows = sum(_rows(f) for f in files) * (1 if directed else 2)
    need = rows * (4 + (4 if weighted else 0))  # at least: int32 indices (and float32 weights)
    free = free_memory("cpu")
    if need > free:
        raise InsufficientMemoryError(
            f"reading the Parquet dataset {path} ({rows:,} stored edges)",
            need,
            free,
            "run on a machine with more memory, or partition it over workers (pagerank --partitions)",
        )
    deg = np.zeros(max(n or 0, 1), dtype=np.int64)
    top = -1
    for f, cols in zip(files, columns, strict=True):
        for start, src, dst, w in _batches(f, cols, batch_rows):
            _check(f, start, src, dst, w, n)
            if src.size:
                top = max(top, int(src.max()), int(dst.max()))
            if top >= deg.size:
                deg = np.concatenate([deg, np.zeros(max(top + 1, 2 * deg.size) - deg.size, dtype=np.int64)])
            _count(src, dst, deg, directed, self_loops)
    n = top + 1 if n is None else n
    if n <= 0:
        raise GraphFormatError(path, None, "expected edges, got a dataset with no rows")
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(deg[:n], out=indptr[1:])
    del deg
    indices = np.empty(int(indptr[-1]), dtype=index_dtype(n))
    out_w = np.empty(indices.size if weighted else 0, dtype=np.float32)
    cursor = indptr[:-1].copy()
    for reverse in (False, True) if not directed else (False,):  # as assemble: every edge, then reversed
        for f, cols in zip(files, columns, strict=True):
            for _, src, dst, w in _batches(f, cols, batch_rows):
                has_w = w is not None
                w = w if has_w else np.empty(0, dtype=np.float32)
                _place(
                    dst if reverse else src,
                    src if reverse else dst,
                    w,
                    has_w,
                    cursor,
                    indices,
                    out_w,
                    reverse,
                    self_loops,
                )
    del cursor
    _sort_rows(indptr, indices, out_w, weighted)
    if dedupe:
        indptr, indices, out_w = _dedupe_sorted_cpu(indptr, indices, out_w, weighted)
    g = CSRGraph(indptr, indices, out_w if weighted else None, directed=directed, validate=False)
    return g.to(device)


def _rows(path: str) -> int:
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).metadata.num_rows


def _batches(path: str, cols: list[str], batch_rows: int):
    """``(first row, src, dst, weights or None)`` of each record batch of ``path``, as int64 / float32."""
    import pyarrow.parquet as pq

    start = 0
    # pre_buffer=False: pyarrow reads each row group as it decodes it instead of buffering a file's row
    # groups ahead, so the host holds about one decoded row group at a time
    for batch in pq.ParquetFile(path, pre_buffer=False).iter_batches(batch_size=batch_rows, columns=cols):
        arrays = []
        for k, name in enumerate(cols):
            col = batch.column(k)
            if col.null_count:
                row = start + int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
                expected = f"row {row}: expected a value in column {name!r}, got null"
                raise GraphFormatError(path, None, expected)
            arrays.append(col.to_numpy().astype(np.int64 if k < 2 else np.float32, copy=False))
        yield start, arrays[0], arrays[1], (arrays[2] if len(arrays) > 2 else None)
        start += batch.num_rows


def _check(path, start, src, dst, w, n) -> None:
    """Ids >= 0 (and < n when given), finite non-negative weights: else the file and row."""
    for a in (src, dst):
        bad = np.flatnonzero(a < 0) if n is None else np.flatnonzero((a < 0) | (a >= n))
        if bad.size:
            want = "an id >= 0" if n is None else f"an id in [0, {n})"
            row, got = start + int(bad[0]), int(a[bad[0]])
            raise GraphFormatError(path, None, f"row {row}: expected {want}, got {got}")
    if w is not None:
        i = first_bad_weight(w)
        if i is not None:
            got = float(w[i])
            raise GraphFormatError(
                path, None, f"row {start + i}: expected a finite, non-negative edge weight, got {got!r}"
            )


@nb.njit(cache=True)
def _count(src, dst, deg, directed, self_loops):
    for i in range(src.size):
        s, d = src[i], dst[i]
        if s == d and not self_loops:
            continue
        deg[s] += 1
        if not directed and s != d:
            deg[d] += 1


@nb.njit(cache=True)
def _place(src, dst, w, has_w, cursor, indices, out_w, reversed_, self_loops):
    """Each edge s -> d at its row's cursor (the reversed copies of an undirected graph leave out
    self-loops, stored once)."""
    for i in range(src.size):
        s, d = src[i], dst[i]
        if s == d and (reversed_ or not self_loops):
            continue
        p = cursor[s]
        cursor[s] = p + 1
        indices[p] = d
        if has_w:
            out_w[p] = w[i]


@nb.njit(parallel=True, cache=True)
def _sort_rows(indptr, indices, out_w, has_w):
    """Each row by column; equal columns keep their input order (their weights follow them)."""
    for u in nb.prange(indptr.size - 1):
        lo, hi = indptr[u], indptr[u + 1]
        if hi - lo < 2:
            continue
        if has_w:
            order = np.argsort(indices[lo:hi], kind="mergesort")
            indices[lo:hi] = indices[lo:hi][order]
            out_w[lo:hi] = out_w[lo:hi][order]
        else:
            indices[lo:hi] = np.sort(indices[lo:hi])
