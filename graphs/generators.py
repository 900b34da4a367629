"""Deterministic graph generators: R-MAT (Graph500), Barabási–Albert, Erdős–Rényi.

Every random draw is ``mix64(key + counter * GOLDEN)`` (see ``_mix``), so a seed gives the same
graph on the CPU and on the GPU, with any number of threads.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ._barabasi import barabasi_albert  # noqa: F401  (re-exported: one module of generators)
from ._build import index_dtype
from ._device import import_cupy, resolve_device
from ._kernel import Kernel, launch_config, sm_count
from ._mix import GOLDEN, M1, M2, MIX_CUDA, MIX_DEFINES, rand_unit, stream_key
from .csr import CSRGraph
from .edges import assemble
from .errors import OptionError


def _scramble_keys(seed: int, scale: int) -> np.ndarray:
    mask = (1 << scale) - 1
    k = [stream_key(seed, 100 + i) for i in range(4)]
    return np.array([(k[0] | 1) & mask, k[1] & mask, (k[2] | 1) & mask, k[3] & mask], dtype=np.uint64)


@nb.njit(inline="always", cache=True)
def _scramble(x, scale, mask, k):
    # a bijection of [0, 2**scale): odd multiply, add, xor-shift, twice
    sh = np.uint64(scale // 2 + 1)
    x = (x * k[0] + k[1]) & mask
    x ^= x >> sh
    x = (x * k[2] + k[3]) & mask
    x ^= x >> sh
    return x


@nb.njit(parallel=True, cache=True)
def _rmat_cpu(scale, m, a, ab, abc, key, wkey, scr, src, dst, w, weighted):
    mask = np.uint64((1 << scale) - 1)
    for e in nb.prange(m):
        u = np.uint64(0)
        v = np.uint64(0)
        base = np.uint64(e) * np.uint64(scale)
        for level in range(scale):
            r = rand_unit(key, base + np.uint64(level))
            ub = np.uint64(1) if r >= ab else np.uint64(0)
            vb = np.uint64(1) if (a <= r < ab) or r >= abc else np.uint64(0)
            u = (u << np.uint64(1)) | ub
            v = (v << np.uint64(1)) | vb
        src[e] = _scramble(u, scale, mask, scr)
        dst[e] = _scramble(v, scale, mask, scr)
        if weighted:
            w[e] = np.float32(1.0 - rand_unit(wkey, np.uint64(e)))


RMAT_KERNEL = (
    MIX_CUDA
    + r"""
