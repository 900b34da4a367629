"""The index walks inverted into the doubled-CSR IRW layout (Fig. 2) with the high-IRW set H moved out
(Fig. 4), in as little memory as the arrays allow.

The walks come as one 64-bit key each (``_irw.walk_keys``); one in-place sort of them gives the distinct
(end, start) pairs in order. From there every step works on pairs (fewer than the walks), and each
large temporary is freed before the next is made: a pair's end and start are split by one kernel,
each IRW entry is scattered to its slot by one kernel from a 64-bit running count (a NumPy expression
would make five or six 64-bit temporaries a pair), and large selections go by positions found chunk
by chunk.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from graphs._build import count_ids
from graphs._device import array_module
from graphs._large import cumsum
from operators._gpu.launch import launch_config
from operators._gpu.registry import Kernel

CUDA = r"""
// key = end * n + start -> (end, start)
extern "C" __global__ void gj_irw_split(const long long* key, long long count, long long n, int* t, int* v) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count;
         i += (long long)gridDim.x * blockDim.x) {
        t[i] = (int)(key[i] / n);
        v[i] = (int)(key[i] % n);
    }
}
// pair i (end t[i], start v[i]) to its slot of the end's list: the starts of frequency > 1 first
// (sig), each part in pair order; sig_incl is the inclusive running count of sig. Pair i of the second
// part has i - before such pairs ahead of it, ip1[e] - ip2[e] of them in earlier lists, so its slot
// is ip1[e] + (ip2[e + 1] - ip2[e]) + its rank in the list: ip2[e + 1] + i - before
extern "C" __global__ void gj_irw_place(const int* t, const int* v, const bool* sig,
        const long long* sig_incl, const long long* ip1, const long long* ip2, long long count, int* starts) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count;
         i += (long long)gridDim.x * blockDim.x) {
        const int e = t[i];
        const long long before = sig_incl[i] - sig[i];
        starts[sig[i] ? ip1[e] + before - ip2[e] : ip2[e + 1] + i - before] = v[i];
    }
}
"""


@nb.njit(parallel=True, cache=True)
def _split_cpu(key, n, t, v):
    for i in nb.prange(key.size):
        t[i] = key[i] // n
        v[i] = key[i] % n


@nb.njit(cache=True)
def _place_cpu(t, v, sig, ip1, ip2, starts):
    before = 0
    for i in range(t.size):
        e = t[i]
        if sig[i]:
            starts[ip1[e] + before - ip2[e]] = v[i]
            before += 1
        else:
            starts[ip2[e + 1] + i - before] = v[i]


INVERT = Kernel(CUDA, ("gj_irw_split", "gj_irw_place"), label="irw-invert")


def _split(key, n: int, ids):
    """(key // n, key % n) as ``ids`` arrays."""
    xp = array_module(key)
    if xp is not np and ids != np.int32:  # 2^31 vertices or more: the kernel's ids are 32-bit
        return (key // n).astype(ids), (key % n).astype(ids)
    t, v = xp.empty(key.size, dtype=ids), xp.empty(key.size, dtype=ids)
    if xp is np:
        _split_cpu(key, np.int64(n), t, v)
    elif key.size:
        args = (key, np.int64(key.size), np.int64(n), t, v)
        INVERT.get("gj_irw_split")(*launch_config(key.size), args)
    return t, v


def _place(t, v, sig, ip1, ip2):
    """``starts``: each pair's start at its slot of its end's list (frequency > 1 first)."""
    xp = array_module(t)
    starts = xp.empty(v.size, dtype=v.dtype)
    if xp is not np and t.dtype != np.int32:  # 2^31 vertices or more: the kernel's ids are 32-bit
        before = cumsum(sig) - sig
        starts[xp.where(sig, ip1[t] - ip2[t] + before, ip2[t + 1] + xp.arange(t.size) - before)] = v
        return starts
    if xp is np:
        _place_cpu(t, v, sig, ip1, ip2, starts)
    elif t.size:
        incl = cumsum(sig, dtype=np.int64)
        args = (t, v, sig, incl, ip1, ip2, np.int64(t.size), starts)
        INVERT.get("gj_irw_place")(*launch_config(t.size), args)
    return starts


CHUNK = 1 << 27  # elements a step of ``_positions`` looks at


def _positions(size: int, chunk_mask, xp):
    """Where ``chunk_mask(lo, hi)`` (a bool array for elements lo..hi-1) is set, as int64 positions,
    found chunk by chunk: CuPy's ``flatnonzero`` and boolean indexing over a whole array make an 8-byte
    running count of it, which for billions of walks does not fit beside them."""
    bounds = [(lo, min(lo + CHUNK, size)) for lo in range(0, size, CHUNK)]
    counts = [int(xp.count_nonzero(chunk_mask(lo, hi))) for lo, hi in bounds]
    out, at = xp.empty(sum(counts), dtype=np.int64), 0
    for (lo, hi), c in zip(bounds, counts, strict=True):
        out[at : at + c] = xp.flatnonzero(chunk_mask(lo, hi))
        out[at : at + c] += lo
        at += c
    return out


def _run_starts(body):
    """Where each run of equal keys starts in the sorted ``body``."""
    xp = array_module(body)

    def heads(lo, hi):
        h = xp.empty(hi - lo, dtype=bool)
        if lo == 0:
            h[0] = True
            xp.not_equal(body[1:hi], body[: hi - 1], out=h[1:])
        else:
            xp.not_equal(body[lo:hi], body[lo - 1 : hi - 1], out=h)
        return h

    return _positions(body.size, heads, xp)


def _where(mask, invert: bool = False):
    """``_positions`` of a bool array (of its clear elements with ``invert``)."""
    xp = array_module(mask)
    return _positions(
        mask.size, (lambda lo, hi: ~mask[lo:hi]) if invert else (lambda lo, hi: mask[lo:hi]), xp
    )


def walk_pairs(keys: list, n: int) -> list:
    """The walks' distinct (end, start) pairs as keys ``end * n + start`` in increasing order, each
    pair's number of walks, and ``ret[v]``: the walks from v that returned to the source.

    ``keys`` holds ``_irw.walk_keys``'s array, which is sorted in place and freed here; the result is a
    list that ``invert_walks`` empties, so that each array is freed as soon as it is used (a large
    graph has billions of walks). A returned walk has the key
    start - n < 0, so the sort puts them first, by start.
    """
    key = keys.pop()
    xp = array_module(key)
    key.sort()
    back = int(xp.searchsorted(key, xp.zeros(1, dtype=np.int64))[0])
    ret = xp.diff(xp.searchsorted(key[:back], xp.arange(-n, 1, dtype=np.int64))).astype(np.int32)
    body = key[back:]
    del key
    if not body.size:
        return [xp.zeros(0, dtype=np.int64), xp.zeros(0, dtype=np.int32), ret]
    first = _run_starts(body)
    pairs = body[first]
    total = body.size
    del body  # the walks' keys go here
    freq = xp.empty(first.size, dtype=np.int32)  # the runs' lengths, with no 8-byte temporary
    xp.subtract(first[1:], first[:-1], out=freq[:-1], casting="unsafe")
    freq[-1] = total - first[-1]
    return [pairs, freq, ret]


def invert_walks(pairs: list, n: int, high_share: float):
    """The IRW arrays of the walks' (start, end) pairs (``walk_pairs``, emptied here), with the
    high-IRW set H moved out (Fig. 2, 4).

    IRW: ``ip1/starts`` lists, per end vertex t, the distinct start vertices of walks ending at t,
    those with frequency > 1 first, and ``ip2/freqs`` the frequencies of those first entries only
    (the rest are 1). ``ret[v]``: walks from v that returned to the source. H holds the vertices
    with the most walks ending at them: ``omega_I(t) >= T`` for the smallest T that keeps
    ``|H| <= high_share * n``; their pairs move to ``hptr/h_end/h_freq``, grouped by start vertex.
    """
    key, freq, ret = pairs
    pairs.clear()
    xp = array_module(key)
    ids = np.int32 if n < 2**31 else np.int64
    t, v = _split(key, n, ids)
    del key
    omega_i = count_ids(t, n, weights=freq).astype(np.int64)
    cap = int(high_share * n)
    ranked = xp.sort(omega_i)[::-1]
    if 0 < cap < n:
        ub = int(ranked[cap])
        in_h = omega_i >= ub + 1
    else:
        ub = int(ranked[0]) if n else 0
        in_h = xp.zeros(n, dtype=bool)
    del ranked
    high = xp.flatnonzero(in_h)
    h_index = xp.full(n, -1, dtype=np.int32)
    h_index[high] = xp.arange(high.size, dtype=np.int32)
    pair_h = in_h[t]
    at = _where(pair_h)
    ht, hv, hf = t[at], v[at], freq[at]
    at = _where(pair_h, invert=True)
    del pair_h
    t, v, freq = t[at], v[at], freq[at]  # the IRW proper; the whole pairs are freed here
    del at
    # H pairs grouped by start vertex (Fig. 4): hptr[v] starts v's (end index in H, frequency) pairs
    order = hv.astype(np.int64)
    order *= n
    order += ht
    order = xp.argsort(order)
    ht, hv, hf = ht[order], hv[order], hf[order]
    del order
    h_store = dict(
        high=high.astype(np.int32), h_index=h_index, hptr=_indptr(xp, hv, n), h_end=h_index[ht], h_freq=hf
    )
    del ht, hv, hf
    # the pairs are in (end, start) order; each end vertex's starts with frequency > 1 go first
    sig = freq > 1
    at = _where(sig)
    ip1, ip2 = _indptr(xp, t, n), _indptr(xp, t[at], n)
    starts = _place(t, v, sig, ip1, ip2)
    del t, v
    irw = dict(ip1=ip1, starts=starts, ip2=ip2, freqs=freq[at])
    return {**irw, **h_store, "ret": ret, "omega_i": omega_i}, ub


def _indptr(xp, rows, n):
    ptr = xp.zeros(n + 1, dtype=np.int64)
    xp.cumsum(count_ids(rows, n), out=ptr[1:])
    return ptr
