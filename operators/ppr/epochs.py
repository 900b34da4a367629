"""Epochs of decreasing residue thresholds that drive push, pull and the hybrid to a global L1 bound.

Forward push keeps the invariant ``pi(s, .) = p + sum_v r(v) q_v``, where ``q_v`` is the distribution
of where a walk from v stops (jumping back to s from a vertex without out-edges): every ``q_v`` is
non-negative and sums to 1, so the L1 error of the reserves ``p`` is exactly the residue mass
``sum_v r(v)``. A solve with threshold theta ends with every ``r(v) <= theta * max(d_out(v), 1)``, so
its residue mass is at most ``theta * (m + n)``.

The solver runs epochs (PowerPush's, Wu et al., SIGMOD 2021, with the seed's push/pull hybrid inside
each): an epoch runs to an empty active set at its threshold, then the residue mass R of each row is
summed. A row is done once ``R <= tol``; otherwise the next epoch resumes from the same reserves and
residues with the threshold scaled by ``tol / (2 R)`` (the mass left is about proportional to the
threshold), never below ``tol / (m + n)``, at which the mass is certain to be at most ``tol``.

Rounding: each iteration adds to a reserve at most once, with a relative rounding of at most the
compute type's epsilon, and the reserves sum to at most 1; a result cast to float32 adds 2**-24. A row's
certified bound is its residue mass plus that allowance (``rounding``), and the stop tests the sum.
"""

from __future__ import annotations

import numpy as np

MAX_EPOCHS = 64  # epochs before ConvergenceError: rounding that keeps the mass above tol at the floor
FIRST = 1.5  # the first threshold, in floors: emptied active sets hold a third of their bound's mass or less


def floor_threshold(tol: float, m: int, n: int) -> float:
    """The threshold at which an emptied active set certifies a residue mass of at most ``tol``."""
    return tol / max(m + n, 1)


def first_threshold(tol: float, m: int, n: int) -> float:
    """The first epoch's threshold: ``FIRST`` floors (measured on SNAP and R-MAT graphs, an emptied
    active set holds about a third of its bound ``theta * (m + n)``, so one epoch usually suffices)."""
    return FIRST * floor_threshold(tol, m, n)


def next_threshold(theta: float, residual: float, tol: float, floor: float) -> float | None:
    """The next epoch's threshold after one at ``theta`` left ``residual`` > ``tol``; None when
    ``theta`` was the floor already (the mass should be certain: only rounding can leave it above)."""
    if theta <= floor:
        return None
    return max(floor, theta * min(0.5, 0.5 * tol / residual))


def rounding(iterations: int, compute, out) -> float:
    """The L1 rounding allowance of a row after ``iterations`` in the float type ``compute``, returned
    as ``out``."""
    cast = 0.0 if np.dtype(out).itemsize >= np.dtype(compute).itemsize else float(np.finfo(out).eps) / 2
    return iterations * float(np.finfo(compute).eps) + cast