extern "C" __global__ void gj_rmat(int scale, long long m, double a, double ab, double abc,
        unsigned long long key, unsigned long long wkey, const unsigned long long* scr,
        int* src, int* dst, float* w, int weighted) {
    const unsigned long long mask = (1ULL << scale) - 1ULL;
    const unsigned int sh = scale / 2 + 1;
    const unsigned long long k0 = scr[0], k1 = scr[1], k2 = scr[2], k3 = scr[3];
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < m; e += stride) {
        unsigned long long u = 0, v = 0, base = (unsigned long long)e * (unsigned long long)scale;
        for (int level = 0; level < scale; ++level) {
            double r = gj_rand_unit(key, base + level);
            unsigned long long ub = r >= ab ? 1ULL : 0ULL;
            unsigned long long vb = ((r >= a && r < ab) || r >= abc) ? 1ULL : 0ULL;
            u = (u << 1) | ub;
            v = (v << 1) | vb;
        }
        u = (u * k0 + k1) & mask; u ^= u >> sh; u = (u * k2 + k3) & mask; u ^= u >> sh;
        v = (v * k0 + k1) & mask; v ^= v >> sh; v = (v * k2 + k3) & mask; v ^= v >> sh;
        src[e] = (int)u;
        dst[e] = (int)v;
        if (weighted) w[e] = (float)(1.0 - gj_rand_unit(wkey, (unsigned long long)e));
    }
}
"""
)

RMAT = Kernel(RMAT_KERNEL, ("gj_rmat",), defines=MIX_DEFINES, label="rmat")


def rmat(
    scale: int,
    edge_factor: int = 16,
    a: float = 0.57,
    b: float = 0.19,
    c: float = 0.19,
    seed: int = 0,
    device: str = "auto",
    *,
    directed: bool = True,
    weighted: bool = False,
    dedupe: bool = False,
    self_loops: bool = True,
) -> CSRGraph:
    """R-MAT / Graph500 Kronecker graph with ``2**scale`` vertices and ``edge_factor * 2**scale`` edges.

    Parameters
    ----------
    scale, edge_factor : int
        ``n = 2**scale`` (scale <= 31), ``m = edge_factor * n`` generated edges.
    a, b, c : float
        Quadrant probabilities (``d = 1 - a - b - c``); Graph500 defaults.
    seed : int
        Same seed, same graph, on the CPU and the GPU.
    device : {'auto', 'cpu', 'gpu'}
        Where to generate (and keep) the graph.
    directed, weighted, dedupe, self_loops : bool
        Store as directed edges (or both directions); add uniform (0, 1] float32 weights; drop
        repeated edges / self-loops (both are kept by default, as Graph500 generates them).

    Returns
    -------
    CSRGraph
        Vertex ids are scrambled by a seeded bijection, so degree does not follow the id.
    """
    if not (1 <= int(scale) <= 31):
        raise OptionError(f"scale must be in 1..31, got {scale}")
    if edge_factor < 1:
        raise OptionError(f"edge_factor must be >= 1, got {edge_factor}")
    if min(a, b, c) < 0 or a + b + c > 1:
        raise OptionError(f"need a, b, c >= 0 with a + b + c <= 1, got {a}, {b}, {c}")
    device = resolve_device(device)
    n = 1 << scale
    m = int(edge_factor) * n
    key, wkey = np.uint64(stream_key(seed, 1)), np.uint64(stream_key(seed, 2))
    scr = _scramble_keys(seed, scale)
    ab, abc = a + b, a + b + c
    if device == "gpu":
        cp = import_cupy()
        src, dst = cp.empty(m, dtype=cp.int32), cp.empty(m, dtype=cp.int32)
        w = cp.empty(m if weighted else 1, dtype=cp.float32)
        grid, block = launch_config(m, 256, max_blocks=sm_count() * 64)
        RMAT.get("gj_rmat")(
            grid,
            block,
            (
                np.int32(scale),
                np.int64(m),
                np.float64(a),
                np.float64(ab),
                np.float64(abc),
                key,
                wkey,
                cp.asarray(scr),
                src,
                dst,
                w,
                np.int32(weighted),
            ),
        )
    else:
        src, dst = np.empty(m, dtype=np.int32), np.empty(m, dtype=np.int32)
        w = np.empty(m if weighted else 1, dtype=np.float32)
        _rmat_cpu(scale, m, a, ab, abc, key, wkey, scr, src, dst, w, weighted)
    return assemble(
        src, dst, w if weighted else None, n, directed=directed, dedupe=dedupe, self_loops=self_loops
    )


def _rand_unit_xp(xp, key: int, counters):
    z = xp.uint64(key) + counters.astype(xp.uint64) * xp.uint64(GOLDEN)
    z = (z ^ (z >> xp.uint64(30))) * xp.uint64(M1)
    z = (z ^ (z >> xp.uint64(27))) * xp.uint64(M2)
    z = z ^ (z >> xp.uint64(31))
    return (z >> xp.uint64(11)).astype(xp.float64) * (1.0 / 9007199254740992.0)


def erdos_renyi(
    n: int,
    p: float | None = None,
    m: int | None = None,
    seed: int = 0,
    directed: bool = True,
    device: str = "cpu",
) -> CSRGraph:
    """G(n, p) or G(n, m) random graph without self-loops or repeated edges.

    Parameters
    ----------
    n : int
        Number of vertices.
    p, m : float or int
        Give exactly one: the edge probability, or the exact number of edges (undirected edges
        count once). G(n, p) draws its edge count from Binomial(N, p) and then a uniform G(n, m).
    seed : int
        Same seed, same graph, on either device.
    directed : bool
        Ordered pairs (N = n(n-1)) or unordered ones (N = n(n-1)/2, stored both ways).
    device : {'cpu', 'gpu', 'auto'}

    Returns
    -------
    CSRGraph
    """
    if (p is None) == (m is None):
        raise OptionError("give exactly one of p (edge probability) and m (number of edges)")
    if n < 1:
        raise OptionError(f"n must be >= 1, got {n}")
    pairs = n * (n - 1) if directed else n * (n - 1) // 2
    if p is not None:
        if not 0 <= p <= 1:
            raise OptionError(f"p must be in [0, 1], got {p}")
        m = int(np.random.default_rng(stream_key(seed, 3)).binomial(pairs, p))
    if not 0 <= m <= pairs:
        raise OptionError(f"m must be in [0, {pairs}] for n={n}, got {m}")
    device = resolve_device(device)
    xp = import_cupy() if device == "gpu" else np
    key = stream_key(seed, 4)
    if m > pairs // 4:
        # dense: rank all pairs by a random key and keep the first m
        u, v = _pair_of(xp, xp.arange(n * (n - 1), dtype=xp.int64), n)
        if not directed:
            keep = u < v
            u, v = u[keep], v[keep]
        order = xp.argsort(_rand_unit_xp(xp, key, xp.arange(u.size, dtype=xp.int64)))[:m]
        u, v = u[order], v[order]
    else:
        u, v = _sample_pairs(xp, n, m, key, directed)
    t = index_dtype(n)
    return assemble(u.astype(t), v.astype(t), None, n, directed=directed, dedupe=False, self_loops=True)


def _pair_of(xp, k, n):
    """The k-th ordered pair (u, v), u != v, in row-major order."""
    u = k // (n - 1)
    v = k % (n - 1)
    return u, v + (v >= u)


def _sample_pairs(xp, n, m, key, directed):
    """m distinct pairs u != v, uniformly: sequential draws, first occurrences kept."""
    accepted = xp.empty(0, dtype=xp.int64)
    drawn = 0
    while accepted.size < m:
        need = m - accepted.size
        batch = int(need * 1.1) + 1024
        c = xp.arange(drawn, drawn + batch, dtype=xp.int64)
        drawn += batch
        u = xp.floor(_rand_unit_xp(xp, key, 2 * c) * n).astype(xp.int64)
        v = xp.floor(_rand_unit_xp(xp, key, 2 * c + 1) * (n - 1)).astype(xp.int64)
        v = v + (v >= u)
        if not directed:
            u, v = xp.minimum(u, v), xp.maximum(u, v)
        cand = xp.concatenate([accepted, u * n + v])
        _, first = xp.unique(cand, return_index=True)
        accepted = cand[xp.sort(first)]
    accepted = accepted[:m]
    return accepted // n, accepted % n
