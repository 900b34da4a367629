"""GPU candidates and bound reduction of a top-k PPR round (Algorithm 3's candidate line and Alg. 4).

Alg. 4 adds, for every touched start vertex v, w(v) = r(s, v) / omega(v) times each of its walks
that end in the high-IRW set H into est_h (and w(v) ret(v), the walks that returned to the source,
into est_h[nh]). Both steps start from ``gj_round_lists``, where block b of G owns the segment
[b * per, (b + 1) * per) of the touched list (per = ceil(touched / G)) and each vertex of it joins the
candidates when pi0(s, v) >= tau (and, with H, is outside H). Then:

- |H| <= BY_VERTEX_H (the SNAP graphs): the same pass adds each list, a lane per list and the whole
  warp for a list longer than 32 entries (at most |H|), with global atomics; one launch in all.
- Larger H: the work is split over the entries. ``gj_round_lists`` keeps, in each segment's first
  slots, the lists that have entries (w(v) as a float, where the list starts in the segment's
  sequence of entries, and that place's distance to the list in ``h_pack``), and writes the
  segment's entry and list counts and returned mass (it also zeroes est_h); the pass over the
  entries is ``_topk_gpu_entries``. With few H vertices, contention on its shared copy of est_h makes
  that slower than the first way.

A claimed vertex has bit 2 of its flags set (``_topk_gpu_push``): pi0 is read only there. What the
pass reads of the index is built once per index (``_topk_gpu_lists``).
"""

from __future__ import annotations

import numpy as np

from graphs._device import import_cupy
from operators._gpu.blocks import SCAN_CUDA
from operators._gpu.registry import Kernel
from operators.topk.gpu.args import LaunchArgs
from operators.topk.gpu.entries import (
    TYPES_CUDA,
    WIDE_ENTRIES,
    bound_entries,
    bound_smem_plan,
    entry_types,
    segment_count,
)
from operators.topk.gpu.lists import round_constants
from operators.topk.gpu.push import PUSH_DEFINES, PUSH_DEVICE, QP_TAU, PushState, RoundParams

BY_VERTEX_H = 1024  # |H| up to which each touched vertex's list is added by its lane or warp

