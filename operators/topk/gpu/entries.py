"""Alg. 4's pass over the H entries of a top-k PPR round, for |H| > BY_VERTEX_H (``_topk_gpu_bound``).

``gj_round_lists`` has kept, in each segment's first slots, the touched lists that have entries (w(v)
as a float, where the list starts in the segment's sequence of entries, and that place's distance to
the list in ``h_pack``), with the segment's entry and list counts and returned mass.
``gj_bound_entries_smem`` scans the entry counts, so that places are global; each warp takes BOUND_SPREAD
or more chunks of consecutive entries, strided over the sequence (in a degree-ordered graph the hubs' long
lists, whose steps are cheap, come first, and one chunk a warp would leave the warps of the short lists to
run last), finds the list of its first entry by binary search and then holds the next 32 lists in its
lanes (a step costs ballots and a few shuffles; up to BOUND_WAYS entries a lane, while the lists starting
in them fit the window, so that several loads are in flight; steps of BOUND_FAST x 32 entries inside one
list skip the window's work), adding w(v) f into a float copy of est_h in shared memory, flushed into
est_h (double) with one atomic per nonzero entry. When |H| does not fit in the block's opt-in shared
memory, the copy holds the first ``ncache`` H vertices, those of the most entries in a degree-ordered
graph, and the others' terms go to est_h itself, as all of them do in ``gj_bound_entries``. Places are
32-bit below WIDE_ENTRIES H entries, so that two blocks of 1,024 threads fit an SM. Block 0 sums the
segments' returned mass in a fixed order.

The float copy: a block's partial sum of one H vertex adds N positive terms, so it is within
(N + 2) 2^-24 of its value (w(v) and each term rounded once, each add once), where the walks'
sampling error is around 1e-3. A float add to shared memory is a compare-and-swap loop on sm_90
(ATOMS.CAST.SPIN). Measurements behind these choices: benchmarks/RESULTS.md (top-k section).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np

from graphs._device import import_cupy
from operators._gpu.blocks import SCAN_CUDA
from operators._gpu.device import shared_memory_optin, shared_memory_per_sm
from operators._gpu.registry import Kernel

if TYPE_CHECKING:  # (bound imports this module)
    from operators.topk.gpu.bound import Candidates

BOUND_CHUNK = 8192  # consecutive H entries a warp takes at once, a search each (smaller: more searches)
# chunks a warp takes, at least (strided over the sequence), where chunks stay within BOUND_CHUNK
BOUND_SPREAD = 4
MAX_SEGMENTS = 1024  # G: the segments' counts are scanned in shared memory
BOUND_WAYS = 4  # entries per lane and step of the entry pass, at most (loads in flight)
# entries per lane and step inside one list, without the window's work (fewer instructions a step);
# tuned on the benchmark graphs (benchmarks/RESULTS.md, top-k section)
BOUND_FAST = 4
WIDE_ENTRIES = 2**30  # from this many H entries on, their places are 64-bit (32-bit sums stay below 2^31)
MIN_CACHE = 4096  # fewest H vertices worth a shared copy of their part of est_h (else all go to est_h)

ENTRIES_CUDA = r"""
// an H entry is one word (gj_hword: 16 or 32 bits): the H vertex in the low `hbits` bits, the walks'
// count less one above (pack_entries)
#define GJ_H(x) ((x) & ((1u << hbits) - 1u))
#define GJ_COUNT(x) ((float)(((x) >> hbits) + 1u))
// s_base[b]: the first entry of segment b in the whole sequence; s_base[segments]: all entries
__device__ __forceinline__ void gj_segment_bases(const long long* seg_entries, int segments,
        long long* s_base) {
    long long run = 0, tile;
    for (int b0 = 0; b0 < segments; b0 += blockDim.x) {  // block-uniform
        const int b = b0 + threadIdx.x;
        const long long excl = gj_block_scan(b < segments ? seg_entries[b] : 0, &tile);
        if (b < segments) s_base[b] = run + excl;
        run += tile;
    }
    if (threadIdx.x == 0) s_base[segments] = run;
    __syncthreads();
}
// H vertex h's term: into the block's float copy of est_h (see the module's notes), which holds only the
// first ncache H vertices when SPLIT (the others' terms go to est_h itself, in double); with no copy (acc
// is est_h) always into est_h
template <bool SPLIT>
__device__ __forceinline__ void gj_h_add(double* acc, double*, int, unsigned h, float v) {
    atomicAdd(&acc[h], (double)v);
}
template <bool SPLIT>
__device__ __forceinline__ void gj_h_add(float* acc, double* est_h, int ncache, unsigned h, float v) {
    if (!SPLIT || h < (unsigned)ncache) atomicAdd(&acc[h], v);
    else atomicAdd(&est_h[h], (double)v);
}
// the OR of every lane's `bits` (a warp-wide reduction: native from sm_80 on)
__device__ __forceinline__ unsigned gj_warp_or(unsigned bits) {
#if __CUDA_ARCH__ >= 800
    return __reduce_or_sync(0xffffffffu, bits);
#else
    for (int o = 16; o > 0; o >>= 1) bits |= __shfl_xor_sync(0xffffffffu, bits, o);
    return bits;
#endif
}
// the entry pass's parameters, the same for its three kernels (with ncache: see gj_h_add)
#define GJ_ENTRY_PARAMS const int* ntouched, int segments, const long long* seg_entries, \
        const int* seg_owners, const double* seg_back, const gj_eoff* off, const float* wv, \
        const gj_eoff* gap, const gj_hword* h_pack, int hbits, int nh, double* est_h
