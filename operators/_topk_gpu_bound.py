"""GPU candidates and bound reduction of a top-k PPR round (Algorithm 3's candidate line and Alg. 4).

Alg. 4 adds, for every touched start vertex v, w(v) = r(s, v) / omega(v) times each of its walks
that end in the high-IRW set H into est_h (and w(v) ret(v), the walks that returned to the source,
into est_h[nh]). Both steps start from ``gj_round_lists``, where block b of G owns the segment
[b * per, (b + 1) * per) of the touched list (per = ceil(touched / G)) and each vertex of it joins the
candidates when pi0(s, v) >= tau (and, with H, is outside H). Then:

- |H| <= BY_VERTEX_H (the SNAP graphs): the same pass adds each list, a lane per list and the whole
  warp for a list longer than 32 entries (at most |H|), with global atomics; one launch in all.
- Larger H: a hub's list holds up to |H| entries and the touched lists millions, so the work is split
  over the entries. ``gj_round_lists`` notes each vertex's weight, the start of its list and the
  list's offset inside the segment, and writes the segment's entry count and returned mass (it also
  zeroes est_h). ``gj_bound_entries_smem`` then scans the G counts in every block, so that offsets
  are global; warps take chunks of consecutive entries (their owner by one binary search per chunk,
  then by steps ahead) and add into a float copy of est_h in shared memory, flushed into est_h
  (double) with one atomic per nonzero entry (``gj_bound_entries``: into est_h itself when |H|
  does not fit). Block 0 sums the segments' returned mass in a fixed order. With few H vertices,
  contention on the shared copy makes this slower than the first way.

What the pass reads is built once per index and shared by every stream's workspace
(``round_constants``): each H entry is one 32-bit word, the H vertex in the low bits and the walks'
count above (``pack_entries``; 8 bytes in two arrays before), and each start vertex's list start,
length, 1 / omega(v) and returned walks sit in one 32-byte record (four arrays before). With both,
candidates and Alg. 4 at R-MAT 24 top-100 took 0.42 ms instead of 0.49 (one H100). Loading two,
four or eight entries per lane before adding them was no faster (from four on, the registers halve
the blocks per SM).

The float copy: a block's partial sum of one H vertex adds N positive terms, so it is within
(N + 1) 2^-24 of its value (each term and each add rounded once); at R-MAT 24 the estimates were
within 5e-7 of double's, where the walks' sampling error is around 1e-3. Its half size lets two
blocks of 1,024 threads share an SM at |H| = 16,699 (R-MAT 24), which took the pass from 0.56 to
0.38 ms (one H100, k = 100); at one block per SM, double (compare-and-swap loops), float and 64-bit
fixed point (native integer adds) ran alike: the pass waits on memory, not on its atomics.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass

import numpy as np

from graphs._device import array_module, get_kernel, import_cupy

from ._cuda_blocks import SCAN_CUDA
from ._topk_gpu_push import PUSH_DEVICE

BOUND_CHUNK = 8192  # consecutive H entries per warp and step, a search each (512: R-MAT 24 14-16% slower)
MAX_SEGMENTS = 1024  # G: the segments' counts are scanned in shared memory
BY_VERTEX_H = 1024  # |H| up to which each touched vertex's list is added by its lane or warp

BOUND_CUDA = r"""
// a lane adds its vertex's list, or the whole warp one of more than 32 entries (warp-uniform call)
// an H entry is one word: the H vertex in the low `hbits` bits, the walks' count above (pack_entries)
#define GJ_H(x) ((x) & ((1u << hbits) - 1u))
#define GJ_FREQ(x) ((double)((x) >> hbits))
__device__ __forceinline__ void gj_add_lists(double w, long long f, long long len, const unsigned* h_pack,
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
        double tau, const int* h_index, int exclude_h, int* cand, int* ncand, const gj_vertex* vs,
        const gj_hlist* lists, const unsigned* h_pack, int hbits, int nh, int by_vertex, double* est_h,
        double* wv, long long* first, long long* off, long long* seg_entries, double* seg_back) {
    const long long nt = *ntouched, per = (nt + gridDim.x - 1) / gridDim.x;
    const long long lo = min(per * blockIdx.x, nt), hi = min(lo + per, nt);
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (!by_vertex)
        for (long long j = tid; j <= nh; j += (long long)gridDim.x * blockDim.x) est_h[j] = 0.0;
    long long mine = 0, tile;
    double back = 0.0;
    for (long long base = lo; base < hi; base += blockDim.x) {  // block-uniform
        const long long i = base + threadIdx.x;
        long long f = 0, len = 0;
        double w = 0.0;
        if (i < hi) {
            const int v = touched[i];
            if (pi0[v] >= tau && !(exclude_h && h_index[v] >= 0)) gj_append(cand, ncand, v);
            const double rv = vs[v].r;
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
        if (i < hi) { wv[i] = w; first[i] = f; }
        const long long excl = gj_block_scan(len, &tile);
        if (i < hi) off[i] = mine + excl;
        mine += tile;
    }
    back = gj_block_sum(back);
    if (threadIdx.x == 0) {
        if (by_vertex) atomicAdd(&est_h[nh], back);
        else { seg_entries[blockIdx.x] = mine; seg_back[blockIdx.x] = back; }
    }
}
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
// the shared copy of est_h is float (see the module's notes); est_h itself is double
__device__ __forceinline__ void gj_acc_add(double* p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void gj_acc_add(float* p, double v) { atomicAdd(p, (float)v); }
template <typename T>
__device__ __forceinline__ void gj_bound_add(const int* ntouched, int segments, const long long* seg_entries,
        const double* seg_back, const long long* off, const double* wv, const long long* first,
        const unsigned* h_pack, int hbits, int nh, double* est_h, T* acc) {
    __shared__ long long s_base[MAX_SEGMENTS + 1];
    gj_segment_bases(seg_entries, segments, s_base);
    if (blockIdx.x == 0) {  // the returned mass, summed in the same order every time
        double part = 0.0;
        for (int b = threadIdx.x; b < segments; b += blockDim.x) part += seg_back[b];
        part = gj_block_sum(part);
        if (threadIdx.x == 0) est_h[nh] = part;
    }
    const unsigned nt = (unsigned)*ntouched, per = max(1u, (nt + segments - 1) / segments);
    const long long total = s_base[segments], warps = (long long)gridDim.x * blockDim.x >> 5;
    const long long even = ((total + warps - 1) / warps + 31) & ~31LL;  // fewer entries than warps * CHUNK
    const long long chunk = max(32LL, min((long long)BOUND_CHUNK, even));
#define GJ_OFF(i) (s_base[(i) / per] + off[i])
    for (long long base = (((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5) * chunk; base < total;
         base += warps * chunk) {
        unsigned a = 0, b = nt;  // the owner of entry `base`: the last a with GJ_OFF(a) <= base
        while (b - a > 1) { unsigned mid = (a + b) >> 1; if (GJ_OFF(mid) <= base) a = mid; else b = mid; }
        long long at = GJ_OFF(a), next = a + 1 < nt ? GJ_OFF(a + 1) : total;
        long long fa = first[a] - at;  // entry e of the sequence is h_pack[fa + e] while a owns it
        double wa = wv[a];
        for (long long e = base + (threadIdx.x & 31), stop = min(base + chunk, total); e < stop; e += 32) {
            if (next <= e) {
                do { ++a; at = next; next = a + 1 < nt ? GJ_OFF(a + 1) : total; } while (next <= e);
                fa = first[a] - at;
                wa = wv[a];
            }
            const unsigned x = h_pack[fa + e];
            gj_acc_add(&acc[GJ_H(x)], wa * GJ_FREQ(x));
        }
    }
#undef GJ_OFF
}
extern "C" __global__ void __launch_bounds__(1024) gj_bound_entries_smem(const int* ntouched, int segments,
        const long long* seg_entries, const double* seg_back, const long long* off, const double* wv,
        const long long* first, const unsigned* h_pack, int hbits, int nh, double* est_h) {
    extern __shared__ float acc[];
    for (int j = threadIdx.x; j < nh; j += blockDim.x) acc[j] = 0.0;  // (ordered by gj_segment_bases)
    gj_bound_add(ntouched, segments, seg_entries, seg_back, off, wv, first, h_pack, hbits, nh, est_h, acc);
    __syncthreads();
    for (int j = threadIdx.x; j < nh; j += blockDim.x)
        if (acc[j] != 0.0f) atomicAdd(&est_h[j], (double)acc[j]);
}
extern "C" __global__ void gj_bound_entries(const int* ntouched, int segments, const long long* seg_entries,
        const double* seg_back, const long long* off, const double* wv, const long long* first,
        const unsigned* h_pack, int hbits, int nh, double* est_h) {
    gj_bound_add(ntouched, segments, seg_entries, seg_back, off, wv, first, h_pack, hbits, nh, est_h, est_h);
}
"""
BOUND_SOURCE = f"#define BOUND_CHUNK {BOUND_CHUNK}\n#define MAX_SEGMENTS {MAX_SEGMENTS}\n"
BOUND_SOURCE += PUSH_DEVICE + SCAN_CUDA + BOUND_CUDA


def select_and_bound_gpu(q, tau: float, exclude_h: bool) -> None:
    """Append the candidates pi0(s, v) >= tau (outside H when ``exclude_h``) to ``q.ids[nh:]``, counted
    in ``q.counts[6]``; the walk parts of H's estimates into ``q.est_h[:nh]`` and the returned mass
    sum r(v) b_v into ``q.est_h[nh]``. ``q`` is the GPUQuery: ``bigval``, ``shift``, ``off``,
    ``seg_entries`` and ``seg_back`` are its scratch space here, ``bound_by_vertex`` is
    ``nh <= BY_VERTEX_H`` and ``bound_smem`` its ``bound_smem_plan``."""
    a, nh, nt = q.index.arrays, q.nh, q.counts[3:]
    segments, by_vertex = q.seg_entries.size, q.bound_by_vertex
    if by_vertex:
        q.est_h.fill(0)
    c = q.constants
    get_kernel(BOUND_SOURCE, "gj_round_lists")(
        (segments,), (256,),
        (q.touched, nt, q.pi0, np.float64(tau), a["h_index"], np.int32(exclude_h), q.ids[nh:], q.counts[6:],
         q.state, c.lists, c.h_pack, np.int32(c.hbits), np.int32(nh), np.int32(by_vertex), q.est_h,
         q.bigval, q.shift, q.off, q.seg_entries, q.seg_back),
    )  # fmt: skip
    if by_vertex:
        return
    args = (nt, np.int32(segments), q.seg_entries, q.seg_back, q.off, q.bigval, q.shift, c.h_pack,
            np.int32(c.hbits), np.int32(nh), q.est_h)  # fmt: skip
    smem, per_sm = q.bound_smem
    if per_sm:
        get_kernel(BOUND_SOURCE, "gj_bound_entries_smem")(
            (q.sm_blocks * per_sm,), (1024,), args, shared_mem=smem
        )
    else:
        get_kernel(BOUND_SOURCE, "gj_bound_entries")((q.sm_blocks * 8,), (256,), args)


def bound_smem_plan(nh: int) -> tuple[int, int]:
    """Shared memory of one block of ``gj_bound_entries_smem`` (est_h's copy) and how many such blocks
    of 1,024 threads run on an SM at once (0: |H| does not fit; est_h is added to directly)."""
    dev = import_cupy().cuda.Device()
    smem, static = 4 * max(nh, 1), 8 * (MAX_SEGMENTS + 1) + 1024
    if smem + static > dev.attributes["MaxSharedMemoryPerBlockOptin"]:
        return smem, 0
    _allow_dynamic_smem(dev.id)
    return smem, max(1, min(2, dev.attributes["MaxSharedMemoryPerMultiprocessor"] // (smem + static + 1024)))


@functools.cache
def _allow_dynamic_smem(device: int) -> None:
    """Let ``gj_bound_entries_smem`` take all the shared memory a block may opt in to, once per device
    (set per round before, a query over a smaller H could lower it under a concurrent larger one)."""
    kernel = get_kernel(BOUND_SOURCE, "gj_bound_entries_smem")
    optin = import_cupy().cuda.Device(device).attributes["MaxSharedMemoryPerBlockOptin"]
    kernel.max_dynamic_shared_size_bytes = optin - kernel.attributes["shared_size_bytes"]


def segment_count(sm_blocks: int) -> int:
    """G, the number of segments of the touched list (blocks of ``gj_round_lists``)."""
    return min(MAX_SEGMENTS, 4 * sm_blocks)


def pack_entries(hptr, h_end, h_freq, nh: int):
    """The H entries in one 32-bit word each, half the bytes that Alg. 4 reads (NumPy or CuPy arrays).

    A word holds the H vertex in its low ``hbits`` bits and the walks' count above them. A count too
    large for the rest is split over several entries of the same H vertex (their terms add up to the
    same sum), so a start list may grow; returns (its row pointer, the words, ``hbits``).
    """
    xp = array_module(h_end)
    hbits = max(1, int(nh - 1).bit_length())
    fmax = (1 << (32 - hbits)) - 1
    freq = h_freq
    if h_freq.size and int(h_freq.max()) > fmax:
        pieces = (h_freq.astype(xp.int64) + fmax - 1) // fmax
        hptr = hptr + xp.concatenate([xp.zeros(1, dtype=xp.int64), xp.cumsum(pieces - 1)])[hptr]
        entry = xp.repeat(xp.arange(h_freq.size, dtype=xp.int64), pieces)
        first = xp.cumsum(pieces) - pieces  # each entry's first piece; its last piece holds the rest
        last = xp.arange(entry.size, dtype=xp.int64) - first[entry] == pieces[entry] - 1
        freq = xp.where(last, h_freq[entry] - (pieces[entry] - 1) * fmax, fmax)
        h_end = h_end[entry]
    words = h_end.astype(xp.uint32) | (freq.astype(xp.uint32) << xp.uint32(hbits))
    return hptr, words, hbits


@dataclass(frozen=True)
class RoundConstants:
    """What every GPU query workspace of one index reads and none writes (``round_constants``)."""

    inv_omega: object  # 1 / omega(v), double
    lists: object  # gj_hlist records: (n, 4) int64
    h_pack: object  # pack_entries' words
    hbits: int


_BUILD = threading.Lock()


def round_constants(index) -> RoundConstants:
    """Built once per index on the GPU and kept with it, shared by the workspaces of all streams."""
    with _BUILD:
        if "_round_constants" not in index.__dict__:
            cp, a = import_cupy(), index.arrays
            inv_omega = 1.0 / a["omega"].astype(cp.float64)
            hptr, h_pack, hbits = pack_entries(a["hptr"], a["h_end"], a["h_freq"], int(a["high"].size))
            lists = cp.zeros((inv_omega.size, 4), dtype=cp.int64)
            lists[:, 0] = hptr[:-1]
            lists[:, 1] = inv_omega.view(cp.int64)
            lists[:, 2] = cp.diff(hptr)
            lists[:, 3] = a["ret"]  # an int in the low half (little-endian)
            index.__dict__["_round_constants"] = RoundConstants(inv_omega, lists, h_pack, hbits)
    return index.__dict__["_round_constants"]
