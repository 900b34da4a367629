"""The k largest entries of each row of a dense non-negative block, ties to the smaller column.

Entries are ranked by their value to RANK_BITS significant bits (``rank_key``: float32's precision, as the
top-k PPR query ranks its estimates), so values that differ only in their last bits, as the same PPR row
from another batch of sources or another GPU does (atomic adds in another order), tie and go by column
alike. The values returned are the entries themselves.

CPU: a partition per row. GPU: the whole block at once; short rows (under 32 k entries) are sorted
there, longer ones are not. The k-th largest
of any k or more distinct entries of a row is at most the row's k-th largest, so the maxima of
``16 k`` strided chunks of the row (columns congruent mod ``16 k``) give a lower bound of the k-th
largest; only the positive entries at or above it are copied to the host and sorted there. One kernel
appends them to a few slots per row, copied back in one piece (a row with more of them than slots is
redone from a mask of the block). A row with fewer than k positive entries has only those: the slots
after them hold column -1 (PAD_VERTEX) and value 0.
"""

from __future__ import annotations

import numpy as np

from graphs._device import array_module, to_host
from operators._gpu.registry import Kernel
from operators._ranked import PAD_VERTEX, clear_padding

RANK_BITS = 24  # significant bits of a value that rank it (float32 has 24)
_DROPPED = (1 << (53 - RANK_BITS)) - 1  # the float64 mantissa bits below them
CHUNKS_PER_K = 16
CAP_PER_K = 8  # candidate slots a row keeps per k on the GPU (the bound lets at least k through)
MAX_GRID_ROWS = 65535  # rows of one candidates launch (its grid's y dimension)


def rank_key(a):
    """Non-negative values (NumPy or CuPy) as float64 truncated to RANK_BITS significant bits: in the
    same order, equal where they differ only below those bits."""
    xp = array_module(a)
    bits = xp.ascontiguousarray(a, dtype=np.float64).view(np.int64)
    return (bits & np.int64(~_DROPPED)).view(np.float64)


