"""The round's top k on the GPU: one cooperative launch finds the k-th largest estimate of the round's
list and packs the round's record and the list's top entries into one buffer, so the host makes one
read per round (the list itself, up to |H| + candidates entries, never leaves the device).

The k-th largest is found by radix select over the estimates' float32 bit patterns (order-preserving
for non-negative values, and the same rounding ``select_top`` ranks by): four passes of 8 bits, each
a histogram of the entries that still match the bits chosen so far (per block in shared memory, then
summed in global memory), a grid barrier, and every block picking the same next byte. Entries above
that value go to the "above" part (fewer than k), entries equal to it to the "ties" part (up to
``cap``; the host reads all ties itself in the rare case of more). The host then orders the at most
k + cap entries exactly as ``select_top`` orders the whole list.
"""

from __future__ import annotations

import numpy as np

from graphs._device import import_cupy
from operators._gpu.launch import resident_blocks
from operators._gpu.registry import Kernel
from operators.topk.cpu import select_top, tie_order
from operators.topk.gpu.bound import Candidates
from operators.topk.gpu.push import PushState

HEAD = 8  # record (6), entries above the k-th value, ties at it
THREADS = 256
BLOCKS = 32  # a small grid: lists are |H| + candidates long, and its barriers cost less

ROUND_TOP_KERNEL = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

__device__ __forceinline__ unsigned int gj_key(double x) { return __float_as_uint(__double2float_rn(x)); }

