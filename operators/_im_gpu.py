"""CUDA kernels of influence maximization (gIM): one warp per RR sample or cascade (the greedy is in
``_im_greedy_gpu``).

The same live-edge worlds as ``_im_cpu`` (keyed by sample, round and edge or vertex), so the GPU
produces the very sets the CPU does. A persistent grid of warps takes samples from an atomic
counter; each warp runs a warp-cooperative BFS (up to 32 queued vertices at a time, their edges
spread over the lanes by a prefix scan), marks visited vertices in its own bitmap, queues them in its
own scratch area, then reserves room in one shared pool with a single atomicAdd and copies the
sample there. A sample too large for the scratch area, or for the pool, is marked and done again in a
second pass with room to spare; the samples are finally gathered in sample order.
"""

from __future__ import annotations

import numpy as np

from graphs._device import get_kernel, import_cupy
from graphs._mix import MIX_CUDA

from ._im_greedy_gpu import cover, cover_index, greedy  # noqa: F401  (the backend interface of _im_cpu)

_SCRATCH = 1 << 13  # first-pass queue capacity per warp (elements)
_BUDGET = 4 << 30  # bytes of bitmaps and queues for all warps together

IM_KERNEL = (
    MIX_CUDA
    + r"""
#define FULL 0xffffffffu
// The threads that handle one sample together: a warp (first pass) or a block of 512 (large samples).
struct GjWarp {
    static constexpr int W = 32;
    __device__ int rank() const { return threadIdx.x & 31; }
    __device__ long long id() const { return ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; }
    __device__ void sync() const { __syncwarp(); }
    __device__ long long bcast(long long v) const { return __shfl_sync(FULL, v, 0); }
    // exclusive prefix sum of deg over the group (each member also offers its a and x to owner())
    __device__ long long scan(long long deg, long long, long long, long long& total) const {
        long long incl = deg;
        for (int o = 1; o < 32; o <<= 1) {
            long long t = __shfl_up_sync(FULL, incl, o);
            if (rank() >= o) incl += t;
        }
        total = __shfl_sync(FULL, incl, 31);
        return incl - deg;
    }
    // a, excl and x of the member whose edges hold item i
    __device__ void owner(long long i, long long a, long long excl, long long x, long long& ao, long long& eo,
                          long long& xo) const {
        int o = 0;
        for (int s = 16; s > 0; s >>= 1) {
            long long ex = __shfl_sync(FULL, excl, o + s);
            if (ex <= i) o += s;
        }
        ao = __shfl_sync(FULL, a, o);
        eo = __shfl_sync(FULL, excl, o);
        xo = __shfl_sync(FULL, x, o);
    }
    // appends y to q where fresh; the new size
    __device__ long long append(bool fresh, int y, int* q, long long size, long long cap) const {
        unsigned int ballot = __ballot_sync(FULL, fresh);
        int r = __popc(ballot & ((1u << rank()) - 1u));
        if (fresh && size + r < cap) q[size + r] = y;
        return size + __popc(ballot);
    }
};

struct GjBlock {  // blockDim.x == W; s: 3 * W + 2 shared long longs
    static constexpr int W = 512;
    long long* s;
    __device__ int rank() const { return threadIdx.x; }
    __device__ long long id() const { return blockIdx.x; }
    __device__ void sync() const { __syncthreads(); }
    __device__ long long bcast(long long v) const {
        __syncthreads();
        if (threadIdx.x == 0) s[3 * W] = v;
        __syncthreads();
        return s[3 * W];
    }
    __device__ long long scan(long long deg, long long a, long long x, long long& total) const {
        __syncthreads();
        s[threadIdx.x] = deg;
        s[W + threadIdx.x] = a;
        s[2 * W + threadIdx.x] = x;
        __syncthreads();
        for (int o = 1; o < W; o <<= 1) {
            long long t = threadIdx.x >= o ? s[threadIdx.x - o] : 0;
            __syncthreads();
            s[threadIdx.x] += t;
            __syncthreads();
        }
        total = s[W - 1];
        long long ex = s[threadIdx.x] - deg;
        __syncthreads();
        s[threadIdx.x] = ex;
        __syncthreads();
        return ex;
    }
    __device__ void owner(long long i, long long, long long, long long, long long& ao, long long& eo,
                          long long& xo) const {
        int lo = 0, hi = W;
        while (hi - lo > 1) {
            int mid = (lo + hi) >> 1;
            if (s[mid] <= i) lo = mid; else hi = mid;
        }
        ao = s[W + lo];
        eo = s[lo];
        xo = s[2 * W + lo];
    }
    __device__ long long append(bool fresh, int y, int* q, long long size, long long cap) const {
        unsigned long long* cnt = (unsigned long long*)(s + 3 * W + 1);
        __syncthreads();
        if (threadIdx.x == 0) *cnt = (unsigned long long)size;
        __syncthreads();
        if (fresh) {
            long long pos = (long long)atomicAdd(cnt, 1ULL);
            if (pos < cap) q[pos] = y;
        }
        __syncthreads();
        return (long long)*cnt;
    }
};

// BFS of the live-edge world `key` from q[0..size) by group g; returns the new size, -1 on overflow.
template <class G>
__device__ long long gj_im_bfs(const G& g, const long long* indptr, const int* indices, const float* p,
                               const float* lo, int lt, int reverse, unsigned long long key, int* q,
                               long long size, long long cap, unsigned int* bm) {
    int me = g.rank();
    long long head = 0;
    while (head < size) {
        g.sync();  // the group sees its own queue writes
        long long take = min(size - head, (long long)G::W), a = 0, b = 0, x = 0;
        if (me < take) {
            x = q[head + me];
            a = indptr[x];
            b = indptr[x + 1];
            if (lt && reverse && b > a) {  // at most one live in-edge: bisect the intervals
                double r = gj_rand_unit(key, (unsigned long long)x);
                long long lo_e = a, hi_e = b;
                while (hi_e - lo_e > 1) {
                    long long mid = (lo_e + hi_e) >> 1;
                    if ((double)lo[mid] <= r) lo_e = mid; else hi_e = mid;
                }
                a = lo_e;
                b = lo_e + 1;
            }
        }
        head += take;
        long long total, excl = g.scan(b - a, a, x, total);
        for (long long base = 0; base < total; base += G::W) {
            long long i = base + me, ao, eo, xo;
            g.owner(i, a, excl, x, ao, eo, xo);
            bool fresh = false;
            int y = 0;
            if (i < total) {
                long long e = ao + (i - eo);
                y = indices[e];
                unsigned int bit = 1u << (y & 31);
                bool live;
                if (lt) {
                    double r = gj_rand_unit(key, (unsigned long long)(reverse ? xo : y));
                    live = (double)lo[e] <= r && r < (double)lo[e] + (double)p[e];
                } else {
                    live = gj_rand_unit(key, (unsigned long long)e) < (double)p[e];
                }
                if (live && !(bm[y >> 5] & bit)) fresh = !(atomicOr(&bm[y >> 5], bit) & bit);
            }
            size = g.append(fresh, y, q, size, cap);
            if (size > cap) return -1;
        }
    }
    return size;
}

template <class G>
__device__ void gj_im_clear(const G& g, unsigned int* bm, const int* q, long long size, long long words,
                            bool all) {
    g.sync();
    if (all) for (long long i = g.rank(); i < words; i += G::W) bm[i] = 0u;
    else for (long long i = g.rank(); i < size; i += G::W) bm[q[i] >> 5] = 0u;
    g.sync();
}

template <class G>
__device__ __forceinline__ long long gj_im_task(const G& g, unsigned long long* next) {
    long long w = 0;
    if (g.rank() == 0) w = (long long)atomicAdd(next, 1ULL);
    return g.bcast(w);
}

template <class G>
__device__ void gj_im_sample_group(const G& g, const long long* indptr, const int* indices, const float* p,
        const float* lo, int lt, long long n, int rounds, unsigned long long key, unsigned long long root_key,
        const long long* jobs, long long njobs, unsigned long long* next, unsigned int* bitmaps,
        long long words, int* scratch, long long cap, int* pool, long long pool_cap,
        unsigned long long* pool_used, long long* start, int* size) {
    int me = g.rank();
    unsigned int* bm = bitmaps + g.id() * words;
    int* q = scratch + g.id() * cap;
    for (long long w = gj_im_task(g, next); w < njobs; w = gj_im_task(g, next)) {
        long long j = jobs[w], used = 0;
        long long root = min((long long)(gj_rand_unit(root_key, (unsigned long long)j) * (double)n), n - 1);
        bool ok = true;
        for (int t = 0; t < rounds && ok; ++t) {
            unsigned long long kt = gj_mix64(key + (unsigned long long)(j * rounds + t) * GJ_GOLDEN);
            long long got = -1;
            if (used < cap) {
                if (me == 0) { q[used] = (int)root; bm[root >> 5] = 1u << (root & 31); }
                g.sync();
                got = gj_im_bfs(g, indptr, indices, p, lo, lt, 1, kt, q + used, 1, cap - used, bm);
            }
            ok = got >= 0;
            gj_im_clear(g, bm, q + used, got, words, !ok);
            if (ok) {
                for (long long i = me; i < got; i += G::W) q[used + i] += (int)(t * n);
                used += got;
            }
        }
        g.sync();
        long long pos = 0;
        if (ok && me == 0) pos = (long long)atomicAdd(pool_used, (unsigned long long)used);
        pos = g.bcast(pos);
        if (ok && pos + used <= pool_cap) {
            for (long long i = me; i < used; i += G::W) pool[pos + i] = q[i];
            if (me == 0) { start[w] = pos; size[w] = (int)used; }
        } else if (me == 0) {
            start[w] = ok ? -2 : -1;  // -2: the pool is full (size: the room needed), -1: the queue is
            size[w] = ok ? (int)used : 0;
        }
    }
}

#define GJ_IM_SAMPLE_ARGS const long long* indptr, const int* indices, const float* p, const float* lo, \
        int lt, long long n, int rounds, unsigned long long key, unsigned long long root_key, \
        const long long* jobs, long long njobs, unsigned long long* next, unsigned int* bitmaps, \
        long long words, int* scratch, long long cap, int* pool, long long pool_cap, \
        unsigned long long* pool_used, long long* start, int* size
#define GJ_IM_SAMPLE_PASS indptr, indices, p, lo, lt, n, rounds, key, root_key, jobs, njobs, next, bitmaps, \
        words, scratch, cap, pool, pool_cap, pool_used, start, size

extern "C" __global__ void gj_im_sample(GJ_IM_SAMPLE_ARGS) {
    gj_im_sample_group(GjWarp(), GJ_IM_SAMPLE_PASS);
}

extern "C" __global__ void __launch_bounds__(512) gj_im_sample_block(GJ_IM_SAMPLE_ARGS) {
    __shared__ long long s[3 * GjBlock::W + 2];
    gj_im_sample_group(GjBlock{s}, GJ_IM_SAMPLE_PASS);
}

extern "C" __global__ void gj_im_gather(const int* pool, const long long* start, const int* size,
        const long long* dest, long long count, int* out) {
    int lane = threadIdx.x & 31;
    long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long w = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; w < count; w += warps)
        for (long long i = lane; i < size[w]; i += 32) out[dest[w] + i] = pool[start[w] + i];
}

extern "C" __global__ void gj_im_cascades(const long long* indptr, const int* indices, const float* p,
        const float* lo, int lt, long long n, const int* seeds, const long long* sptr, int rounds,
        unsigned long long key, long long count, unsigned long long* next, unsigned int* bitmaps,
        long long words, int* scratch, long long* out) {
    int lane = threadIdx.x & 31;
    long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    unsigned int* bm = bitmaps + warp * 2 * words;
    unsigned int* ever = bm + words;
    int* q = scratch + warp * n;
    for (long long s = gj_im_task(GjWarp(), next); s < count; s = gj_im_task(GjWarp(), next)) {
        long long reached = 0;
        for (int t = 0; t < rounds; ++t) {
            unsigned long long kt = gj_mix64(key + (unsigned long long)(s * rounds + t) * GJ_GOLDEN);
            long long size = 0;  // distinct seeds of round t enter the queue first
            for (long long i = sptr[t]; i < sptr[t + 1]; ++i) {
                int v = seeds[i];
                if (!(bm[v >> 5] & (1u << (v & 31)))) {
                    __syncwarp();
                    if (lane == 0) { bm[v >> 5] |= 1u << (v & 31); q[size] = v; }
                    size += 1;
                }
                __syncwarp();
            }
            size = gj_im_bfs(GjWarp(), indptr, indices, p, lo, lt, 0, kt, q, size, n, bm);
            int fresh = 0;
            for (long long i = lane; i < size; i += 32) {
                unsigned int bit = 1u << (q[i] & 31);
                if (rounds == 1 || !(atomicOr(&ever[q[i] >> 5], bit) & bit)) fresh += 1;
            }
            for (int o = 16; o > 0; o >>= 1) fresh += __shfl_xor_sync(FULL, fresh, o);
            reached += fresh;
            gj_im_clear(GjWarp(), bm, q, size, words, false);
        }
        if (rounds > 1) gj_im_clear(GjWarp(), ever, q, 0, words, true);
        if (lane == 0) out[s] = reached;
    }
}
"""
)


