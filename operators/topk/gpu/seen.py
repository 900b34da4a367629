"""The touched list of a top-k PPR query rebuilt from its seen flags after a push, in vertex order.

The push sets ``seen[v]`` for every vertex that receives a share (``_topk_gpu_push``); listing them
afterwards, in order, costs one sequential pass over n bytes, where listing first receivers during the
push would cost a large share of the push. Each thread counts with four loads in flight and loads its
next word before a step's block scan, so that the loads overlap the scans. Tiles are
dealt round-robin to the blocks, so that the touched vertices crowded in a degree-ordered graph's first
ids spread over them.

Each block's tile starts are written by one thread each after the block's last scan and read by all its
threads: a barrier between the two is needed: without it a thread can read a start left by the previous
round's list (of the same query or of an earlier one on the workspace), and the list comes out with the
right count but entries out of place.
"""

from __future__ import annotations

import numpy as np

from operators._gpu.blocks import SCAN_CUDA
from operators._gpu.registry import Kernel
from operators.topk.gpu.push import PUSH_DEFINES, PUSH_DEVICE, THREADS, PushState

LIST_SEEN_CUDA = r"""
// a 16-byte word of flags (vertices 16 w to 16 w + 15) as a 16-bit mask, bit i for vertex 16 w + i; a
// flag is any nonzero byte (vcmpne4 sets a byte to 0xff, the multiply gathers the four bytes' low bits)
__device__ __forceinline__ unsigned gj_seen_mask(uint4 x) {
    const unsigned b[4] = {x.x, x.y, x.z, x.w};
    unsigned m = 0u;
#pragma unroll
    for (int i = 0; i < 4; ++i) m |= (((__vcmpne4(b[i], 0u) & 0x01010101u) * 0x01020408u) >> 24) << (4 * i);
    return m;
}
// the touched list rebuilt from the seen flags, in vertex order (one cooperative launch). The words are cut
// into tiles of `tw` words (a multiple of GJ_T), dealt round-robin to the blocks (tile t to block t %
// gridDim.x): in a degree-ordered graph the touched vertices crowd the first ids, which equal ranges per
// block left to a few blocks. Each block counts its tiles' flags (SEEN_AHEAD tiles' loads of a thread in
// flight), every block then scans all the tiles' counts and keeps the starts of its own, and lists the
// vertices of its tiles that have any (the next word's load out before each step's block scan). The flags'
// buffer is whole words, zero past n (GPUQuery.seen_words); `tiles` holds 2 x the tile count
extern "C" __global__ void __launch_bounds__(GJ_T, 4) gj_list_seen(const uint4* words, long long n,
        long long tw, int* touched, int* ntouched, long long* tiles) {
    cg::grid_group grid = cg::this_grid();
    __shared__ unsigned s_count[SEEN_AHEAD][GJ_T / 32];
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    const long long nw = (n + 15) >> 4, nt = (nw + tw - 1) / tw, G = gridDim.x;
    long long* tcount = tiles;
    long long* tbase = tiles + nt;
    for (long long t0 = blockIdx.x; t0 < nt; t0 += SEEN_AHEAD * G) {  // block-uniform
        unsigned mine[SEEN_AHEAD] = {};
        for (long long i = threadIdx.x; i < tw; i += GJ_T) {
            uint4 x[SEEN_AHEAD];
#pragma unroll
            for (int j = 0; j < SEEN_AHEAD; ++j) {
                const long long w = (t0 + j * G) * tw + i;
                x[j] = t0 + j * G < nt && w < nw ? words[w] : zero;
            }
#pragma unroll
            for (int j = 0; j < SEEN_AHEAD; ++j) mine[j] += __popc(gj_seen_mask(x[j]));
        }
#pragma unroll
        for (int j = 0; j < SEEN_AHEAD; ++j) {
            unsigned c = mine[j];
            for (int o = 16; o > 0; o >>= 1) c += __shfl_xor_sync(0xffffffffu, c, o);
            if (lane == 0) s_count[j][wid] = c;
        }
        __syncthreads();
        if (threadIdx.x < SEEN_AHEAD && t0 + threadIdx.x * G < nt) {
            long long c = 0;
            for (int v = 0; v < GJ_T / 32; ++v) c += s_count[threadIdx.x][v];
            tcount[t0 + threadIdx.x * G] = c;
        }
        __syncthreads();
    }
    grid.sync();
    long long run = 0, all;
    for (long long t0 = 0; t0 < nt; t0 += GJ_T) {  // block-uniform
        const long long t = t0 + threadIdx.x;
        const long long ex = gj_block_scan(t < nt ? tcount[t] : 0, &all);
        if (t < nt && t % G == blockIdx.x) tbase[t] = run + ex;
        run += all;
    }
    // a tile's start is written by one thread after the last scan's barriers and read by every thread of
    // the block below: without this barrier some read the start of the previous round's list
    __syncthreads();
    if (blockIdx.x == 0 && threadIdx.x == 0) *ntouched = (int)run;
    for (long long t = blockIdx.x; t < nt; t += G) {
        if (tcount[t] == 0) continue;
        const long long lo = t * tw, hi = min(lo + tw, nw);
        long long base = tbase[t];
        uint4 next = lo + threadIdx.x < hi ? words[lo + threadIdx.x] : zero;
        for (long long w0 = lo; w0 < hi; w0 += GJ_T) {  // block-uniform
            const long long w = w0 + threadIdx.x;
            unsigned m = gj_seen_mask(next);
            next = w + GJ_T < hi ? words[w + GJ_T] : zero;
            long long tile;
            int* out = touched + base + gj_block_scan(__popc(m), &tile);
            for (; m; m &= m - 1) *out++ = (int)((w << 4) + __ffs(m) - 1);
            base += tile;
        }
    }
}
"""
SEEN_AHEAD = 4  # words of flags a thread loads at once while counting (one in each of as many tiles)
SEEN_TILES = 8  # tiles per block, about: more balance them better, fewer make every block's scan shorter
LIST_SEEN_KERNEL = PUSH_DEVICE + SCAN_CUDA + LIST_SEEN_CUDA

LIST_SEEN = Kernel(
    LIST_SEEN_KERNEL,
    ("gj_list_seen",),
    defines={**PUSH_DEFINES, "SEEN_AHEAD": SEEN_AHEAD},
    local_budget={"gj_list_seen": 16},
    cooperative=True,
    label="topk-list-seen",
)


def list_seen(push: PushState, blocks: int) -> None:
    """Rebuild ``push.touched`` (and its count) from the seen flags after a push, in vertex order, in a
    cooperative launch of ``blocks`` blocks."""

    def make():
        nw = push.seen_words.size // 16
        tw = THREADS * max(1, -(-nw // (THREADS * SEEN_TILES * blocks)))
        kernel = LIST_SEEN.get("gj_list_seen")
        args = (
            push.seen_words,
            np.int64(push.seen.size),
            np.int64(tw),
            push.touched,
            push.counts[3:],
            push.seen_tiles,
        )
        return kernel, args

    kernel, args = push.args.get(("seen", blocks), make)
    kernel((blocks,), (THREADS,), args)