// hist: 4 x 256 counters and cnt: 2 counters, zero on entry and left zero; out: HEAD + 2 k + 2 cap
extern "C" __global__ void __launch_bounds__(256) gj_round_top(const double* est, const int* ids, int offset,
        int* counts, const double* est_h, int nh, const unsigned long long* stats, int k, int cap,
        unsigned int* hist, unsigned int* cnt, double* out) {
    cg::grid_group grid = cg::this_grid();
    __shared__ unsigned int s_hist[256];
    __shared__ unsigned int s_bin, s_want;
    const long long size = offset + (long long)counts[6];
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int prefix = 0, mask = 0, want = (unsigned int)min((long long)k, size);
    for (int pass = 0; pass < 4; ++pass) {
        const int shift = 24 - 8 * pass;
        unsigned int* h = hist + 256 * pass;
        for (int b = threadIdx.x; b < 256; b += blockDim.x) s_hist[b] = 0;
        __syncthreads();
        for (long long i = tid; i < size; i += stride) {
            const unsigned int key = gj_key(est[i]);
            if ((key & mask) == prefix) atomicAdd(&s_hist[(key >> shift) & 255u], 1u);
        }
        __syncthreads();
        for (int b = threadIdx.x; b < 256; b += blockDim.x)
            if (s_hist[b]) atomicAdd(&h[b], s_hist[b]);
        grid.sync();
        if (threadIdx.x < 32) {  // the byte of the want-th largest: lane l reads bins 255 - 8 l - j
            const int lane = threadIdx.x;
            unsigned int c[8], sum = 0;
            for (int j = 0; j < 8; ++j) { c[j] = __ldcg(&h[255 - 8 * lane - j]); sum += c[j]; }
            unsigned int incl = sum;  // entries in the bins above and at this lane's, by a warp scan
            for (int o = 1; o < 32; o <<= 1) {
                const unsigned int y = __shfl_up_sync(0xffffffffu, incl, o);
                if (lane >= o) incl += y;
            }
            unsigned int above = incl - sum;
            if (above < want && want <= incl) {
                int j = 0;
                while (above + c[j] < want) above += c[j++];
                s_bin = (unsigned int)(255 - 8 * lane - j);
                s_want = want - above;
            }
            if (want == 0 && lane == 0) { s_bin = 255u; s_want = 0; }  // an empty list
        }
        __syncthreads();
        prefix |= s_bin << shift;
        mask |= 255u << shift;
        want = s_want;
        __syncthreads();
    }
    const unsigned int kth = prefix;
    double *above_est = out + HEAD, *above_id = above_est + k;
    double *tie_est = above_id + k, *tie_id = tie_est + cap;
    for (long long i = tid; i < size; i += stride) {
        const unsigned int key = gj_key(est[i]);
        if (key > kth) {
            const unsigned int j = atomicAdd(&cnt[0], 1u);
            above_est[j] = est[i];
            above_id[j] = (double)ids[i];
        } else if (key == kth) {
            const unsigned int j = atomicAdd(&cnt[1], 1u);
            if (j < (unsigned int)cap) { tie_est[j] = est[i]; tie_id[j] = (double)ids[i]; }
        }
    }
    grid.sync();
    if (tid == 0) {  // the round's record (candidates, touched, returned mass, pushes, frontiers, edges)
        out[0] = counts[6]; out[1] = counts[3]; out[2] = est_h[nh];
        out[3] = (double)stats[0]; out[4] = (double)stats[1]; out[5] = (double)stats[2];
        out[6] = cnt[0]; out[7] = cnt[1];
        counts[6] = counts[7] = 0; cnt[0] = cnt[1] = 0;
    }
    for (long long i = tid; i < 4 * 256; i += stride) hist[i] = 0;
}
"""

ROUND_TOP = Kernel(
    ROUND_TOP_KERNEL,
    ("gj_round_top",),
    defines={"HEAD": HEAD},
    local_budget={"gj_round_top": 32},
    cooperative=True,
    label="topk-round-top",
)


def _kernel():
    return ROUND_TOP.get("gj_round_top")


class RoundTop:
    """Buffers of ``round_top`` for one query workspace and k (pinned host memory for the one read)."""

    def __init__(self, k: int):
        cp = import_cupy()
        self.k, self.cap = k, 2 * k + 1024
        self.hist = cp.zeros(4 * 256 + 2, dtype=cp.uint32)
        size = HEAD + 2 * k + 2 * self.cap
        self.out = cp.empty(size, dtype=cp.float64)
        mem = cp.cuda.alloc_pinned_memory(size * 8)
        self.host = np.frombuffer(mem, dtype=np.float64, count=size)
        self.copy = (self.host.ctypes.data, self.out.data.ptr, size * 8)  # memcpyAsync's pointers and size
        self.blocks = min(BLOCKS, resident_blocks(_kernel(), THREADS) or BLOCKS)
        self.args = {}  # the kernel's arguments by list offset


class RoundTops:
    """A workspace's round top k: the ``RoundTop`` buffers of every k so far (a captured round holds their
    addresses), those of the last round's k (``current``), and the last round's record (``record``: its
    candidates, touched vertices, returned mass, and the query's pushes, frontiers and edges so far). It
    reads the round's list (``cands``, a ``_topk_gpu_bound.Candidates``) and counts (``push``)."""

    def __init__(self, index, cands: Candidates, push: PushState) -> None:
        self.index = index
        self.cands = cands
        self.push = push
        self.by_k = {}
        self.current: RoundTop | None = None
        self.record = np.zeros(6)

    def launch(self, ids, offset: int, k: int) -> None:
        """Queue the kernel and the copy of its buffer into pinned host memory on the current stream (the
        list is ``ids[:offset + candidates]`` with estimates ``cands.est``)."""
        c, p = self.cands, self.push
        top = self.current = self.by_k.get(k) or self.by_k.setdefault(k, RoundTop(k))
        args = top.args.get(offset)
        if args is None:
            args = top.args[offset] = (
                c.est,
                ids,
                np.int32(offset),
                p.counts,
                c.est_h,
                np.int32(c.nh),
                p.stats,
                np.int32(k),
                np.int32(top.cap),
                top.hist[:1024],
                top.hist[1024:],
                top.out,
            )
        _kernel()((top.blocks,), (THREADS,), args)
        # ``top.out.get(out=top.host, blocking=False)`` without its checks (host time a round)
        cp = import_cupy()
        cp.cuda.runtime.memcpyAsync(
            *top.copy, cp.cuda.runtime.memcpyDeviceToHost, cp.cuda.get_current_stream().ptr
        )

    def use(self, k: int) -> None:
        """The last round's copy landed in k's buffers (a round replayed as a graph)."""
        self.current = self.by_k[k]

    def read(self, ids, offset: int, k: int):
        """Once ``launch``'s copy has arrived: the round's record (``record``) and its list's top k, host
        arrays of vertex ids and estimates, decreasing, ties ranked as ``select_top`` ranks them."""
        cp = import_cupy()
        top = self.current
        h = top.host
        self.record = h[:6].copy()
        above, ties = int(h[6]), int(h[7])
        a0, t0 = HEAD, HEAD + 2 * k
        est = np.concatenate((h[a0 : a0 + above], h[t0 : t0 + min(ties, top.cap)]))
        verts = np.concatenate(
            (h[a0 + k : a0 + k + above], h[t0 + top.cap : t0 + top.cap + min(ties, top.cap)])
        )
        if ties > top.cap:  # more entries equal to the k-th value than the buffer holds: read them all
            size = offset + int(self.record[0])
            est_all = self.cands.est
            sel = cp.flatnonzero(est_all[:size].astype(cp.float32) == np.float32(h[t0]))
            est = np.concatenate((est[:above], est_all[sel].get()))
            verts = np.concatenate((verts[:above], ids[sel].get().astype(np.float64)))
        verts = verts.astype(np.int64)
        best = select_top(verts, est, k, tie_order(self.index)[0])
        return verts[best], est[best]

    def close(self) -> None:
        """Drop the buffers of every k."""
        self.by_k = self.current = None