def _free_bytes() -> int:
    """Device memory free to allocate: the driver's free memory plus what CuPy's pool holds unused."""
    cp = import_cupy()
    return int(cp.cuda.runtime.memGetInfo()[0]) + int(cp.get_default_memory_pool().free_bytes())


def _grid(per_warp_bytes: int, want_warps: int):
    cp = import_cupy()
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    budget = min(_BUDGET, _free_bytes() // 4)
    warps = int(max(8, min(sms * 64, want_warps, budget // max(per_warp_bytes, 1))))
    warps = -(-warps // 8) * 8
    return warps, (warps // 8,), (256,)


def _launch_samples(rev, lt, key, root_key, rounds, jobs, cap, pool_cap, block: bool):
    """One pass over ``jobs``: a warp per sample, or with ``block`` a block of 512 threads per sample."""
    cp = import_cupy()
    n = rev.indptr.size - 1
    words = (n + 31) // 32
    if block:
        sms = cp.cuda.Device().attributes["MultiProcessorCount"]
        budget = min(_BUDGET, _free_bytes() // 4)
        groups = int(max(1, min(jobs.size, sms * 4, budget // (words * 4 + cap * 4))))
        grid, threads, name = (groups,), (512,), "gj_im_sample_block"
    else:
        groups, grid, threads = _grid(words * 4 + cap * 4, jobs.size)
        name = "gj_im_sample"
    bitmaps = cp.zeros(groups * words, dtype=np.uint32)
    scratch = cp.empty(groups * cap, dtype=np.int32)
    pool = cp.empty(max(pool_cap, 1), dtype=np.int32)
    start = cp.empty(jobs.size, dtype=np.int64)
    size = cp.zeros(jobs.size, dtype=np.int32)
    counters = cp.zeros(2, dtype=np.uint64)  # next task, pool used
    args = (rev.indptr, rev.indices, rev.p, rev.lo, np.int32(lt), np.int64(n), np.int32(rounds),
            np.uint64(key), np.uint64(root_key), jobs, np.int64(jobs.size), counters[0:1], bitmaps,
            np.int64(words), scratch, np.int64(cap), pool, np.int64(pool_cap), counters[1:2], start,
            size)  # fmt: skip
    get_kernel(IM_KERNEL, name)(grid, threads, args)
    return pool, start, size


def sample(rev, lt: bool, key: int, root_key: int, rounds: int, j0: int, count: int, expected=None):
    """Members (int32 elements ``t*n + v``) and offsets of samples ``j0 .. j0+count-1``, in order.

    ``expected``: the mean sample size seen so far, to size the pool (16 per round when unknown).
    The first pass gives each sample a warp and a queue of ``_SCRATCH``; samples that outgrow it
    (the heavy tail of near-critical cascades, e.g. weighted cascade on social graphs) are redone
    by blocks of 512 threads with room for every vertex.
    """
    cp = import_cupy()
    n = rev.indptr.size - 1
    if rounds * n >= 2**31:
        raise ValueError(f"GPU influence maximization needs rounds * n < 2**31, got {rounds} * {n}")
    jobs = cp.arange(j0, j0 + count, dtype=np.int64)
    pool_cap = int(count * 1.25 * (expected or 16 * rounds)) + rounds * n
    sizes = cp.zeros(count, dtype=np.int64)
    passes = []
    todo = [(jobs, min(_SCRATCH, rounds * n), False, pool_cap)]
    while todo:
        jobs, cap, block, pool_cap = todo.pop()
        pool, start, size = _launch_samples(rev, lt, key, root_key, rounds, jobs, cap, pool_cap, block)
        ok = start >= 0
        passes.append((pool, start[ok], size[ok], jobs[ok]))
        sizes[jobs[ok] - j0] = size[ok]
        # samples that only missed the pool go again the same way with exactly the room they need;
        # those that outgrew their queue go to blocks with room for every vertex
        full, grew = start == -2, start == -1
        if bool(full.any()):
            todo.append((jobs[full], cap, block, int(size[full].sum())))
        if bool(grew.any()):
            spare = max(_free_bytes() // 16, rounds * n)
            todo.append((jobs[grew], rounds * n, True, min(int(cp.count_nonzero(grew)) * rounds * n, spare)))
    offsets = cp.zeros(count + 1, dtype=np.int64)
    cp.cumsum(sizes, out=offsets[1:])
    members = cp.empty(int(offsets[-1]), dtype=np.int32)
    for pool, start, size, done in passes:
        grid = (max(1, min(65535, (done.size + 7) // 8)),)
        get_kernel(IM_KERNEL, "gj_im_gather")(
            grid, (256,), (pool, start, size, offsets[done - j0], np.int64(done.size), members)
        )
    return members, offsets


def cascades(fwd, lt: bool, key: int, seeds, seed_rounds, rounds: int, count: int):
    """Vertices active in at least one round, for each of ``count`` forward simulations."""
    cp = import_cupy()
    n = fwd.indptr.size - 1
    order = np.argsort(seed_rounds, kind="stable")
    sptr = np.zeros(rounds + 1, dtype=np.int64)
    np.cumsum(np.bincount(seed_rounds, minlength=rounds), out=sptr[1:])
    words = (n + 31) // 32
    warps, grid, block = _grid(words * 8 + n * 4, count)
    bitmaps = cp.zeros(warps * 2 * words, dtype=np.uint32)
    scratch = cp.empty(warps * n, dtype=np.int32)
    out = cp.zeros(count, dtype=np.int64)
    nxt = cp.zeros(1, dtype=np.uint64)
    args = (fwd.indptr, fwd.indices, fwd.p, fwd.lo, np.int32(lt), np.int64(n),
            cp.asarray(seeds[order].astype(np.int32)), cp.asarray(sptr), np.int32(rounds), np.uint64(key),
            np.int64(count), nxt, bitmaps, np.int64(words), scratch, out)  # fmt: skip
    get_kernel(IM_KERNEL, "gj_im_cascades")(grid, block, args)
    return out