#define GJ_ENTRY_ARGS \
    ntouched, segments, seg_entries, seg_owners, seg_back, off, wv, gap, h_pack, hbits, nh, est_h
// A warp adds entries [base, stop) of the sequence, 32 to 32 GJ_WAYS a step. Segment b's lists sit at
// slots [per * b, per * b + seg_owners[b]) of off (first entry inside the segment) / gap / wv, none
// empty. The list of the first entry is found by binary search; after that the warp keeps the next 32
// lists in its lanes (a window): the lists starting inside a step are a ballot, each entry's list the
// count of them starting at or before it, and the window moves on by that count. No lane walks list
// by list (that would be a divergent walk with a division per list).
template <bool SPLIT, typename T>
__device__ __forceinline__ void gj_bound_add(GJ_ENTRY_PARAMS, T* acc, int ncache) {
    __shared__ long long s_base[MAX_SEGMENTS + 1];
    gj_segment_bases(seg_entries, segments, s_base);
    if (blockIdx.x == 0) {  // the returned mass, summed in the same order every time
        double part = 0.0;
        for (int b = threadIdx.x; b < segments; b += blockDim.x) part += seg_back[b];
        part = gj_block_sum(part);
        if (threadIdx.x == 0) est_h[nh] = part;
    }
    const unsigned full = 0xffffffffu;
    const int lane = threadIdx.x & 31;
    const long long nt = *ntouched, per = max(1LL, (nt + segments - 1) / segments);
    const gj_eoff total = (gj_eoff)s_base[segments], warps = (gj_eoff)(gridDim.x * blockDim.x >> 5);
    const gj_eoff spread = warps * BOUND_SPREAD;  // below spread * CHUNK entries: chunks of a warp
    const gj_eoff even = ((total + spread - 1) / spread + 31) & ~(gj_eoff)31;
    const gj_eoff chunk = max((gj_eoff)32, min((gj_eoff)BOUND_CHUNK, even));
    for (gj_eoff base = (gj_eoff)((blockIdx.x * blockDim.x + threadIdx.x) >> 5) * chunk; base < total;
         base += warps * chunk) {
        const gj_eoff stop = min(base + chunk, total);
        for (gj_eoff pos = base; pos < stop;) {  // a piece per segment that the chunk overlaps
            int b = 0, b1 = segments;  // the last b with s_base[b] <= pos (it has entries)
            while (b1 - b > 1) { const int m = (b + b1) >> 1; if (s_base[m] <= pos) b = m; else b1 = m; }
            const gj_eoff sb0 = (gj_eoff)s_base[b], lend = min(stop, (gj_eoff)s_base[b + 1]) - sb0;
            const int lo = (int)(per * b), hi = lo + seg_owners[b];  // slots: below nt < 2^31
            gj_eoff sb = pos - sb0;
            int a = lo, a1 = hi;  // the list holding local entry sb
            while (a1 - a > 1) { const int mid = (a + a1) >> 1; if (off[mid] <= sb) a = mid; else a1 = mid; }
            gj_eoff G0 = gap[a];
            float W0 = wv[a];
            int j = a + 1 + lane;  // lane's window list (none: lend, whose positions are not added)
            gj_eoff Oj = j < hi ? off[j] : lend, Gj = j < hi ? gap[j] : 0;
            float Wj = j < hi ? wv[j] : 0.0f;
            for (gj_eoff span; sb < lend; sb += span) {
                // the steps inside list a: no window work, the weight and gap known (warp-uniform)
                for (const gj_eoff run = min(__shfl_sync(full, Oj, 0), lend); sb + 32 * GJ_FAST <= run;
                     sb += 32 * GJ_FAST) {
                    unsigned y[GJ_FAST];
#pragma unroll
                    for (int q = 0; q < GJ_FAST; ++q) y[q] = h_pack[G0 + sb + 32 * q + lane];
#pragma unroll
                    for (int q = 0; q < GJ_FAST; ++q)
                        gj_h_add<SPLIT>(acc, est_h, ncache, GJ_H(y[q]), W0 * GJ_COUNT(y[q]));
                }
                if (sb >= lend) break;
                // up to GJ_WAYS x 32 entries a step, GJ_WAYS per lane, while the lists starting in them fit
                // the window (fewer than 32 of them: then no list past the window starts inside)
                const gj_eoff d = Oj - sb;  // where window list `lane` starts from this step on (>= 0)
                span = 32;
#pragma unroll
                for (int q = GJ_WAYS; q > 1; q >>= 1)
                    if (span == 32 && __popc(__ballot_sync(full, d < 32 * q)) < 32) span = 32 * q;
                const int c = __popc(__ballot_sync(full, d < span));
                const unsigned up = full >> (31 - lane);
                int before = 0;
                unsigned x[GJ_WAYS];
                float w[GJ_WAYS];
#pragma unroll
                for (int q = 0; q < GJ_WAYS; ++q) {  // list k of entry sb + 32 q + lane: 0 is list a
                    const bool in = 32 * q < span && d >= 32 * q && d < 32 * q + 32;
                    const unsigned bits = 32 * q < span ? gj_warp_or(in ? 1u << (d - 32 * q) : 0u) : 0u;
                    const int k = before + __popc(bits & up);
                    before += __popc(bits);
                    const gj_eoff g = __shfl_sync(full, Gj, max(k - 1, 0)), e = sb + 32 * q + lane;
                    const float wk = __shfl_sync(full, Wj, max(k - 1, 0));
                    x[q] = 32 * q < span && e < lend ? h_pack[(k ? g : G0) + e] : 0u;
                    w[q] = 32 * q < span && e < lend ? (k ? wk : W0) : 0.0f;  // 0: nothing to add
                }
                if (c) {  // the last list starting in this step holds the next step's first entry; the next
                    // window's loads go out before this step's adds
                    G0 = __shfl_sync(full, Gj, c - 1);
                    W0 = __shfl_sync(full, Wj, c - 1);
                    a += c;
                    Oj = __shfl_down_sync(full, Oj, c);
                    Gj = __shfl_down_sync(full, Gj, c);
                    Wj = __shfl_down_sync(full, Wj, c);
                    if (lane + c >= 32) {
                        j = a + 1 + lane;
                        Oj = j < hi ? off[j] : lend;
                        Gj = j < hi ? gap[j] : 0;
                        Wj = j < hi ? wv[j] : 0.0f;
                    }
                }
#pragma unroll
                for (int q = 0; q < GJ_WAYS; ++q)
                    if (w[q] != 0.0f)
                        gj_h_add<SPLIT>(acc, est_h, ncache, GJ_H(x[q]), w[q] * GJ_COUNT(x[q]));
            }
            pos = sb0 + lend;
        }
    }
}
template <bool SPLIT> __device__ __forceinline__ void gj_bound_smem(GJ_ENTRY_PARAMS, int ncache) {
    extern __shared__ float acc[];
    for (int j = threadIdx.x; j < ncache; j += blockDim.x) acc[j] = 0.0;  // (ordered by gj_segment_bases)
    gj_bound_add<SPLIT>(GJ_ENTRY_ARGS, acc, ncache);
    __syncthreads();
    for (int j = threadIdx.x; j < ncache; j += blockDim.x)
        if (acc[j] != 0.0f) atomicAdd(&est_h[j], (double)acc[j]);
}
// ncache = nh: all of H in the shared copy
extern "C" __global__ void __launch_bounds__(1024, 2) gj_bound_entries_smem(GJ_ENTRY_PARAMS, int ncache) {
    gj_bound_smem<false>(GJ_ENTRY_ARGS, ncache);
}
// ncache < nh: H's first ncache vertices in the shared copy
extern "C" __global__ void __launch_bounds__(1024, 2) gj_bound_entries_split(GJ_ENTRY_PARAMS, int ncache) {
    gj_bound_smem<true>(GJ_ENTRY_ARGS, ncache);
}
// no copy: every term into est_h
extern "C" __global__ void gj_bound_entries(GJ_ENTRY_PARAMS, int) {
    gj_bound_add<false>(GJ_ENTRY_ARGS, est_h, 0);
}
"""


def entry_types(wide: bool, narrow: bool = True) -> dict:
    """The defines of the types ``gj_eoff`` (an entry's place in a round's sequence: 64-bit when ``wide``)
    and ``gj_hword`` (an H entry: 16 bits when ``narrow``, else 32; ``_topk_gpu_lists.pack_entries``)."""
    return {"GJ_EOFF": "long long" if wide else "int", "GJ_HWORD": "unsigned short" if narrow else "unsigned"}


TYPES_CUDA = "typedef GJ_EOFF gj_eoff;\ntypedef GJ_HWORD gj_hword;\n"


def entries_variant(wide: bool, narrow: bool = True) -> dict:
    """One variant of ``ENTRIES``: ``entry_types`` and the entries per lane and step inside one list."""
    return {**entry_types(wide, narrow), "GJ_FAST": BOUND_FAST}


# the entry pass runs two blocks of 1,024 threads per SM, so 32 registers: with four entries per lane in
# flight (GJ_WAYS) its shared-copy kernels spill 16 bytes (nvcc, sm_90), and beat two (8) and one (none)
ENTRIES = Kernel(
    TYPES_CUDA + SCAN_CUDA + ENTRIES_CUDA,
    ("gj_bound_entries_smem", "gj_bound_entries_split", "gj_bound_entries"),
    defines={
        "BOUND_CHUNK": BOUND_CHUNK,
        "MAX_SEGMENTS": MAX_SEGMENTS,
        "GJ_WAYS": BOUND_WAYS,
        "BOUND_SPREAD": BOUND_SPREAD,
    },
    variants=(entries_variant(False, True), entries_variant(False, False)),
    spill_budget={"gj_bound_entries_smem": 16, "gj_bound_entries_split": 16},
    local_budget={"gj_bound_entries_smem": 16, "gj_bound_entries_split": 16},
    label="topk-entries",
)


def bound_entries(c: Candidates, in_flight: int, args, wide: bool, narrow: bool) -> None:
    """Launch the entry pass on ``args`` (``_topk_gpu_bound.Candidates.select_and_bound``; ``c`` is that
    part): into a shared copy of est_h, or of its first part when ``c.bound_smem`` says that all of it
    does not fit, else into est_h itself. With several queries in flight (``in_flight`` > 1) it takes one
    block an SM, leaving the rest to their other kernels: batches gain throughput at some cost to a lone
    query's latency."""

    def make():
        smem, per_sm, ncache = c.bound_smem
        if per_sm:
            kernel, fit = _smem_kernel(import_cupy().cuda.Device().id, wide, ncache < c.nh, narrow)
            per = min(per_sm, fit) if in_flight == 1 else 1
            return kernel, (c.sm_blocks * per,), (1024,), (*args, np.int32(ncache)), smem
        return (
            ENTRIES.get("gj_bound_entries", **entries_variant(wide, narrow)),
            (c.sm_blocks * 8,),
            (256,),
            (*args, np.int32(0)),
            0,
        )

    key = ("entries", c.bound_smem, in_flight == 1, wide, narrow)
    kernel, grid, block, full, smem = c.args.get(key, make)
    kernel(grid, block, full, shared_mem=smem)


