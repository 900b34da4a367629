"""Block-wide prefix sum and sum (CUDA C++), shared by the top-k and the PPR solver's kernels."""

SCAN_CUDA = r"""
__device__ __forceinline__ long long gj_warp_incl(long long x) {
    const int lane = threadIdx.x & 31;
    for (int o = 1; o < 32; o <<= 1) {
        long long y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    return x;
}
// exclusive block-wide prefix sum of x (blockDim.x a multiple of 32); *total gets the block's sum
__device__ __forceinline__ long long gj_block_scan(long long x, long long* total) {
    __shared__ long long s_warp[32];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    long long incl = gj_warp_incl(x);
    if (lane == 31) s_warp[wid] = incl;
    __syncthreads();
    if (wid == 0) {
        long long w = gj_warp_incl(lane < nw ? s_warp[lane] : 0);
        s_warp[lane] = w;
    }
    __syncthreads();
    long long excl = incl - x + (wid ? s_warp[wid - 1] : 0);
    *total = s_warp[nw - 1];
    __syncthreads();
    return excl;
}
__device__ __forceinline__ double gj_block_sum(double x) {  // every thread gets the block's sum
    __shared__ double s_part[32];
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    if ((threadIdx.x & 31) == 0) s_part[threadIdx.x >> 5] = x;
    __syncthreads();
    double total = 0.0;
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) total += s_part[w];
    __syncthreads();
    return total;
}
"""