BOUND_CUDA = r"""
// a lane adds its vertex's list, or the whole warp one of more than 32 entries (warp-uniform call)
// an H entry is one word (gj_hword: 16 or 32 bits): the H vertex in the low `hbits` bits, the walks'
// count less one above (pack_entries)
#define GJ_H(x) ((x) & ((1u << hbits) - 1u))
#define GJ_FREQ(x) ((double)(((x) >> hbits) + 1u))
__device__ __forceinline__ void gj_add_lists(double w, long long f, long long len, const gj_hword* h_pack,
        int hbits, double* est_h) {
    const unsigned full = 0xffffffffu;
    const bool shared = len > 32;
    for (long long e = f; !shared && e < f + len; ++e) {
        const unsigned x = h_pack[e];
        atomicAdd(&est_h[GJ_H(x)], w * GJ_FREQ(x));
    }
    for (unsigned many = __ballot_sync(full, shared); many; many &= many - 1) {
        const int src = __ffs(many) - 1;
        const long long f2 = __shfl_sync(full, f, src), n2 = __shfl_sync(full, len, src);
        const double w2 = __shfl_sync(full, w, src);
        for (long long e = f2 + (threadIdx.x & 31); e < f2 + n2; e += 32) {
            const unsigned x = h_pack[e];
            atomicAdd(&est_h[GJ_H(x)], w2 * GJ_FREQ(x));
        }
    }
}
// what a round reads of a start vertex's H list, in one sector (round_constants): the list's first entry and
// length, 1 / omega(v) and ret(v), its walks that returned to the source
struct __align__(32) gj_hlist { long long first; double inv_omega; long long len; int ret; int pad; };
// by_vertex: est_h was zeroed before the launch; otherwise this zeroes it for gj_bound_entries
extern "C" __global__ void gj_round_lists(const int* touched, const int* ntouched, const double* pi0,
        const double* qp, const int* h_index, int exclude_h, int* cand, int* ncand, const gj_vertex* vs,
        const gj_hlist* lists, const gj_hword* h_pack, int hbits, int nh, int by_vertex, double* est_h,
        float* wv, gj_eoff* gap, gj_eoff* off, long long* seg_entries, int* seg_owners, double* seg_back) {
    const double tau = qp[GJ_QP_TAU];
    const long long nt = *ntouched, per = (nt + gridDim.x - 1) / gridDim.x;
    const long long lo = min(per * blockIdx.x, nt), hi = min(lo + per, nt);
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (!by_vertex)
        for (long long j = tid; j <= nh; j += (long long)gridDim.x * blockDim.x) est_h[j] = 0.0;
    long long mine = 0, tile;
    int owners = 0;
    double back = 0.0;
    for (long long base = lo; base < hi; base += blockDim.x) {  // block-uniform
        const long long i = base + threadIdx.x;
        long long f = 0, len = 0;
        double w = 0.0;
        if (i < hi) {
            const int v = touched[i];
            const gj_vertex x = vs[v];  // pi0(v) > 0 only if claimed (bit 2): read only then
            if ((x.mark & 4) && pi0[v] >= tau && !(exclude_h && h_index[v] >= 0)) gj_append(cand, ncand, v);
            const double rv = x.r;
            if (rv > 0.0) {
                const gj_hlist L = lists[v];
                w = rv * L.inv_omega;
                back += w * L.ret;
                f = L.first;
                len = L.len;
            }
        }
        if (by_vertex) {
            gj_add_lists(w, f, len, h_pack, hbits, est_h);
            continue;
        }
        // the lists with entries, compacted to the segment's first slots: (entries, lists) in one scan
        const long long packed = gj_block_scan(len << 10 | (len > 0), &tile);
        if (len > 0) {  // entry e of the segment's sequence, in this list, is h_pack[gap + e]
            const long long slot = lo + owners + (packed & 1023), o = mine + (packed >> 10);
            wv[slot] = (float)w;
            gap[slot] = (gj_eoff)(f - o);
            off[slot] = (gj_eoff)o;
        }
        mine += tile >> 10;
        owners += (int)(tile & 1023);
    }
    back = gj_block_sum(back);
    if (threadIdx.x == 0) {
        if (by_vertex) atomicAdd(&est_h[nh], back);
        else { seg_entries[blockIdx.x] = mine; seg_owners[blockIdx.x] = owners; seg_back[blockIdx.x] = back; }
    }
}
"""


# ``gj_round_lists``, its variants ``entry_types(wide, narrow)``
BOUND = Kernel(
    TYPES_CUDA + PUSH_DEVICE + SCAN_CUDA + BOUND_CUDA,
    ("gj_round_lists",),
    defines=PUSH_DEFINES,
    variants=(entry_types(False, True), entry_types(False, False)),
    label="topk-bound",
)


