"""How many meeting samples each vertex gets: ClipSim's clipping (Algorithm 2), ExactSim's allocation,
and the portions of samples that one thread (CPU) or one warp (GPU) takes at a time.

Samples of vertex k are numbered j = 0 .. R(k)-1 and grouped by 32 (``GROUP``): group g holds
samples 32g .. 32g+31 and shares one stop/continue stream, each sample has its own stream for the
in-neighbours it picks (ClipSim's "double random seeds"). A portion is a range of whole groups of one
vertex, so how the work is cut never changes which walks are drawn: CPU and GPU count the same meets.
"""

from __future__ import annotations

import math

import numpy as np

from graphs.errors import OptionError

GROUP = 32
# total samples in "practical" mode: c * K * log2(n / 0.01) / eps^2, the constants of the published
# implementations (ClipSim's CUDA code and ExactSim's C++ code), so that their figures compare with ours
PRACTICAL = {True: 4e-5, False: 1e-5}
SAMPLES = ("bound", "practical")


def levels(c: float, epsilon: float) -> int:
    """L = ceil(log_{1/c}(10 / eps)): hops kept in the linearization."""
    return max(1, math.ceil(math.log(10.0 / epsilon) / math.log(1.0 / c)))


def total_samples(samples, *, n: int, c: float, epsilon: float, pi_norm: float, clip: bool) -> float:
    """R of Algorithm 1: the bound of the ClipSim analysis, the practical constant, or a given number."""
    if samples == "bound":
        sc = math.sqrt(c)
        return (75.0 * (1.0 + 1.0 / math.sqrt(n)) * pi_norm * math.log(max(n, 2))) / (
            8.0 * (1.0 - sc) ** 4 * epsilon**2
        )
    if samples == "practical":
        return c * PRACTICAL[bool(clip)] * math.log2(n / 0.01) / epsilon**2
    return float(samples)


def allocate(xp, pi, total: float, *, c: float, epsilon: float, clip: bool, in_degree):
    """Samples per vertex R(k) (int64): Algorithm 2 when ``clip``, else ceil(R * pi(k)).

    Vertices with fewer than two in-neighbours get none: their D(k,k) is exact without walks
    (1 without in-neighbours, 1 - c with one, since two walks then always meet at the first step).
    """
    pi = pi.astype(np.float64)
    want = total * pi
    counts = xp.ceil(want)
    if clip:
        norm = float(xp.sqrt((pi * pi).sum()))
        small = (1.0 - math.sqrt(c)) ** 2 * epsilon / (10.0 * c)
        large = (pi > small) & (norm >= 25.0 * pi)  # ||pi|| / (5 pi(k)) >= 5
        cut = xp.floor(want * 5.0 * pi / (norm + 5.0 * pi))
        counts = xp.where(large, cut, xp.where(pi <= small, 0.0, counts))
    counts = xp.where(in_degree >= 2, counts, 0.0)
    if counts.size and float(counts.max()) >= 2.0**62:
        raise OptionError(f"{float(counts.max()):.3g} samples for one vertex: epsilon is too small")
    return counts.astype(np.int64)


def portions(xp, counts, *, per_atomic: float = 32.0):
    """Work items: (vertex, first group, end group) over vertices with samples.

    Vertex k's ceil(R(k)/32) groups are cut into T(k) = ceil(sqrt(R(k) / per_atomic)) portions
    (ClipSim Sec. 4.5: R(k)/T(k) walks per portion plus T(k) atomic adds of its meets is least
    when T = sqrt(R b / a), with a / b the cost of an atomic add over that of a walk).
    """
    active = xp.nonzero(counts > 0)[0]  # the compacted rows (DCSR) of the sampled vertices
    if active.size == 0:
        empty = xp.zeros(0, dtype=np.int64)
        return empty, empty, empty
    r = counts[active]
    groups = (r + GROUP - 1) // GROUP
    parts = xp.minimum(groups, xp.ceil(xp.sqrt(r / per_atomic)).astype(np.int64))
    parts = xp.maximum(parts, 1)
    ends = xp.cumsum(parts)
    p = xp.arange(int(ends[-1]))
    owner = xp.searchsorted(ends, p, side="right")  # the vertex of each portion (repeat, on any device)
    p = p - (ends - parts)[owner]
    g0 = groups[owner] * p // parts[owner]
    g1 = groups[owner] * (p + 1) // parts[owner]
    return active[owner].astype(np.int64), g0, g1


def diagonal(xp, in_degree, counts, meets, c: float):
    """D(k,k) = 1 - c/|I(k)| - c q(k)/R(k) (Algorithm 3); 1 without in-neighbours."""
    d = in_degree.astype(np.float64)
    safe = xp.maximum(d, 1.0)
    frac = meets.astype(np.float64) / xp.maximum(counts, 1).astype(np.float64)
    out = 1.0 - c / safe - c * xp.where(counts > 0, frac, 0.0)
    return xp.where(d > 0, out, 1.0)
