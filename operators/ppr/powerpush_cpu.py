"""CPU (Numba) solver of single-source PPR by PowerPush (Wu, Gan, Wei, Zhang, SIGMOD 2021): sequential
forward push that updates the residues in place (Gauss-Seidel), from a FIFO queue while few vertices
are active, then by sweeps over all vertices in id order.

A push of v moves ``(1 - alpha) r(v)`` to its reserve and ``alpha r(v) / d_out(v)`` to each out-neighbour
(``alpha r(v)`` to the source when it has none), so the residue mass R (the row's L1 error, see
``operators.ppr.epochs``) falls by exactly ``(1 - alpha) r(v)``; the solver keeps R as a running sum.

Epochs lower the per-degree threshold theta (a vertex is active when ``r(v) > theta * max(d_out(v), 1)``):
the first at ``FIRST`` times ``epochs.floor_threshold``, each next one ``SHRINK`` times lower, to the
floor (and below it, ``BELOW`` epochs at most, only when rounding keeps the bound above ``tol``
there; then ``ConvergenceError``). An epoch ends when no
vertex is active. The solve stops as soon as R plus the rounding allowance is at most ``tol``: the
running sum triggers it and a full sum of the residues confirms it (else the running sum restarts
from the full sum). A queue pass of n pops or a sweep counts as one iteration (``max_iter``).

Queue and sweeps: the queue holds each active vertex once; once it holds more than ``SWITCH * n``
vertices the solve sweeps for good (a sweep reads every vertex's residue, which pays once the active
set is a fair share of the graph, and in id order it reads the CSR arrays sequentially). While it
queues, the vertices that ever received residue are listed, so that a new epoch finds its active set
without reading all n residues.

Rounding: each float64 add is rounded by at most epsilon/2 relative to its result, and an error at u
reaches the row through ``q_u``, a distribution, so it adds at most its size to the L1 error. A
reserve gets one add per push of its vertex and the reserves sum to at most 1: at most the largest
number of pushes of one vertex times epsilon (``epochs.rounding``). Each residue add errs by at most
epsilon times the residue it leaves, which the solver sums as it goes. The allowance is these two
plus the cast to the result type.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from operators.ppr.epochs import MAX_EPOCHS, floor_threshold, rounding

SWITCH = 0.05  # queue -> sweeps once this share of the vertices is active at once (tuned on SNAP graphs)
FIRST = 16.0  # the first epoch's threshold, in floors
SHRINK = 0.1  # each next epoch's threshold, a share of the last one's
BELOW = 3  # epochs below the floor at most; a bound still above tol is then the allowance's doing

QUEUE, SWEEP = 0, 1  # stats[0]: the solve's phase
# stats: phase, queue pops, sweeps, most pushes of one vertex, vertices listed as touched, out of max_iter
PHASE, POPS, SWEEPS, MOST, TOUCHED, OUT = range(6)


@nb.njit(inline="always", cache=True)
def _mass(r, touched, nt, everywhere):
    """The residue mass summed in full: over all vertices, or over the ``nt`` touched ones."""
    total = 0.0
    if everywhere:
        for u in range(r.size):
            total += r[u]
    else:
        for i in range(nt):
            total += r[touched[i]]
    return total


@nb.njit(cache=True, nogil=True)
def solve(
    indptr,
    indices,
    s,
    alpha,
    theta,
    floor,
    shrink,
    switch,
    tol,
    cast,
    eps,
    global_stop,
    max_iter,
    p,
    r,
    stats,
):
    """Solve the row of source ``s`` into zeroed reserves ``p`` and residues ``r``; returns its residue
    mass, summed in full, and the sum of the residues that its adds left (their rounding's scale).
    ``stats`` (int64, 6 zeros) receives the counts named above, ``stats[OUT]`` = 1 when ``max_iter``
    iterations did not suffice.

    ``global_stop``: epochs from ``theta`` down (times ``shrink`` each; the queue gives way to sweeps
    above ``switch * n`` vertices), stopping once the mass plus the allowance ``(most pushes + residue
    sum) * eps + cast`` is at most ``tol``, or after ``MAX_EPOCHS`` epochs. Otherwise one epoch at
    ``theta`` (the ``r_max`` mode). The source is pushed first whatever its residue."""
    n = indptr.size - 1
    scale = np.empty(n, dtype=np.float64)  # max(d_out, 1): the per-degree threshold's scale
    for u in range(n):
        scale[u] = max(indptr[u + 1] - indptr[u], 1)
    counts = np.zeros(n, dtype=np.int32)
    queue = np.empty(n, dtype=np.int32)  # circular; each vertex at most once (``queued``)
    queued = np.zeros(n, dtype=np.bool_)
    touched = np.empty(n, dtype=np.int32)  # vertices that ever held residue, listed while queueing
    limit = switch * n
    most, added, mass, target = 0, 0.0, 1.0, tol - cast
    r[s] = 1.0
    touched[0], queue[0], queued[s] = s, s, True
    nt, head, size = 1, 0, 1
    phase, pops, sweeps, stop, below = QUEUE, 0, 0, False, 0
    for _ in range(MAX_EPOCHS):
        while size > 0 and phase == QUEUE and not stop:  # pop, push in place, queue what it activated
            if pops % n == 0 and sweeps + pops // n + 1 > max_iter:
                stats[OUT] = 1
                break
            v = queue[head]
            head = head + 1 if head + 1 < n else 0
            size -= 1
            queued[v] = False
            pops += 1
            rv = r[v]
            r[v] = 0.0
            p[v] += (1.0 - alpha) * rv
            counts[v] += 1
            lo, hi = indptr[v], indptr[v + 1]
            share = alpha * rv / max(hi - lo, 1)
            for e in range(lo, hi + (hi == lo)):
                u = indices[e] if hi > lo else s  # without out-edges: back to the source
                if r[u] == 0.0 and p[u] == 0.0:
                    touched[nt] = u
                    nt += 1
                r[u] += share
                added += r[u]
                if not queued[u] and r[u] > theta * scale[u]:
                    queued[u] = True
                    queue[(head + size) % n] = u
                    size += 1
            mass -= (1.0 - alpha) * rv
            most = max(most, counts[v])
            target = tol - (most + added) * eps - cast
            if global_stop and mass <= target:
                mass = _mass(r, touched, nt, False)  # confirm, or go on from the exact mass
                stop = mass <= target
            if size > limit:
                phase = SWEEP
        while phase == SWEEP and not stop and not stats[OUT]:  # in id order, until a sweep finds none
            if sweeps + (pops + n - 1) // n + 1 > max_iter:
                stats[OUT] = 1
                break
            sweeps += 1
            pushed = 0
            for v in range(n):
                if r[v] > theta * scale[v]:
                    rv = r[v]
                    r[v] = 0.0
                    p[v] += (1.0 - alpha) * rv
                    counts[v] += 1
                    pushed += 1
                    lo, hi = indptr[v], indptr[v + 1]
                    if hi == lo:
                        r[s] += alpha * rv
                        added += r[s]
                    else:
                        share = alpha * rv / (hi - lo)
                        for e in range(lo, hi):
                            u = indices[e]
                            r[u] += share
                            added += r[u]
                    mass -= (1.0 - alpha) * rv
                    most = max(most, counts[v])
                    target = tol - (most + added) * eps - cast
                    if global_stop and mass <= target:
                        mass = _mass(r, touched, nt, True)
                        if mass <= target:
                            stop = True
                            break
            if pushed == 0:
                break
        if stop or stats[OUT] or not global_stop:
            break
        mass = _mass(r, touched, nt, phase == SWEEP)  # the epoch emptied its active set
        if mass <= target:
            break
        below += theta <= floor  # epochs below the floor: only for the rounding allowance's sake
        if below > BELOW:
            break
        theta = max(floor, theta * shrink) if theta > floor else theta * shrink
        if phase == QUEUE:  # the next epoch's active set, among the touched vertices
            for i in range(nt):
                u = touched[i]
                if r[u] > theta * scale[u]:
                    queued[u] = True
                    queue[(head + size) % n] = u
                    size += 1
            if size > limit:
                phase = SWEEP
    stats[PHASE], stats[POPS], stats[SWEEPS], stats[MOST], stats[TOUCHED] = phase, pops, sweeps, most, nt
    return _mass(r, touched, nt, phase == SWEEP), added


def solver(G, alpha: float, tol: float, r_max: float | None, dtype):
    """``ppr``'s CPU solve by PowerPush: ``run(sources, limit, serial)`` solves ``sources[0]`` and returns
    (its row (1, n) float64, iterations or None when ``limit`` did not suffice, models, [residue mass],
    [rounding allowance]). Thread-safe (``serial`` is accepted for ``_collect``: the solve is serial)."""
    floor = floor_threshold(tol, G.m, G.n)
    eps = float(np.finfo(np.float64).eps)
    cast = rounding(0, np.float64, dtype)

    def run(sources, limit, serial=False):
        s = int(sources[0])
        p = np.zeros(G.n)
        r = np.zeros(G.n)
        stats = np.zeros(6, dtype=np.int64)
        theta = r_max if r_max is not None else FIRST * floor
        stop = r_max is None
        args = (G.indptr, G.indices, s, alpha, theta, floor, SHRINK, SWITCH, tol, cast, eps, stop, limit)
        residual, added = solve(*args, p, r, stats)
        passes = -(-int(stats[POPS]) // G.n)  # a queue pass is n pops
        allowance = rounding(int(stats[MOST]), np.float64, dtype) + added * eps
        done = not stats[OUT] and (not stop or residual + allowance <= tol)
        models = "Q" * passes + "S" * int(stats[SWEEPS])
        return p[None, :], (passes + int(stats[SWEEPS]) if done else None), models, [residual], [allowance]

    return run