class Candidates:
    """A round's list and Alg. 4's buffers: ``ids`` holds the high-IRW set H, then the round's candidates,
    ``est`` their estimates (Alg. 6, ``_topk_gpu_estimate.compute_ppr_gpu``), ``est_h`` the walk parts of
    H's estimates and, last, the returned mass; ``seg_*`` the segments' entry counts, returned mass and
    lists with entries (``gj_round_lists``). ``bound_by_vertex`` is ``nh <= BY_VERTEX_H`` and
    ``bound_smem`` its ``_topk_gpu_entries.bound_smem_plan``. It reads the push's vertex state and
    scratch (``push``) and the round's parameters (``params``); what it reads of the index is built once
    per index (``_topk_gpu_lists.round_constants``)."""

    def __init__(self, index, push: PushState, params: RoundParams, sm_blocks: int) -> None:
        cp = import_cupy()
        n = index.graph.n
        self.index = index
        self.push = push
        self.params = params
        self.sm_blocks = sm_blocks  # the device's SMs: grids are multiples of it
        self.constants = round_constants(index)
        self.nh = int(index.arrays["high"].size)
        self.ids = cp.empty(self.nh + n, dtype=cp.int32)
        self.ids[: self.nh] = index.arrays["high"]
        self.est = cp.empty(self.nh + n, dtype=cp.float64)
        self.est_h = cp.zeros(self.nh + 1, dtype=cp.float64)
        self.seg_entries = cp.empty(segment_count(sm_blocks), dtype=cp.int64)  # Alg. 4's segments
        self.seg_back = cp.empty(self.seg_entries.size, dtype=cp.float64)
        self.seg_owners = cp.empty(self.seg_entries.size, dtype=cp.int32)  # lists with entries per segment
        self.bound_by_vertex, self.bound_smem = self.nh <= BY_VERTEX_H, bound_smem_plan(self.nh)
        self.args = LaunchArgs()

    def select_and_bound(self, tau: float, exclude_h: bool, in_flight: int) -> None:
        """Append the candidates pi0(s, v) >= tau (outside H when ``exclude_h``) to ``ids[nh:]``, counted
        in the push's ``counts[6]``; the walk parts of H's estimates into ``est_h[:nh]`` and the returned
        mass sum r(v) b_v into ``est_h[nh]``. The push's ``bigval``, ``shift`` and ``off`` are scratch
        space here; ``in_flight``: queries running at once on the GPU (``bound_entries``)."""
        if self.bound_by_vertex:
            self.est_h.fill(0)
        self.params.set(QP_TAU, tau)
        self.params.send()
        key = ("lists", exclude_h, self.bound_by_vertex)
        kernel, args, entries = self.args.get(key, lambda: _round_args(self, exclude_h))
        kernel((self.seg_entries.size,), (256,), args)
        if entries is not None:
            bound_entries(self, in_flight, *entries)

    def close(self) -> None:
        """Drop the buffers (and the kernel arguments that hold them)."""
        self.args.close()
        self.ids = self.est = self.est_h = self.seg_entries = self.seg_back = self.seg_owners = None


def _round_args(c: Candidates, exclude_h: bool):
    """``gj_round_lists`` and its arguments, and those of the entry pass (None by vertex)."""
    p = c.push
    a, nh, nt = c.index.arrays, c.nh, p.counts[3:]
    segments, by_vertex = c.seg_entries.size, c.bound_by_vertex
    k = c.constants
    wide, narrow = k.h_pack.size >= WIDE_ENTRIES, k.h_pack.dtype == np.uint16
    eoff = np.int64 if wide else np.int32
    # scratch: each list's weight (float), gap (its first entry minus its place) and place in its segment
    wv, gap, off = p.bigval.view(np.float32), p.shift.view(eoff), p.off.view(eoff)
    lists = (
        p.touched,
        nt,
        p.pi0,
        c.params.qp,
        a["h_index"],
        np.int32(exclude_h),
        c.ids[nh:],
        p.counts[6:],
        p.state,
        k.lists,
        k.h_pack,
        np.int32(k.hbits),
        np.int32(nh),
        np.int32(by_vertex),
        c.est_h,
        wv,
        gap,
        off,
        c.seg_entries,
        c.seg_owners,
        c.seg_back,
    )
    entries = None
    if not by_vertex:
        args = (
            nt,
            np.int32(segments),
            c.seg_entries,
            c.seg_owners,
            c.seg_back,
            off,
            wv,
            gap,
            k.h_pack,
            np.int32(k.hbits),
            np.int32(nh),
            c.est_h,
        )
        entries = (args, wide, narrow)
    return BOUND.get("gj_round_lists", **entry_types(wide, narrow)), lists, entries
