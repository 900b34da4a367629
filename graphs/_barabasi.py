"""Barabási–Albert preferential attachment, generated on the host (the process is sequential)."""

from __future__ import annotations

import numba as nb
import numpy as np

from ._build import index_dtype
from ._device import resolve_device
from ._mix import rand_unit, stream_key
from .csr import CSRGraph
from .edges import assemble
from .errors import OptionError


@nb.njit(cache=True)
def _ba_cpu(n, m, key):
    total = m + (n - m - 1) * m
    src = np.empty(total, dtype=np.int64)
    dst = np.empty(total, dtype=np.int64)
    rep = np.empty(2 * total, dtype=np.int64)
    nrep = 0
    for i in range(m):  # star: vertex 0 joined to 1..m
        src[i] = 0
        dst[i] = i + 1
        rep[nrep] = 0
        rep[nrep + 1] = i + 1
        nrep += 2
    e = m
    targets = np.empty(m, dtype=np.int64)
    counter = np.uint64(0)
    for s in range(m + 1, n):
        k = 0
        while k < m:
            t = rep[int(rand_unit(key, counter) * nrep)]
            counter += np.uint64(1)
            fresh = True
            for j in range(k):
                if targets[j] == t:
                    fresh = False
                    break
            if fresh:
                targets[k] = t
                k += 1
        for j in range(m):
            src[e] = s
            dst[e] = targets[j]
            e += 1
            rep[nrep] = targets[j]
            rep[nrep + 1] = s
            nrep += 2
    return src, dst


def barabasi_albert(n: int, m: int, seed: int = 0, device: str = "cpu") -> CSRGraph:
    """Undirected preferential-attachment graph (the NetworkX model, from a star on m + 1 vertices).

    Each new vertex joins ``m`` distinct existing vertices chosen with probability proportional to
    their degree, so the graph has ``m * (n - m)`` undirected edges. Generated on the host (the
    process is sequential) and moved to ``device``.

    Parameters
    ----------
    n, m : int
        Vertices and edges per new vertex, ``1 <= m < n``.
    seed : int
    device : {'cpu', 'gpu', 'auto'}

    Returns
    -------
    CSRGraph
    """
    if not 1 <= m < n:
        raise OptionError(f"need 1 <= m < n, got n={n}, m={m}")
    src, dst = _ba_cpu(int(n), int(m), np.uint64(stream_key(seed, 5)))
    t = index_dtype(n)
    g = assemble(src.astype(t), dst.astype(t), None, int(n), directed=False, dedupe=False, self_loops=True)
    return g.to(resolve_device(device))
