"""Array kernels behind CSRGraph: COO -> CSR, transpose, edge-row expansion.

Rows come out sorted by column, and equal (row, column) pairs keep their input order, so the CSR
of a given edge multiset is canonical and ``dedupe`` keeps the first occurrence of an edge.
CPU: two stable counting-sort passes in Numba (by destination, then by source), O(m + n).
GPU: one stable radix sort of 64-bit keys ``src * n + dst`` in CuPy.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ._device import array_module, import_cupy
from ._kernel import Kernel, launch_config, sm_count
from ._large import compress, cumsum

INT32_LIMIT = 2**31 - 1


def index_dtype(n: int) -> np.dtype:
    """int32 column indices while every vertex id fits, int64 beyond."""
    return np.dtype(np.int32) if n <= INT32_LIMIT else np.dtype(np.int64)


COUNT_CUDA = r"""
extern "C" __global__ void gj_count_ids(const ID* x, long long size, unsigned long long* counts) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < size; i += stride)
        atomicAdd(&counts[x[i]], 1ULL);
}

extern "C" __global__ void gj_sum_ids(const ID* x, const W* w, long long size, double* sums) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < size; i += stride)
        atomicAdd(&sums[x[i]], (double)w[i]);
}
"""

COUNT = Kernel(
    COUNT_CUDA,
    ("gj_count_ids", "gj_sum_ids"),
    variants=tuple({"ID": i, "W": w} for i in ("int", "long long") for w in ("float", "double")),
    label="count-ids",
)


def count_ids(x, n: int, weights=None):
    """How often each id in ``[0, n)`` occurs in ``x`` (int64), or the sum of its ``weights`` (float64):
    ``numpy.bincount(x, weights, minlength=n)`` for ids known to be in range, on ``x``'s device. On the
    GPU it takes ``n`` counters and nothing else (atomic adds), where CuPy's bincount may ask for
    temporary memory far beyond its result."""
    xp = array_module(x)
    if xp is np:
        out = np.bincount(x, weights=weights, minlength=n)
        return out if weights is not None else out.astype(np.int64)
    cp = xp
    ids = x if x.dtype in (np.int32, np.int64) else x.astype(np.int64)
    ids = cp.ascontiguousarray(ids)
    variant = {"ID": "int" if ids.dtype == np.int32 else "long long", "W": "float"}
    grid, block = launch_config(ids.size, 256, max_blocks=sm_count() * 32)
    if weights is None:
        out = cp.zeros(n, dtype=np.int64)
        if ids.size:
            COUNT.get("gj_count_ids", **variant)(grid, block, (ids, np.int64(ids.size), out))
        return out
    w = weights if weights.dtype in (np.float32, np.float64) else weights.astype(np.float64)
    w = cp.ascontiguousarray(w)
    variant["W"] = "float" if w.dtype == np.float32 else "double"
    out = cp.zeros(n, dtype=np.float64)
    if ids.size:
        COUNT.get("gj_sum_ids", **variant)(grid, block, (ids, w, np.int64(ids.size), out))
    return out


def thread_ranges(ptr):
    """Bounds of one range of rows per Numba thread, of about equal item counts by the row pointer
    ``ptr`` (ranges may be empty; the first starts at 0, the last ends at the last row)."""
    rows, total = ptr.size - 1, int(ptr[-1])
    parts = nb.get_num_threads()
    bounds = np.searchsorted(ptr, np.linspace(0, total, parts + 1).astype(np.int64))
    bounds = np.maximum.accumulate(np.clip(bounds, 0, rows))
    bounds[0], bounds[-1] = 0, rows
    return bounds


@nb.njit(cache=True)
def counts_to_ptr(keys, nkeys):
    """The row pointer of ``keys`` in ``[0, nkeys)``: ``ptr[k + 1] - ptr[k]`` is how often k occurs."""
    ptr = np.zeros(nkeys + 1, dtype=np.int64)
    for k in keys:
        ptr[k + 1] += 1
    for i in range(nkeys):
        ptr[i + 1] += ptr[i]
    return ptr


@nb.njit(cache=True)
def _coo_to_csr_cpu(src, dst, w, has_w, n, out_idx, out_w):
    m = src.size
    # pass 1: stable order by destination
    ptr_d = counts_to_ptr(dst, n)
    tmp_src = np.empty(m, dtype=src.dtype)
    tmp_dst = np.empty(m, dtype=dst.dtype)
    tmp_w = np.empty(m if has_w else 0, dtype=np.float32)
    for i in range(m):
        p = ptr_d[dst[i]]
        ptr_d[dst[i]] = p + 1
        tmp_src[p] = src[i]
        tmp_dst[p] = dst[i]
        if has_w:
            tmp_w[p] = w[i]
    # pass 2: stable order by source keeps destinations sorted inside each row
    indptr = counts_to_ptr(src, n)
    cursor = indptr[:-1].copy()
    for i in range(m):
        s = tmp_src[i]
        p = cursor[s]
        cursor[s] = p + 1
        out_idx[p] = tmp_dst[i]
        if has_w:
            out_w[p] = tmp_w[i]
    return indptr


@nb.njit(parallel=True, cache=True)
def _dedupe_sorted_cpu(indptr, indices, w, has_w):
    n = indptr.size - 1
    keep = np.zeros(n + 1, dtype=np.int64)
    for u in nb.prange(n):
        c = 0
        for e in range(indptr[u], indptr[u + 1]):
            if e == indptr[u] or indices[e] != indices[e - 1]:
                c += 1
        keep[u + 1] = c
    for u in range(n):
        keep[u + 1] += keep[u]
    out_idx = np.empty(keep[n], dtype=indices.dtype)
    out_w = np.empty(keep[n] if has_w else 0, dtype=np.float32)
    for u in nb.prange(n):
        p = keep[u]
        for e in range(indptr[u], indptr[u + 1]):
            if e == indptr[u] or indices[e] != indices[e - 1]:
                out_idx[p] = indices[e]
                if has_w:
                    out_w[p] = w[e]
                p += 1
    return keep, out_idx, out_w


def build_csr(src, dst, weights, n: int, *, dedupe: bool = False):
    """CSR arrays ``(indptr, indices, weights)`` of the edges ``src[i] -> dst[i]``.

    ``src``/``dst`` are integer arrays with values in ``[0, n)`` (NumPy or CuPy; the result lives
    on the same device); ``weights`` is a float32 array or None.
    """
    xp = array_module(src)
    if xp is not np:
        return _build_csr_gpu(src, dst, weights, n, dedupe)
    idx_t = index_dtype(n)
    m = src.size
    out_idx = np.empty(m, dtype=idx_t)
    has_w = weights is not None
    w = weights if has_w else np.empty(0, dtype=np.float32)
    out_w = np.empty(m if has_w else 0, dtype=np.float32)
    indptr = _coo_to_csr_cpu(src, dst, w, has_w, n, out_idx, out_w)
    if dedupe:
        indptr, out_idx, out_w = _dedupe_sorted_cpu(indptr, out_idx, out_w, has_w)
    return indptr, out_idx, (out_w if has_w else None)


def _build_csr_gpu(src, dst, weights, n, dedupe):
    cp = import_cupy()
    if n > 3_000_000_000:
        raise ValueError(f"GPU CSR build supports up to 3e9 vertices (n*n must fit in int64), got {n}")
    # in place where CuPy allows: the peak is the key, the sort's temporary and one more key-sized array
    key = src.astype(cp.int64)
    key *= n
    key += dst
    if weights is None:
        key.sort()
    else:
        order = cp.argsort(key)
        key = key[order]
        weights = weights[order]
        del order
    if dedupe and key.size > 1:
        keep = cp.empty(key.size, dtype=cp.bool_)
        keep[0] = True
        cp.not_equal(key[1:], key[:-1], out=keep[1:])
        key = compress(key, keep)
        if weights is not None:
            weights = compress(weights, keep)
    rows = key // n
    counts = count_ids(rows, n)
    del rows
    key %= n
    indices = key.astype(index_dtype(n))
    del key
    indptr = cp.zeros(n + 1, dtype=cp.int64)
    cp.cumsum(counts, out=indptr[1:])
    return indptr, indices, weights


@nb.njit(parallel=True, cache=True)
def _place_by_destination(indptr, indices, indptr_t, bounds, w, has_w, out_idx, out_w, out_eid):
    """Places every edge at its destination's cursor, stable (each row in forward-edge order): sources
    into ``out_idx``, weights into ``out_w`` when ``has_w``, forward edge ids into ``out_eid`` when it
    has room. Thread t scans every edge and places those with destinations in ``bounds[t]:bounds[t+1]``,
    so the output is the serial one."""
    n = indptr.size - 1
    ids = out_eid.size > 0
    for t in nb.prange(bounds.size - 1):
        lo, hi = bounds[t], bounds[t + 1]
        cursor = indptr_t[lo:hi].copy()
        for u in range(n):
            for e in range(indptr[u], indptr[u + 1]):
                v = indices[e]
                if lo <= v < hi:
                    p = cursor[v - lo]
                    cursor[v - lo] = p + 1
                    out_idx[p] = u
                    if has_w:
                        out_w[p] = w[e]
                    if ids:
                        out_eid[p] = e


def _transpose_cpu(indptr, indices, w, has_w, n, out_idx, out_w, out_eid):
    """The transpose's row pointer, its rows placed by ``_place_by_destination`` over one range of
    destinations (of about equal in-edge counts) per Numba thread."""
    indptr_t = counts_to_ptr(indices, n)
    bounds = thread_ranges(indptr_t)
    _place_by_destination(indptr, indices, indptr_t, bounds, w, has_w, out_idx, out_w, out_eid)
    return indptr_t


def transpose_csr(indptr, indices, weights, n: int):
    """CSR of the reversed edges; rows sorted, weights carried along."""
    xp = array_module(indptr)
    if xp is not np:
        rows = expand_rows(indptr, indices.size)
        return _build_csr_gpu(indices, rows, weights, n, dedupe=False)
    has_w = weights is not None
    out_idx = np.empty(indices.size, dtype=indices.dtype)
    out_w = np.empty(indices.size if has_w else 0, dtype=np.float32)
    w = weights if has_w else np.empty(0, dtype=np.float32)
    indptr_t = _transpose_cpu(indptr, indices, w, has_w, n, out_idx, out_w, np.empty(0, dtype=np.int64))
    return indptr_t, out_idx, (out_w if has_w else None)


def in_edge_order_cpu(indptr, indices, n: int):
    """The in-edge view of a host CSR: its row pointer, each in-edge's source, and each in-edge's forward
    edge id (int32 below 2**31 edges), rows by destination and each row in forward-edge order."""
    m = indices.size
    sources = np.empty(m, dtype=indices.dtype)
    eids = np.empty(m, dtype=np.int32 if m < 2**31 else np.int64)
    indptr_t = _transpose_cpu(
        indptr, indices, np.empty(0, np.float32), False, n, sources, np.empty(0, np.float32), eids
    )
    return indptr_t, sources, eids


def expand_rows(indptr, m: int):
    """Row (source vertex) of every edge: the COO row array of a CSR, in the index dtype."""
    xp = array_module(indptr)
    n = indptr.size - 1
    dtype = index_dtype(n)
    if xp is np:
        return np.repeat(np.arange(n, dtype=dtype), np.diff(indptr))
    cp = xp
    flags = cp.zeros(m, dtype=dtype)
    starts = indptr[1:-1]
    starts = starts[starts < m]
    if starts.size:
        cp.add.at(flags, starts, 1)  # cupyx.scatter_add is deprecated in CuPy 14
    return cumsum(flags, dtype=dtype)
