"""The k largest entries of each row of a dense non-negative block, ties to the smaller column.

CPU: a partition per row. GPU: the whole block at once; short rows (under 32 k entries) are sorted
there, longer ones are not. The k-th largest
of any k or more distinct entries of a row is at most the row's k-th largest, so the maxima of
``16 k`` strided chunks of the row (columns congruent mod ``16 k``) give a lower bound of the k-th
largest; only the positive entries at or above it are copied to the host and sorted there. A row
with fewer than k positive entries gets its zeros of the smallest columns after them.
"""

from __future__ import annotations

import numpy as np

from graphs._device import array_module, to_host

CHUNKS_PER_K = 16


def top_entries(block, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Columns (int64) and values of the k largest entries of each row, on the host, largest first."""
    if array_module(block) is np:
        return _top_cpu(block, k)
    return _top_gpu(block, k)


def _top_cpu(block: np.ndarray, k: int):
    verts = np.empty((block.shape[0], k), dtype=np.int64)
    vals = np.empty((block.shape[0], k), dtype=block.dtype)
    for i, row in enumerate(block):
        kth = np.partition(row, row.size - k)[row.size - k]
        above = np.flatnonzero(row > kth)
        cand = np.concatenate([above, np.flatnonzero(row == kth)[: k - above.size]])
        v = row[cand]
        order = np.lexsort((cand, -v))
        verts[i], vals[i] = cand[order], v[order]
    return verts, vals


def _lower_bound(block, k: int):
    """Per row, a value at most its k-th largest entry (rows of at least 2 * 16 k entries)."""
    import cupy as cp

    rows, n = block.shape
    chunks = CHUNKS_PER_K * k
    q = n // chunks
    maxima = block[:, : q * chunks].reshape(rows, q, chunks).max(axis=1)  # chunk j: columns = j mod chunks
    return cp.sort(maxima, axis=1)[:, chunks - k]


def _sort_rows_gpu(block, k: int):
    """Short rows: every row sorted on the GPU (by row, value descending, column)."""
    import cupy as cp

    rows, n = block.shape
    vals = block.astype(np.float64).ravel()
    cols = cp.tile(cp.arange(n, dtype=np.float64), rows)
    order = cp.lexsort(cp.stack([cols, -vals, cp.repeat(cp.arange(rows, dtype=np.float64), n)]))
    top = order.reshape(rows, n)[:, :k]
    return to_host(top % n).astype(np.int64), to_host(vals[top]).astype(block.dtype)


def _top_gpu(block, k: int):
    import cupy as cp

    rows, n = block.shape
    if n < 2 * CHUNKS_PER_K * k:
        return _sort_rows_gpu(block, k)
    bound = _lower_bound(block, k)
    r, c = cp.nonzero((block >= bound[:, None]) & (block > 0))
    v = to_host(block[r, c])
    r, c = to_host(r), to_host(c)
    order = np.lexsort((c, -v, r))
    r, c, v = r[order], c[order].astype(np.int64), v[order]
    starts = np.searchsorted(r, np.arange(rows + 1))
    verts = np.empty((rows, k), dtype=np.int64)
    vals = np.zeros((rows, k), dtype=block.dtype)
    for i in range(rows):
        lo, hi = starts[i], starts[i + 1]
        take = min(k, hi - lo)
        verts[i, :take], vals[i, :take] = c[lo : lo + take], v[lo : lo + take]
        if take < k:  # every positive entry is in: zeros of the smallest columns follow
            free = np.setdiff1d(np.arange(min(n, k + take)), c[lo:hi], assume_unique=True)
            verts[i, take:] = free[: k - take]
    return verts, vals