def bound_smem_plan(nh: int) -> tuple[int, int, int]:
    """Shared memory of one block of ``gj_bound_entries_smem`` (a float copy of est_h's first ``ncache``
    entries: all of H when it fits), how many such blocks of 1,024 threads run on an SM at once (0: no
    copy; est_h is added to directly) and ``ncache``."""
    static = 8 * (MAX_SEGMENTS + 1) + 1024
    ncache = min(max(nh, 1), (shared_memory_optin() - static) // 4)
    smem = 4 * ncache
    if ncache < min(max(nh, 1), MIN_CACHE):
        return smem, 0, 0
    per_sm = max(1, min(2, shared_memory_per_sm() // (smem + static + 1024)))
    return smem, per_sm, ncache


@functools.cache
def _smem_kernel(device: int, wide: bool, split: bool = False, narrow: bool = True):
    """``gj_bound_entries_smem`` allowed all the shared memory a block may opt in to (once per device: set
    per round, a query over a smaller H could lower it under a concurrent larger one), and how many of its
    blocks of 1,024 threads the registers let run on an SM at once."""
    name = "gj_bound_entries_split" if split else "gj_bound_entries_smem"
    kernel = ENTRIES.get(name, **entries_variant(wide, narrow))
    optin = import_cupy().cuda.Device(device).attributes["MaxSharedMemoryPerBlockOptin"]
    kernel.max_dynamic_shared_size_bytes = optin - kernel.attributes["shared_size_bytes"]
    return kernel, max(1, 65536 // (1024 * kernel.attributes["num_regs"]))


def segment_count(sm_blocks: int) -> int:
    """G, the number of segments of the touched list (blocks of ``gj_round_lists``)."""
    return min(MAX_SEGMENTS, 4 * sm_blocks)
