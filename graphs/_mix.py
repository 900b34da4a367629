"""SplitMix64 mixing shared bit-for-bit by the CPU (Numba) and GPU (CUDA C++) code.

Two uses: content fingerprints of arrays (a position-aware hash summed modulo 2**64, so the order
of summation does not matter and threads or blocks can add in any order) and counter-based random
numbers for the generators: draw ``c`` of stream ``key`` is ``mix64(key + c * GOLDEN)``, i.e. the
SplitMix64 sequence, which is reproducible on any device and any number of threads.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ._kernel import Kernel

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
M1 = 0xBF58476D1CE4E5B9
M2 = 0x94D049BB133111EB
LANE = 0xD1B54A32D192ED03
MIX_DEFINES = {"GJ_GOLDEN": f"0x{GOLDEN:X}ULL"}  # the CUDA of MIX_CUDA uses GOLDEN as GJ_GOLDEN

_U_GOLDEN = np.uint64(GOLDEN)
_U_M1 = np.uint64(M1)
_U_M2 = np.uint64(M2)
_U_LANE = np.uint64(LANE)
_U_ONE = np.uint64(1)


def mix64_py(z: int) -> int:
    z &= MASK
    z = ((z ^ (z >> 30)) * M1) & MASK
    z = ((z ^ (z >> 27)) * M2) & MASK
    return z ^ (z >> 31)


def stream_key(seed: int, stream: int = 0) -> int:
    """The 64-bit key of random stream ``stream`` for a user ``seed`` (any Python int)."""
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise TypeError(f"seed must be an integer, got {seed!r}")
    return mix64_py(mix64_py(int(seed) + GOLDEN) ^ (int(stream) * LANE))


@nb.njit(inline="always", cache=True)
def mix64(z):
    z = (z ^ (z >> np.uint64(30))) * _U_M1
    z = (z ^ (z >> np.uint64(27))) * _U_M2
    return z ^ (z >> np.uint64(31))


@nb.njit(inline="always", cache=True)
def rand_u64(key, counter):
    return mix64(key + counter * _U_GOLDEN)


@nb.njit(inline="always", cache=True)
def rand_unit(key, counter):
    """Uniform float64 in [0, 1) with 53 random bits."""
    return np.float64(rand_u64(key, counter) >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@nb.njit(parallel=True, cache=True)
def _fingerprint_cpu(words):
    nchunks = 256
    acc = np.zeros((nchunks, 2), dtype=np.uint64)
    n = words.size
    step = (n + nchunks - 1) // nchunks
    for c in nb.prange(nchunks):
        a0 = np.uint64(0)
        a1 = np.uint64(0)
        for i in range(c * step, min(n, (c + 1) * step)):
            h = mix64(np.uint64(words[i]) + (np.uint64(i) + _U_ONE) * _U_GOLDEN)
            a0 += h
            a1 += mix64(h ^ _U_LANE)
        acc[c, 0] = a0
        acc[c, 1] = a1
    t0 = np.uint64(0)
    t1 = np.uint64(0)
    for c in range(nchunks):
        t0 += acc[c, 0]
        t1 += acc[c, 1]
    return t0, t1


# Shared device functions: prepended to every kernel that draws random numbers or hashes, whose
# Kernel then takes MIX_DEFINES among its defines.
MIX_CUDA = r"""
__device__ __forceinline__ unsigned long long gj_mix64(unsigned long long z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
__device__ __forceinline__ unsigned long long gj_rand_u64(unsigned long long key, unsigned long long c) {
    return gj_mix64(key + c * GJ_GOLDEN);
}
__device__ __forceinline__ double gj_rand_unit(unsigned long long key, unsigned long long c) {
    return (double)(gj_rand_u64(key, c) >> 11) * (1.0 / 9007199254740992.0);
}
"""

FINGERPRINT_KERNEL = (
    MIX_CUDA
    + r"""
template <typename T>
__device__ void gj_fingerprint(const T* x, long long n, unsigned long long* out) {
    unsigned long long a0 = 0, a1 = 0;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        unsigned long long h = gj_mix64((unsigned long long)x[i] + (unsigned long long)(i + 1) * GJ_GOLDEN);
        a0 += h;
        a1 += gj_mix64(h ^ 0xD1B54A32D192ED03ULL);
    }
    for (int off = 16; off > 0; off >>= 1) {
        a0 += __shfl_down_sync(0xffffffffu, a0, off);
        a1 += __shfl_down_sync(0xffffffffu, a1, off);
    }
    if ((threadIdx.x & 31) == 0) { atomicAdd(out, a0); atomicAdd(out + 1, a1); }
}
extern "C" __global__ void gj_fingerprint_u32(const unsigned int* x, long long n, unsigned long long* out) {
    gj_fingerprint<unsigned int>(x, n, out);
}
extern "C" __global__ void gj_fingerprint_u64(const unsigned long long* x, long long n,
                                              unsigned long long* out) {
    gj_fingerprint<unsigned long long>(x, n, out);
}
"""
)


FINGERPRINT = Kernel(
    FINGERPRINT_KERNEL, ("gj_fingerprint_u32", "gj_fingerprint_u64"), defines=MIX_DEFINES, label="fingerprint"
)


def _fingerprint_gpu(words) -> tuple[int, int]:
    cp = __import__("cupy")
    name = "gj_fingerprint_u32" if words.dtype.itemsize == 4 else "gj_fingerprint_u64"
    kernel = FINGERPRINT.get(name)
    out = cp.zeros(2, dtype=cp.uint64)
    blocks = int(min(4096, max(1, (words.size + 255) // 256)))
    kernel((blocks,), (256,), (words, np.int64(words.size), out))
    h = out.get()
    return int(h[0]), int(h[1])


def fingerprint(a) -> tuple[int, int]:
    """Two 64-bit position-aware sums over the raw elements of ``a`` (NumPy or CuPy, 1-D).

    Elements are read as unsigned integers of their own width, so the result depends on the
    bytes, and CPU and GPU give the same numbers for the same content.
    """
    if a.dtype.itemsize not in (4, 8):
        raise TypeError(f"fingerprint needs 4- or 8-byte elements, got {a.dtype}")
    words = a.reshape(-1).view(np.uint32 if a.dtype.itemsize == 4 else np.uint64)
    if type(a).__module__.startswith("cupy"):
        return _fingerprint_gpu(words)
    t0, t1 = _fingerprint_cpu(np.ascontiguousarray(words))
    return int(t0), int(t1)
