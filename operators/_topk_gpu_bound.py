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

The float copy: a block's partial sum of one H vertex adds N positive terms, so it is within
(N + 1) 2^-24 of its value (each term and each add rounded once); at R-MAT 24 the estimates were
within 5e-7 of double's, where the walks' sampling error is around 1e-3. Its half size lets two
blocks of 1,024 threads share an SM at |H| = 16,699 (R-MAT 24), which took the pass from 0.56 to
0.38 ms (one H100, k = 100); at one block per SM, double (compare-and-swap loops), float and 64-bit
fixed point (native integer adds) ran alike: the pass waits on memory, not on its atomics.
"""

from __future__ import annotations

import functools

import numpy as np

from graphs._device import get_kernel, import_cupy

from ._topk_gpu_push import PUSH_DEVICE, SCAN_CUDA

BOUND_CHUNK = 8192  # consecutive H entries per warp and step, a search each (512: R-MAT 24 14-16% slower)
MAX_SEGMENTS = 1024  # G: the segments' counts are scanned in shared memory
BY_VERTEX_H = 1024  # |H| up to which each touched vertex's list is added by its lane or warp

BOUND_CUDA = r"""
// a lane adds its vertex's list, or the whole warp one of more than 32 entries (warp-uniform call)
__device__ __forceinline__ void gj_add_lists(double w, long long f, long long len, const int* h_end,
        const int* h_freq, double* est_h) {
    const unsigned full = 0xffffffffu;
    const bool shared = len > 32;
    if (!shared) for (long long e = f; e < f + len; ++e) atomicAdd(&est_h[h_end[e]], w * h_freq[e]);
    for (unsigned many = __ballot_sync(full, shared); many; many &= many - 1) {
        const int src = __ffs(many) - 1;
        const long long f2 = __shfl_sync(full, f, src), n2 = __shfl_sync(full, len, src);
        const double w2 = __shfl_sync(full, w, src);
        for (long long e = f2 + (threadIdx.x & 31); e < f2 + n2; e += 32)
            atomicAdd(&est_h[h_end[e]], w2 * h_freq[e]);
    }
}
// by_vertex: est_h was zeroed before the launch; otherwise this zeroes it for gj_bound_entries
extern "C" __global__ void gj_round_lists(const int* touched, const int* ntouched, const double* pi0,
        double tau, const int* h_index, int exclude_h, int* cand, int* ncand, const gj_vertex* vs,
        const double* inv_omega, const int* ret, const long long* hptr, const int* h_end, const int* h_freq,
        int nh, int by_vertex, double* est_h, double* wv, long long* first, long long* off,
        long long* seg_entries, double* seg_back) {
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
            if (rv > 0.0) { w = rv * inv_omega[v]; back += w * ret[v]; f = hptr[v]; len = hptr[v + 1] - f; }
        }
        if (by_vertex) {
            gj_add_lists(w, f, len, h_end, h_freq, est_h);
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
        const int* h_end, const int* h_freq, int nh, double* est_h, T* acc) {
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
        for (long long e = base + (threadIdx.x & 31), stop = min(base + chunk, total); e < stop; e += 32) {
            while (next <= e) { ++a; at = next; next = a + 1 < nt ? GJ_OFF(a + 1) : total; }
            const long long x = first[a] + (e - at);
            gj_acc_add(&acc[h_end[x]], wv[a] * h_freq[x]);
        }
    }
#undef GJ_OFF
}
extern "C" __global__ void __launch_bounds__(1024) gj_bound_entries_smem(const int* ntouched, int segments,
        const long long* seg_entries, const double* seg_back, const long long* off, const double* wv,
        const long long* first, const int* h_end, const int* h_freq, int nh, double* est_h) {
    extern __shared__ float acc[];
    for (int j = threadIdx.x; j < nh; j += blockDim.x) acc[j] = 0.0;  // (ordered by gj_segment_bases)
    gj_bound_add(ntouched, segments, seg_entries, seg_back, off, wv, first, h_end, h_freq, nh, est_h, acc);
    __syncthreads();
    for (int j = threadIdx.x; j < nh; j += blockDim.x)
        if (acc[j] != 0.0f) atomicAdd(&est_h[j], (double)acc[j]);
}
extern "C" __global__ void gj_bound_entries(const int* ntouched, int segments, const long long* seg_entries,
        const double* seg_back, const long long* off, const double* wv, const long long* first,
        const int* h_end, const int* h_freq, int nh, double* est_h) {
    gj_bound_add(ntouched, segments, seg_entries, seg_back, off, wv, first, h_end, h_freq, nh, est_h, est_h);
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
    get_kernel(BOUND_SOURCE, "gj_round_lists")(
        (segments,), (256,),
        (q.touched, nt, q.pi0, np.float64(tau), a["h_index"], np.int32(exclude_h), q.ids[nh:], q.counts[6:],
         q.state, q.inv_omega, a["ret"], a["hptr"], a["h_end"], a["h_freq"], np.int32(nh),
         np.int32(by_vertex), q.est_h, q.bigval, q.shift, q.off, q.seg_entries, q.seg_back),
    )  # fmt: skip
    if by_vertex:
        return
    args = (nt, np.int32(segments), q.seg_entries, q.seg_back, q.off, q.bigval, q.shift, a["h_end"],
            a["h_freq"], np.int32(nh), q.est_h)  # fmt: skip
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
