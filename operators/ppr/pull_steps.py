"""Device step of the GPU PPR solver's pull iteration (``gj_pull``), as CUDA C++ that ``_ppr_push_gpu``
appends to ``_ppr_push_steps.PPR_STEP_DEVICE``.

Every item sums the messages of its vertex's in-neighbours in its row, with no atomics on residues.
The cost model's layout holds: item q is slot q (warp q % B of block (q / B) % nb); a warp sums a
vertex of fewer than W * B in-edges, the whole block a larger one. The block takes 32 of its chunks
of B consecutive items at a time: its threads load the chunks' row bounds and later settle their
residues in item order (coalesced), and in between warp j sums item j of each chunk, one vertex with
in-edges after another (items without any cost it nothing). The block's large vertices come after
the sweep, from a list per block built with the plan (``big_lists``).
"""

PPR_PULL_DEVICE = r"""
// item u (vertex v of its row) takes the mass acc it pulled (plus its source's dangling mass): it keeps
// (1 - alpha) r(u) when active, and joins the next frontier if its new residue is over the threshold.
// Warp-collective (the append); returns whether u received mass (pull's delta_v).
template <typename T, bool MANY>
__device__ __forceinline__ bool gj_pull_settle(bool live, int u, int v, double acc, const int* deg, int* cnt,
        T* r, T* p, T* msg2, int* front2, const double* dm, double* dm_next, u32* rdw, int nb, const Rows& R,
        bool first, double alpha, double tol) {
    bool on = false;
    T nr = (T)0;
    int d = 0;
    if (live) {
        const int k = gj_row<MANY>(R, u);
        const bool source = v == R.src[k];
        acc += source ? alpha * dm[k] : 0.0;
        d = deg[v];
        const double thr = tol * (d > 1 ? d : 1);
        const T r0 = r[u];
        T ru = r0;
        if ((double)ru > thr || (first && source)) { p[u] += (T)((1.0 - alpha) * (double)ru); ru = (T)0; }
        nr = (T)((double)ru + acc);
        if (nr != r0) r[u] = nr;
        msg2[u] = (T)0;
        on = (double)nr > thr;
    }
    const long long q = gj_append(on, &cnt[1]);
    if (on) gj_activate<T>(u, d, nr, q, front2, msg2, dm_next + gj_row<MANY>(R, u), rdw, nb, alpha);
    return live && acc > 0.0;
}
// first: the first iteration, where each source pays out whatever its residue.
// bptr, bv: this block's vertices of in-degree >= WB are bv[bptr[block] .. bptr[block + 1]).
template <typename T, bool MANY>
__device__ void gj_pull(const long long* tptr, const int* tind, const int* deg, int n, int* cnt, T* r,
        T* p, const T* msg, T* msg2, int* front2, const double* dm, double* dm_next, u32* rdw, u32* sqw,
        int nb, const Rows R, bool first, double alpha, double tol, const int* bptr, const int* bv) {
    __shared__ double s_acc[B], s_sum[WB];
    __shared__ long long s_lo[WB];
    __shared__ int s_len[WB];
    __shared__ u32 s_sqw[1 + B];  // this block's sqw counters: its own items are all it sweeps
    const unsigned full = 0xffffffffu;
    const int warp = threadIdx.x / W, lane = threadIdx.x % W;
    const long long total = (long long)R.ns * R.stride, span = (long long)nb * B;
    if (threadIdx.x <= B) s_sqw[threadIdx.x] = 0u;
    // 32 of the block's chunks of B consecutive items at a time: thread t loads and settles item t % B
    // of chunk t / B (consecutive threads, consecutive items); warp j sums item j of every chunk
    for (long long g0 = (long long)blockIdx.x * B; g0 < total; g0 += W * span) {
        const long long q = g0 + (threadIdx.x / B) * span + threadIdx.x % B;
        const int u = (int)q, v = q < total ? gj_vertex<MANY>(R, u) : n;
        const bool real = v < n;  // rows are padded to `stride`: the padding does nothing
        const long long lo = real ? tptr[v] : 0, hi = real ? tptr[v + 1] : 0;
        const bool small = hi - lo < WB;
        s_lo[threadIdx.x] = lo;
        s_len[threadIdx.x] = small ? (int)(hi - lo) : 0;  // larger ones: after the sweep
        __syncthreads();
        const int mine = lane * B + warp;  // item `warp` of chunk `lane`
        const long long qm = g0 + lane * span + warp;
        const int rm = qm < total ? (int)qm - gj_vertex<MANY>(R, (int)qm) : 0;
        const long long lm = s_lo[mine];
        const int len = s_len[mine];
        double acc = 0.0;
        for (unsigned todo = __ballot_sync(full, len > 0); todo; todo &= todo - 1) {
            const int j = __ffs(todo) - 1, row = __shfl_sync(full, rm, j);
            const long long a = __shfl_sync(full, lm, j), z = a + __shfl_sync(full, len, j);
            double s = 0.0;
            for (long long e = a + lane; e < z; e += W) s += (double)msg[row + tind[e]];
            for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(full, s, o);
            if (lane == j) acc = s;
        }
        s_sum[mine] = acc;
        __syncthreads();
        const double pulled = s_sum[threadIdx.x];
        const bool got = gj_pull_settle<T, MANY>(real && small, u, v, pulled, deg, cnt, r, p, msg2, front2,
                                                 dm, dm_next, rdw, nb, R, first, alpha, tol);
        const unsigned mask = __ballot_sync(full, got);  // lane l settled item l % B of its chunk
        if (sqw != nullptr && lane < B && mask) {
            const unsigned k = __popc(mask & (0x01010101u << lane));
            if (k) atomicAdd(&s_sqw[1 + lane], k * RED_W);
            if (lane == 0) atomicAdd(&s_sqw[0], __popc(mask) * RED_B);
        }
    }
    const int b0 = bptr[blockIdx.x], nbig = bptr[blockIdx.x + 1] - b0, items = nbig * R.ns;
    for (int i0 = 0; i0 < items; i0 += B) {  // in-degree >= WB: the whole block sums, B items at a time
        if (threadIdx.x < B) s_acc[threadIdx.x] = 0.0;
        __syncthreads();
        for (int j = 0; j < B && i0 + j < items; ++j) {
            const int i = i0 + j, k = i / nbig, v = bv[b0 + i - k * nbig], row = k * R.stride;
            double part = 0.0;
            for (long long e = tptr[v] + threadIdx.x; e < tptr[v + 1]; e += WB)
                part += (double)msg[row + tind[e]];
            for (int o = 16; o > 0; o >>= 1) part += __shfl_xor_sync(full, part, o);
            if (lane == 0) atomicAdd(&s_acc[j], part);
        }
        __syncthreads();
        if (warp == 0) {  // lane j settles item i0 + j
            const int i = i0 + lane, k = i / nbig;  // nbig > 0: items > 0 here
            const bool live = lane < B && i < items;
            const int v = live ? bv[b0 + i - k * nbig] : 0, u = k * R.stride + v;
            const double acc = live ? s_acc[lane] : 0.0;
            if (gj_pull_settle<T, MANY>(live, u, v, acc, deg, cnt, r, p, msg2, front2, dm, dm_next, rdw, nb,
                                        R, first, alpha, tol) && sqw != nullptr) {
                atomicAdd(&s_sqw[1 + v % B], RED_W);
                atomicAdd(&s_sqw[0], RED_B);
            }
        }
        __syncthreads();
    }
    __syncthreads();
    const int slot = threadIdx.x == 0 ? blockIdx.x : nb + blockIdx.x * B + threadIdx.x - 1;
    if (sqw != nullptr && threadIdx.x <= B && s_sqw[threadIdx.x] != 0u)  // one add per counter, not per item
        atomicAdd(&sqw[slot], s_sqw[threadIdx.x]);
}
"""
