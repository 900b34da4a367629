"""The index walks inverted into the doubled-CSR IRW layout (Fig. 2) with the high-IRW set H moved out
(Fig. 4), in as little memory as the arrays allow.

The walks come as one 64-bit key each (``_irw.walk_keys``); one in-place sort of them gives the distinct
(end, start) pairs in order. From there every step works on pairs (fewer than the walks), and each
large temporary is freed before the next is made: a pair's end and start are split by one kernel,
each IRW entry is scattered to its slot by one kernel from a 64-bit running count made a chunk at a
time (a NumPy expression would make five or six 64-bit temporaries a pair), and large selections are
made a chunk at a time into their result (``graphs._large.compress``), an array at a time.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from graphs._build import count_ids
from graphs._device import array_module
from graphs._large import compress, cumsum
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
// (a chunk of the pairs: base is the first one's index, the arrays start at it; starts is whole)
extern "C" __global__ void gj_irw_place(const int* t, const int* v, const bool* sig,
        const long long* sig_incl, const long long* ip1, const long long* ip2, long long count,
        long long base, int* starts) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count;
         i += (long long)gridDim.x * blockDim.x) {
        const int e = t[i];
        const long long before = sig_incl[i] - sig[i];
        starts[sig[i] ? ip1[e] + before - ip2[e] : ip2[e + 1] + base + i - before] = v[i];
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
    else:  # in chunks: the running count of ``sig`` is 8 bytes a pair, made a chunk at a time
        carry = xp.zeros(1, dtype=np.int64)
        for lo in range(0, t.size, CHUNK):
            hi = min(lo + CHUNK, t.size)
            incl = xp.cumsum(sig[lo:hi], dtype=np.int64)
            incl += carry
            args = (t[lo:hi], v[lo:hi], sig[lo:hi], incl, ip1, ip2, np.int64(hi - lo), np.int64(lo), starts)
            INVERT.get("gj_irw_place")(*launch_config(hi - lo), args)
            carry = incl[-1:].copy()
    return starts


CHUNK = 1 << 27  # pairs a step of ``_runs`` and ``_place`` looks at
# bytes a pair of one chunk's working arrays, at most: its run heads (1), their positions (8), and the
# scan that finds them or the keys gathered at them (8); the placement's running count takes 8
CHUNK_WORK = 17


def _runs(body):
    """The distinct keys of the sorted ``body`` and the length of each one's run (int32), found chunk
    by chunk (positions of a whole array's run starts would take 8 bytes a key beside it)."""
    xp = array_module(body)

    def heads(lo, hi):
        h = xp.empty(hi - lo, dtype=bool)
        if lo == 0:
            h[0] = True
            xp.not_equal(body[1:hi], body[: hi - 1], out=h[1:])
        else:
            xp.not_equal(body[lo:hi], body[lo - 1 : hi - 1], out=h)
        return h

    bounds = [(lo, min(lo + CHUNK, body.size)) for lo in range(0, body.size, CHUNK)]
    counts = [int(xp.count_nonzero(heads(lo, hi))) for lo, hi in bounds]
    keys, freq = xp.empty(sum(counts), dtype=body.dtype), xp.empty(sum(counts), dtype=np.int32)
    at, last = 0, None  # last: (its index in freq, its position) of the latest run start seen
    for (lo, hi), c in zip(bounds, counts, strict=True):
        if not c:
            continue
        pos = xp.flatnonzero(heads(lo, hi))
        pos += lo
        keys[at : at + c] = body[pos]
        if last is not None:
            freq[last[0]] = int(pos[0]) - last[1]
        xp.subtract(pos[1:], pos[:-1], out=freq[at : at + c - 1], casting="unsafe")
        last = (at + c - 1, int(pos[-1]))
        at += c
        del pos  # before the next chunk's is made
    if last is not None:
        freq[last[0]] = body.size - last[1]
    return keys, freq


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
    pairs, freq = _runs(body)
    del body  # the walks' keys go here
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
    ht, hv, hf = compress(t, pair_h), compress(v, pair_h), compress(freq, pair_h)
    xp.logical_not(pair_h, out=pair_h)
    # the IRW proper, an array at a time: each whole array is freed as its selection replaces it
    t = compress(t, pair_h)
    v = compress(v, pair_h)
    freq = compress(freq, pair_h)
    del pair_h
    # H pairs grouped by start vertex (Fig. 4): hptr[v] starts v's (end index in H, frequency) pairs.
    # They arrive in increasing (end, start) order, so a stable sort by start alone puts them in
    # (start, end) order: no 8-byte key per pair beside the sort's own buffers.
    order = xp.argsort(hv, kind="stable") if xp is np else xp.argsort(hv)  # CuPy's is always stable
    ht, hv, hf = ht[order], hv[order], hf[order]
    del order
    h_store = dict(
        high=high.astype(np.int32), h_index=h_index, hptr=_indptr(xp, hv, n), h_end=h_index[ht], h_freq=hf
    )
    del ht, hv, hf
    # the pairs are in (end, start) order; each end vertex's starts with frequency > 1 go first
    sig = freq > 1
    ip1, ip2 = _indptr(xp, t, n), _indptr(xp, compress(t, sig), n)
    starts = _place(t, v, sig, ip1, ip2)
    del t, v
    irw = dict(ip1=ip1, starts=starts, ip2=ip2, freqs=compress(freq, sig))
    return {**irw, **h_store, "ret": ret, "omega_i": omega_i}, ub


def _indptr(xp, rows, n):
    ptr = xp.zeros(n + 1, dtype=np.int64)
    xp.cumsum(count_ids(rows, n), out=ptr[1:])
    return ptr
