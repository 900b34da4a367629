"""Greedy maximum coverage of RR samples on the GPU, through an inverted index of the samples.

gIM's cover kernel (its Alg. 7) scans every uncovered sample at each of the k picks, so a selection
costs k scans of the whole pool. Here the pool is indexed once (element -> the samples that hold it,
built by a counting sort: the counts the greedy starts from, their prefix sum, and one atomic scatter),
and a pick only visits the samples of the picked element: a whole selection touches each sample at most
once after the index is built, plus one argmax over the counts per pick. Counts, picks and gains are
those of the scanning greedy and of ``_im_cpu.greedy`` (ties to the smaller element).
"""

from __future__ import annotations

import numpy as np

from graphs._build import count_ids
from graphs._device import import_cupy
from operators._gpu.device import sm_count
from operators._gpu.registry import Kernel

COVER_KERNEL = r"""
// Sample id of every member: warp w writes w's id over its members (coalesced, any sample size).
extern "C" __global__ void gj_im_sample_ids(const long long* offsets, long long count, int* sid) {
    int lane = threadIdx.x & 31;
    long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long j = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; j < count; j += warps)
        for (long long i = offsets[j] + lane; i < offsets[j + 1]; i += 32) sid[i] = (int)j;
}

// Counting-sort scatter: holders[fill[e]++] = sample of member i, for every member i (any order
// within an element; the greedy does not depend on it).
extern "C" __global__ void gj_im_scatter(const int* members, const int* sid, long long size,
        unsigned long long* fill, int* holders) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < size; i += stride)
        holders[atomicAdd(&fill[members[i]], 1ull)] = sid[i];
}

// One pick: element *best is retired (count -1) and recorded with its gain by thread 0; the uncovered
// samples among its holders are marked covered and their other members' counts taken down. Each sample
// holds an element at most once, so no two warps meet on one sample, and nobody else writes counts[b].
extern "C" __global__ void gj_im_cover(const int* members, const long long* offsets, const long long* owners,
        const int* holders, const long long* best, unsigned char* covered, int* counts, long long* pick,
        long long* gain) {
    int lane = threadIdx.x & 31;
    long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    int b = (int)*best;
    if (blockIdx.x == 0 && threadIdx.x == 0) { *pick = b; *gain = counts[b]; counts[b] = -1; }
    long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    for (long long h = owners[b] + warp; h < owners[b + 1]; h += warps) {
        int j = holders[h];
        if (covered[j]) continue;
        __syncwarp();
        if (lane == 0) covered[j] = 1;
        for (long long i = offsets[j] + lane; i < offsets[j + 1]; i += 32)
            if (members[i] != b) atomicSub(&counts[members[i]], 1);
    }
}
"""


def _blocks(count: int, per_block: int) -> tuple[int]:
    sms = sm_count()
    return (int(max(1, min(sms * 8, -(-count // per_block)))),)


COVER = Kernel(COVER_KERNEL, ("gj_im_sample_ids", "gj_im_scatter", "gj_im_cover"), label="influence-greedy")


def cover_index(members, offsets, n_elem: int):
    """Inverted index of samples: element ``e``'s samples are ``holders[owners[e]:owners[e+1]]``.

    Also returns the counts it was built from (int32): the greedy's starting coverage counts.
    """
    cp = import_cupy()
    count = offsets.size - 1
    if count >= 2**31:
        raise ValueError(f"{count:,} RR samples on one GPU: the cover index holds sample ids as int32")
    counts = count_ids(members, n_elem)
    owners = cp.zeros(n_elem + 1, dtype=np.int64)
    cp.cumsum(counts, out=owners[1:])
    sid = cp.empty(members.size, dtype=np.int32)
    COVER.get("gj_im_sample_ids")(_blocks(count, 8), (256,), (offsets, np.int64(count), sid))
    fill = owners[:-1].astype(np.uint64)
    holders = cp.empty(members.size, dtype=np.int32)
    COVER.get("gj_im_scatter")(
        _blocks(members.size, 256), (256,), (members, sid, np.int64(members.size), fill, holders)
    )
    return owners, holders, counts.astype(np.int32)


def _cover(members, offsets, owners, holders, covered, counts, best, pick, gain) -> None:
    grid = _blocks(covered.size, 8)
    COVER.get("gj_im_cover")(
        grid, (256,), (members, offsets, owners, holders, best, covered, counts, pick, gain)
    )


def cover(members, offsets, owners, holders, covered, counts, best: int) -> None:
    """One greedy step on a shard of samples: retire ``best`` and take the counts of what it covers down."""
    cp = import_cupy()
    scratch = cp.empty(3, dtype=np.int64)
    scratch[0] = best
    _cover(members, offsets, owners, holders, covered, counts, scratch[0:1], scratch[1:2], scratch[2:3])


def greedy(members, offsets, n: int, k: int, rounds: int):
    """Greedy maximum coverage on the GPU, ``k`` elements per round, ties to the smaller element."""
    cp = import_cupy()
    owners, holders, counts = cover_index(members, offsets, n * rounds)
    covered = cp.zeros(offsets.size - 1, dtype=np.uint8)
    picks = cp.empty(k * rounds, dtype=np.int64)
    gains = cp.empty(k * rounds, dtype=np.int64)
    left = [k] * rounds
    for q in range(k * rounds):
        best = cp.argmax(counts)
        _cover(members, offsets, owners, holders, covered, counts, best, picks[q:], gains[q:])
        if rounds > 1:
            r = int(best) // n
            left[r] -= 1
            if left[r] == 0:
                counts[r * n : (r + 1) * n] = -(2**30)
    return picks, gains
