"""Numba kernels of influence maximization: live-edge BFS, RR samples, forward cascades, greedy cover.

Sample ``j`` (one per RR "set" of the IMM analysis) has the root ``floor(rand_unit(root_key, j) * n)``
and, in round ``t`` of ``rounds``, the live-edge world keyed ``mix64(key + (j * rounds + t) * GOLDEN)``.
Its members are the elements ``t * n + v`` of the vertices v reached in each round. Draws are keyed
by edge (IC), by vertex and draw (IC rows drawn by skips, see ``model``) or by vertex (LT), never by
visiting order, so any traversal order (a Numba thread or a CUDA warp) reaches the same set.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from graphs._build import counts_to_ptr, thread_ranges
from graphs._mix import mix64, rand_unit

# Rows of one probability q expecting at most SKIP_LIVE live edges (d * q) are drawn by geometric skips
# (``model``); one GPU lane draws them one after another, so a row expecting more is drawn edge by edge.
# Defined here, where the cached Numba functions read them (a cache would keep another module's value).
SKIP_LIVE = 64.0
SKIP_DRAWS = 1 << 63  # the counters of skip draws: this bit, the vertex above bit 32, the draw below
# The skips' logarithms in +, -, *, / and frexp alone, each rounded once (the GPU's copy in ``kernels``
# names the same constants), so that both sides compute every gap to the same bit.
LOG_TERMS = 12  # terms of the atanh series of log(m), m in [sqrt(1/2), sqrt(2)): 0.17**24 / 25 < 2**-60
LOG1M_TERMS = 30  # terms of the series of log(1 - q), q < 1/4: 0.25**30 / 31 < 2**-64
SQRT_HALF = math.sqrt(0.5)
LN2 = math.log(2.0)
_U_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_SKIP_DRAWS = np.uint64(SKIP_DRAWS)
# with progress, a call's samples are drawn in passes of about 1/PROGRESS_STEPS of them, at least
# PROGRESS_MIN_SAMPLES (each pass clears a visit mark per chunk: n words)
PROGRESS_STEPS = 16
PROGRESS_MIN_SAMPLES = 1 << 14


@nb.njit(inline="always", cache=True)
def _live(e, x, y, p, lo, lt, reverse, key):
    if lt:
        r = rand_unit(key, np.uint64(x if reverse else y))
        return lo[e] <= r < np.float64(lo[e]) + np.float64(p[e])  # sums in double, as on the GPU
    return rand_unit(key, np.uint64(e)) < p[e]


@nb.njit(inline="always", cache=True)
def log_unit(u):
    """log(u) for u in (0, 1], to about 1e-16 relative: u = m * 2**e with m in [sqrt(1/2), sqrt(2)),
    log(m) = 2 atanh(s), s = (m - 1) / (m + 1), by its series."""
    m, e = math.frexp(u)
    if m < SQRT_HALF:
        m = m * 2.0
        e -= 1
    s = (m - 1.0) / (m + 1.0)
    s2 = s * s
    t = 0.0
    for k in range(LOG_TERMS - 1, -1, -1):
        t = t * s2 + 1.0 / (2 * k + 1)
    return e * LN2 + (2.0 * s) * t


@nb.njit(inline="always", cache=True)
def log_one_minus(q):
    """log(1 - q) for q in (0, 1): its series -q (1 + q/2 + q**2/3 + ...) below 1/4, where 1 - q would
    round, else ``log_unit(1 - q)`` (exact there: q's last bit is at least 2**-26)."""
    if q >= 0.25:
        return log_unit(1.0 - q)
    t = 0.0
    for k in range(LOG1M_TERMS, 0, -1):
        t = t * q + 1.0 / k
    return -(q * t)


@nb.njit(inline="always", cache=True)
def skips(a, b, p, skip):
    """``log(1 - q)`` when ``skip`` and the row ``a:b`` is drawn by geometric skips (its
    one probability q in (0, 1) and ``(b - a) * q <= SKIP_LIVE``), else 0."""
    if not skip or b <= a:
        return 0.0
    q = np.float64(p[a])
    if q <= 0.0 or q >= 1.0 or np.float64(b - a) * q > SKIP_LIVE:
        return 0.0
    return log_one_minus(q)


@nb.njit(cache=True)
def bfs(indptr, indices, p, lo, lt, reverse, key, starts, mark, stamp, queue, base, skip=False):
    """Vertices reached from ``starts`` in the world ``key``, appended to ``queue[base:]``; count.
    ``skip``: the view's rows share one probability each (IC in-edges), drawn by skips where that pays."""
    size = base
    for s in starts:
        if mark[s] != stamp:
            mark[s] = stamp
            queue[size] = s
            size += 1
    head = base
    while head < size:
        x = queue[head]
        head += 1
        a, b = indptr[x], indptr[x + 1]
        if lt and reverse and b > a:  # one in-edge at most: find its interval by bisection
            r = rand_unit(key, np.uint64(x))
            while b - a > 1:
                mid = (a + b) >> 1
                if lo[mid] <= r:
                    a = mid
                else:
                    b = mid
            b = a + 1
        lq = skips(a, b, p, skip)
        if lq != 0.0:  # the gaps between live edges, geometric with parameter q
            pos, i = a - 1, 0
            while True:
                u = rand_unit(key, _SKIP_DRAWS | (np.uint64(x) << np.uint64(32)) | np.uint64(i))
                i += 1
                if u == 0.0:  # an infinite gap
                    break
                gap = np.floor(log_unit(u) / lq)
                if not gap < b - 1 - pos:
                    break
                pos += np.int64(gap) + 1
                y = indices[pos]
                if mark[y] != stamp:
                    mark[y] = stamp
                    queue[size] = y
                    size += 1
            continue
        for e in range(a, b):
            y = indices[e]
            if mark[y] != stamp and _live(e, x, y, p, lo, lt, reverse, key):
                mark[y] = stamp
                queue[size] = y
                size += 1
    return size - base


@nb.njit(parallel=True, cache=True)
def _sample_chunks(
    indptr, indices, p, lo, lt, skip, key, root_key, rounds, j0, starts, ends, buf, done, sizes
):
    """Chunk c samples j = starts[c] .. ends[c]-1 into ``buf[c]`` while the next one surely fits."""
    n = indptr.size - 1
    cap = buf.shape[1]
    for c in nb.prange(starts.size):
        mark = np.zeros(n, dtype=np.int64)
        queue = np.empty(n, dtype=indices.dtype)
        root = np.zeros(1, dtype=np.int64)
        used = 0
        stamp = 0
        j = starts[c]
        while j < ends[c] and used + rounds * n <= cap:
            root[0] = min(np.int64(rand_unit(root_key, np.uint64(j)) * n), n - 1)
            total = 0
            for t in range(rounds):
                stamp += 1
                kt = mix64(key + np.uint64(j * rounds + t) * _U_GOLDEN)
                got = bfs(indptr, indices, p, lo, lt, True, kt, root, mark, stamp, queue, 0, skip)
                for i in range(got):
                    buf[c, used + total + i] = np.int64(t) * n + queue[i]
                total += got
            sizes[j - j0] = total
            used += total
            j += 1
        done[c] = j


def sample(
    rev,
    lt: bool,
    key: int,
    root_key: int,
    rounds: int,
    j0: int,
    count: int,
    expected=None,
    chunks: int = 16,
    progress=None,
):
    """Members (elements ``t*n + v``) and offsets of samples ``j0 .. j0+count-1``, in order.
    ``progress(samples done, count)`` after each parallel pass; with it, a pass draws at most about
    1/PROGRESS_STEPS of them (at least PROGRESS_MIN_SAMPLES)."""
    n = rev.indptr.size - 1
    dtype = np.int32 if rounds * n < 2**31 else np.int64
    sizes = np.zeros(count, dtype=np.int64)
    pieces = {}
    later = [(j0, j0 + count)]
    most = max(PROGRESS_MIN_SAMPLES, -(-count // PROGRESS_STEPS)) if progress is not None else count
    est = expected or 8.0 * rounds
    todo, drawn = [], 0
    while todo or later:
        if not todo:  # the next pass's samples: at most ``most`` (the rest waits for a later pass)
            (a, b), *later = later
            todo = [(a, min(b, a + most))] + ([(a + most, b)] if b > a + most else [])
            todo, later = todo[:1], todo[1:] + later
        # split what is left into about ``chunks`` ranges of similar length
        per = max(1, -(-sum(b - a for a, b in todo) // chunks))
        ranges = [(a, min(a + per, hi)) for lo, hi in todo for a in range(lo, hi, per)]
        starts = np.array([a for a, _ in ranges], dtype=np.int64)
        ends = np.array([b for _, b in ranges], dtype=np.int64)
        cap = int(min(per * est * 1.5, per * rounds * n)) + rounds * n
        buf = np.empty((len(ranges), cap), dtype=dtype)
        done = np.zeros(len(ranges), dtype=np.int64)
        _sample_chunks(
            rev.indptr,
            rev.indices,
            rev.p,
            rev.lo,
            lt,
            rev.equal_rows and not lt,
            np.uint64(key),
            np.uint64(root_key),
            rounds,
            j0,
            starts,
            ends,
            buf,
            done,
            sizes,
        )
        todo = []
        for c, (a, b) in enumerate(ranges):
            got = int(sizes[a - j0 : done[c] - j0].sum())
            pieces[a] = buf[c, :got].copy()
            if done[c] < b:
                todo.append((int(done[c]), b))
        made = sizes[sizes > 0]
        est = max(est, float(made.mean()) if made.size else est)
        del buf
        drawn += sum(int(done[c]) - a for c, (a, _) in enumerate(ranges))
        if progress is not None:
            progress(drawn, count)
    members = np.concatenate([pieces[a] for a in sorted(pieces)]) if pieces else np.zeros(0, dtype)
    offsets = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    return members, offsets


@nb.njit(parallel=True, cache=True)
def _cascades(indptr, indices, p, lo, lt, key, seeds, seed_rounds, rounds, first, count, out):
    n = indptr.size - 1
    for s in nb.prange(count):
        mark = np.zeros(n, dtype=np.int64)
        queue = np.empty(n, dtype=indices.dtype)
        ever = np.zeros(n, dtype=np.bool_)
        reached = 0
        for t in range(rounds):
            kt = mix64(key + np.uint64((first + s) * rounds + t) * _U_GOLDEN)
            got = bfs(indptr, indices, p, lo, lt, False, kt, seeds[seed_rounds == t], mark, t + 1, queue, 0)
            for i in range(got):
                if not ever[queue[i]]:
                    ever[queue[i]] = True
                    reached += 1
        out[s] = reached


def cascades(fwd, lt: bool, key: int, seeds, seed_rounds, rounds: int, count: int, first: int = 0):
    """Vertices active in at least one round, for each of the forward simulations ``first .. first +
    count - 1``."""
    out = np.zeros(count, dtype=np.int64)
    _cascades(
        fwd.indptr,
        fwd.indices,
        fwd.p,
        fwd.lo,
        lt,
        np.uint64(key),
        seeds.astype(np.int64),
        seed_rounds.astype(np.int64),
        rounds,
        first,
        count,
        out,
    )
    return out


@nb.njit(parallel=True, cache=True)
def _place_holders(members, offsets, owners, bounds, holders):
    """Thread t scans every sample in order and files those holding an element of ``bounds[t]:bounds[t+1]``
    under it, so each element's samples come in increasing order, as one thread would file them."""
    for t in nb.prange(bounds.size - 1):
        lo, hi = bounds[t], bounds[t + 1]
        fill = owners[lo:hi].copy()
        for j in range(offsets.size - 1):
            for i in range(offsets[j], offsets[j + 1]):
                e = members[i]
                if lo <= e < hi:
                    holders[fill[e - lo]] = j
                    fill[e - lo] += 1


def cover_index(members, offsets, n_elem: int):
    """Inverted index of samples: element ``e``'s samples are ``holders[owners[e]:owners[e+1]]``, in
    increasing order (filed on all Numba threads, one range of elements of about equal size each)."""
    owners = counts_to_ptr(members, n_elem)
    holders = np.empty(members.size, dtype=np.int64)
    _place_holders(members, offsets, owners, thread_ranges(owners), holders)
    return owners, holders


@nb.njit(cache=True)
def cover(members, offsets, owners, holders, covered, counts, best):
    """Retire element ``best`` (count -1), mark its samples covered, take their members' counts down."""
    counts[best] = -1
    for h in range(owners[best], owners[best + 1]):
        j = holders[h]
        if not covered[j]:
            covered[j] = True
            for i in range(offsets[j], offsets[j + 1]):
                if counts[members[i]] > 0:
                    counts[members[i]] -= 1


@nb.njit(parallel=True, cache=True)
def _best(counts, left, n, chunks):
    """The element with the largest count among rounds with picks left, ties to the smaller element
    (-1 if none has a count): each chunk's best, then the best of those."""
    size = -(-counts.size // chunks)
    best = np.full(chunks, -1, dtype=np.int64)
    gain = np.full(chunks, -1, dtype=np.int64)
    for c in nb.prange(chunks):
        for e in range(c * size, min(counts.size, (c + 1) * size)):
            if counts[e] > gain[c] and left[e // n] > 0:
                best[c], gain[c] = e, counts[e]
    b, g = -1, -1
    for c in range(chunks):  # chunks in element order: a later chunk wins only with a larger count
        if gain[c] > g:
            b, g = best[c], gain[c]
    return b, g


@nb.njit(cache=True)
def _greedy(members, offsets, owners, holders, n, k, rounds, counts, chunks):
    """Greedy maximum coverage, ``k`` elements per round; ties to the smaller element."""
    covered = np.zeros(offsets.size - 1, dtype=np.bool_)
    left = np.full(rounds, k, dtype=np.int64)
    picks = np.empty(k * rounds, dtype=np.int64)
    gains = np.empty(k * rounds, dtype=np.int64)
    for q in range(k * rounds):
        best, gain = _best(counts, left, n, chunks)
        picks[q], gains[q] = best, gain
        left[best // n] -= 1
        cover(members, offsets, owners, holders, covered, counts, best)
    return picks, gains


def greedy(members, offsets, n: int, k: int, rounds: int):
    """Elements picked in order and the samples each newly covers."""
    owners, holders = cover_index(members, offsets, n * rounds)
    counts = np.diff(owners)
    return _greedy(members, offsets, owners, holders, n, k, rounds, counts, 4 * nb.get_num_threads())
