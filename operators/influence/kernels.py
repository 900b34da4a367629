"""Device code shared by the influence-maximization kernels of ``_im_gpu``: the thread groups (a warp, or
a block of 512 threads) that handle one RR sample or cascade together, their live-edge BFS, the
clearing of their bitmaps, the task counter and the whole sampling of one group."""

from __future__ import annotations

from graphs._mix import MIX_CUDA, MIX_DEFINES
from operators.influence.cpu import LN2, LOG1M_TERMS, LOG_TERMS, SKIP_DRAWS, SKIP_LIVE, SQRT_HALF

FIRST_MEAN = 16  # elements a sample holds per round, assumed before any sample is drawn (GPU pools, checks)
IM_DEFINES = {  # the defines IM_DEVICE uses (a double's repr reads back as the same double)
    **MIX_DEFINES,
    "GJ_IM_SKIP_LIVE": repr(float(SKIP_LIVE)),
    "GJ_IM_SKIP_DRAWS": f"0x{SKIP_DRAWS:X}ULL",
    "GJ_IM_LOG_TERMS": LOG_TERMS,
    "GJ_IM_LOG1M_TERMS": LOG1M_TERMS,
    "GJ_IM_SQRT_HALF": repr(SQRT_HALF),
    "GJ_IM_LN2": repr(LN2),
}

IM_DEVICE = (
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
    __device__ bool any(bool v) const { return __any_sync(FULL, v); }
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
    __device__ bool any(bool v) const { return __syncthreads_or(v); }
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

// log(u) and log(1 - q) as operators.influence.cpu's log_unit and log_one_minus compute them: the same
// operations in the same order, each rounded once (no contraction into fused multiply-adds)
__device__ __forceinline__ double gj_im_log_unit(double u) {
    int e;
    double m = frexp(u, &e);
    if (m < GJ_IM_SQRT_HALF) { m = __dmul_rn(m, 2.0); e -= 1; }
    double s = __ddiv_rn(__dadd_rn(m, -1.0), __dadd_rn(m, 1.0));
    double s2 = __dmul_rn(s, s), t = 0.0;
    for (int k = GJ_IM_LOG_TERMS - 1; k >= 0; --k)
        t = __dadd_rn(__dmul_rn(t, s2), __ddiv_rn(1.0, (double)(2 * k + 1)));
    return __dadd_rn(__dmul_rn((double)e, GJ_IM_LN2), __dmul_rn(__dmul_rn(2.0, s), t));
}

__device__ __forceinline__ double gj_im_log_one_minus(double q) {
    if (q >= 0.25) return gj_im_log_unit(__dadd_rn(1.0, -q));
    double t = 0.0;
    for (int k = GJ_IM_LOG1M_TERMS; k >= 1; --k) t = __dadd_rn(__dmul_rn(t, q), __ddiv_rn(1.0, (double)k));
    return -__dmul_rn(q, t);
}

// log(1 - q) when `skip` and the row a..b is drawn by geometric skips (its one probability q in (0, 1) and
// (b - a) * q <= GJ_IM_SKIP_LIVE; operators.influence.model), else 0
__device__ __forceinline__ double gj_im_skips(long long a, long long b, const float* p, int skip) {
    if (!skip || b <= a) return 0.0;
    double pr = (double)p[a];
    if (pr <= 0.0 || pr >= 1.0 || __dmul_rn((double)(b - a), pr) > GJ_IM_SKIP_LIVE) return 0.0;
    return gj_im_log_one_minus(pr);
}

// appends y to q (and marks it) where fresh in the bitmap; the group's new queue size
template <class G>
__device__ __forceinline__ long long gj_im_visit(const G& g, bool live, int y, unsigned int* bm, int* q,
                                                 long long size, long long cap) {
    bool fresh = false;
    if (live) {
        unsigned int bit = 1u << (y & 31);
        if (!(bm[y >> 5] & bit)) fresh = !(atomicOr(&bm[y >> 5], bit) & bit);
    }
    return g.append(fresh, y, q, size, cap);
}

// BFS of the live-edge world `key` from q[0..size) by group g; returns the new size, -1 on overflow.
// skip: the rows share one probability each (IC in-edges), drawn by geometric skips where that pays:
// each member draws its own row's live edges one after another, the rest go edge by edge below.
template <class G>
__device__ long long gj_im_bfs(const G& g, const long long* indptr, const int* indices, const float* p,
                               const float* lo, int lt, int reverse, int skip, unsigned long long key, int* q,
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
        double lq = me < take ? gj_im_skips(a, b, p, skip) : 0.0;
        bool drawing = lq != 0.0;
        long long pos = a - 1, end = b;
        unsigned long long draw = GJ_IM_SKIP_DRAWS | ((unsigned long long)x << 32);
        if (drawing) b = a;  // not scanned below
        while (g.any(drawing)) {
            int y = 0;
            if (drawing) {
                double u = gj_rand_unit(key, draw++);
                double gap = u == 0.0 ? __longlong_as_double(0x7ff0000000000000LL)  // +inf: no more
                                      : floor(__ddiv_rn(gj_im_log_unit(u), lq));
                if (gap < (double)(end - 1 - pos)) {
                    pos += (long long)gap + 1;
                    y = indices[pos];
                } else {
                    drawing = false;
                }
            }
            size = gj_im_visit(g, drawing, y, bm, q, size, cap);
            if (size > cap) return -1;
        }
        long long total, excl = g.scan(b - a, a, x, total);
        for (long long base = 0; base < total; base += G::W) {
            long long i = base + me, ao, eo, xo;
            g.owner(i, a, excl, x, ao, eo, xo);
            bool live = false;
            int y = 0;
            if (i < total) {
                long long e = ao + (i - eo);
                y = indices[e];
                if (lt) {
                    double r = gj_rand_unit(key, (unsigned long long)(reverse ? xo : y));
                    live = (double)lo[e] <= r && r < (double)lo[e] + (double)p[e];
                } else {
                    live = gj_rand_unit(key, (unsigned long long)e) < (double)p[e];
                }
            }
            size = gj_im_visit(g, live, y, bm, q, size, cap);
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
        const float* lo, int lt, int skip, long long n, int rounds, unsigned long long key,
        unsigned long long root_key, const long long* jobs, long long njobs, unsigned long long* next,
        unsigned int* bitmaps, long long words, int* scratch, long long cap, int* pool, long long pool_cap,
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
                got = gj_im_bfs(g, indptr, indices, p, lo, lt, 1, skip, kt, q + used, 1, cap - used, bm);
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
        int lt, int skip, long long n, int rounds, unsigned long long key, unsigned long long root_key, \
        const long long* jobs, long long njobs, unsigned long long* next, unsigned int* bitmaps, \
        long long words, int* scratch, long long cap, int* pool, long long pool_cap, \
        unsigned long long* pool_used, long long* start, int* size
#define GJ_IM_SAMPLE_PASS indptr, indices, p, lo, lt, skip, n, rounds, key, root_key, jobs, njobs, next, \
        bitmaps, words, scratch, cap, pool, pool_cap, pool_used, start, size
"""
)