def top_entries(block, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Columns (int64) and values of the k largest positive entries of each row, on the host, largest
    first; (-1, 0) in the slots after a row's positive entries."""
    verts, vals = _top_cpu(block, k) if array_module(block) is np else _top_gpu(block, k)
    clear_padding(verts, vals)
    return verts, vals


def _top_cpu(block: np.ndarray, k: int):
    verts = np.empty((block.shape[0], k), dtype=np.int64)
    vals = np.empty((block.shape[0], k), dtype=block.dtype)
    for i, row in enumerate(block):
        key = rank_key(row)
        kth = np.partition(key, key.size - k)[key.size - k]
        above = np.flatnonzero(key > kth)
        cand = np.concatenate([above, np.flatnonzero(key == kth)[: k - above.size]])
        order = cand[np.lexsort((cand, -key[cand]))]
        verts[i], vals[i] = order, row[order]
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
    order = cp.lexsort(cp.stack([cols, -rank_key(vals), cp.repeat(cp.arange(rows, dtype=np.float64), n)]))
    top = order.reshape(rows, n)[:, :k]
    return to_host(top % n).astype(np.int64), to_host(vals[top]).astype(block.dtype)


CANDIDATES_CUDA = r"""
// a value truncated to RANK_BITS significant bits (rank_key)
__device__ __forceinline__ double gj_rank_key(double x) {
    return __longlong_as_double(__double_as_longlong(x) & ~((1LL << (53 - RANK_BITS)) - 1));
}
// Row i's positive entries whose rank key is at or above bound[i]'s, appended to its slots of out (row i
// holds 1 + 2 cap words: the count, then cap columns, then cap values as double bits); blockIdx.y is the row
extern "C" __global__ void gj_top_candidates(const VAL* block, long long ld, long long n, const VAL* bound,
        int cap, long long* out) {
    const int i = blockIdx.y;
    const double b = gj_rank_key((double)bound[i]);
    long long* row = out + (long long)i * (1 + 2LL * cap);
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < n; j += step) {
        const VAL x = block[(long long)i * ld + j];
        if (x > (VAL)0 && gj_rank_key((double)x) >= b) {
            const long long p = (long long)atomicAdd(reinterpret_cast<unsigned long long*>(row), 1ULL);
            if (p < cap) {
                row[1 + p] = j;
                row[1 + cap + p] = __double_as_longlong((double)x);
            }
        }
    }
}
"""


# VAL: the value type of the block
CANDIDATES = Kernel(
    CANDIDATES_CUDA,
    ("gj_top_candidates",),
    defines={"RANK_BITS": RANK_BITS},
    variants=({"VAL": "float"}, {"VAL": "double"}),
    label="top-rows",
)


def _candidates(block, bound, k: int):
    """Per row, the count and the (columns, values) of its positive entries ranked at or above the bound, on
    the host in one copy: at most CAP_PER_K * k of them (a row with more is redone by ``_top_gpu_mask``)."""
    import cupy as cp

    rows, n = block.shape
    cap = CAP_PER_K * k
    out = cp.zeros((rows, 1 + 2 * cap), dtype=cp.int64)
    kernel = CANDIDATES.get("gj_top_candidates", VAL="float" if block.dtype == np.float32 else "double")
    grid = (max(1, min(int(n + 255) // 256, 1024)), rows)
    ld = block.strides[0] // block.itemsize
    bound = cp.ascontiguousarray(bound, dtype=block.dtype)  # a column of the sorted maxima: strided
    kernel(grid, (256,), (block, np.int64(ld), np.int64(n), bound, np.int32(cap), out))
    out = to_host(out)
    return out[:, 0], out[:, 1 : 1 + cap], out[:, 1 + cap :].view(np.float64)


def _top_gpu(block, k: int):
    rows, n = block.shape
    if n < 2 * CHUNKS_PER_K * k:
        return _sort_rows_gpu(block, k)
    if rows > MAX_GRID_ROWS or block.strides[1] != block.itemsize:
        return _top_gpu_mask(block, k)
    count, cols, vals = _candidates(block, _lower_bound(block, k), k)
    verts = np.empty((rows, k), dtype=np.int64)
    top = np.zeros((rows, k), dtype=block.dtype)
    over = count > cols.shape[1]
    for i in np.flatnonzero(~over):
        c, v = cols[i, : count[i]], vals[i, : count[i]]
        order = np.lexsort((c, -rank_key(v)))[:k]
        _fill(verts[i], top[i], c[order], v[order].astype(block.dtype), n, k)
    if over.any():
        redo = np.flatnonzero(over)
        verts[redo], top[redo] = _top_gpu_mask(block[redo], k)
    return verts, top


def _fill(verts, vals, c, v, n: int, k: int) -> None:
    """A row's top k from its first ``take`` (sorted) entries; with fewer than k positive entries,
    padding (PAD_VERTEX, 0) follows."""
    take = min(k, c.size)
    verts[:take], vals[:take] = c[:take], v[:take]
    verts[take:], vals[take:] = PAD_VERTEX, 0


def _top_gpu_mask(block, k: int):
    """Every row by a mask of the entries at or above its bound (rows of many such entries)."""
    import cupy as cp

    rows, n = block.shape
    bound = _lower_bound(block, k)
    r, c = cp.nonzero((rank_key(block) >= rank_key(bound)[:, None]) & (block > 0))
    v = to_host(block[r, c])
    r, c = to_host(r), to_host(c)
    order = np.lexsort((c, -rank_key(v), r))
    r, c, v = r[order], c[order].astype(np.int64), v[order]
    starts = np.searchsorted(r, np.arange(rows + 1))
    verts = np.empty((rows, k), dtype=np.int64)
    vals = np.zeros((rows, k), dtype=block.dtype)
    for i in range(rows):
        lo, hi = starts[i], starts[i + 1]
        _fill(verts[i], vals[i], c[lo:hi], v[lo:hi], n, k)
    return verts, vals
