"""The CPU query's Numba loops (``operators.topk.cpu.loops``): the round's top k against ``select_top``,
and a round in one call (a batch thread's) against the same round in steps (a query alone)."""

from __future__ import annotations

import numpy as np
import pytest

from operators import build_ppr_index
from operators.topk.cpu import CPUQuery, select_top
from operators.topk.cpu.loops import _select_cpu


@pytest.mark.parametrize("k", [1, 7, 40, 500])
@pytest.mark.parametrize("with_perm", [False, True])
def test_select_in_numba_is_select_top(k, with_perm):
    """Float32 ties (estimates drawn from a few values, some equal only after rounding to float32) rank
    by id, or by the id ``perm`` gives, exactly as the NumPy reference ranks them; fewer than k
    estimates come back whole."""
    rng = np.random.default_rng(k)
    n = 300
    verts = rng.permutation(5 * n)[:n].astype(np.int32)
    base = rng.choice([0.25, 0.125, 1e-3, 3e-5], size=n)
    est = base * (1 + rng.choice([0.0, 1e-9, 2e-8], size=n))  # below a float32 step: ties
    perm = rng.permutation(5 * n).astype(np.int64) if with_perm else None
    for size in (n, min(n, k), max(1, k // 2)):
        want = select_top(verts[:size], est[:size], k, perm)
        got = _select_cpu(verts[:size], est[:size], k, np.zeros(0, np.int64) if perm is None else perm)
        np.testing.assert_array_equal(got, want)
    assert len(np.unique(est.astype(np.float32))) < n // 10  # the case has ties to break


@pytest.mark.parametrize("switches", [{}, {"high_irw": False}, {"adaptive": False}])
def test_round_in_one_call_is_the_round_in_steps(rmat13, switches):
    """A batch thread's round (push, candidates, Alg. 4, Alg. 6 serially and the top k in one Numba
    call) leaves the same workspace and returns the same answer as a lone query's round, whose Alg. 6
    runs on Numba's threads; over two rounds of several sources, at two k. Alg. 4's sums are those of
    each round alone."""
    idx = build_ppr_index(rmat13, seed=3)
    P = idx.params
    high_irw, adaptive = switches.get("high_irw", True), switches.get("adaptive", True)
    steps, whole = CPUQuery(idx), CPUQuery(idx)
    whole.serial = True
    rng = np.random.default_rng(1)
    for s in rng.choice(np.flatnonzero(np.diff(idx.graph.indptr) > 0), 6, replace=False):
        for k in (20, 200):
            delta = 1.0 / (10 * k * np.log(idx.graph.n))
            for q in (steps, whole):
                q.start(int(s))
            for _ in range(2):
                got = []
                for q in (steps, whole):
                    q.push(P.r_max(delta), adaptive=adaptive, tiling=False, persistent=False)
                    got.append(q.estimate(0.5 * delta, k, high_irw=high_irw, tiling=False))
                (v1, e1, c1, r1), (v2, e2, c2, r2) = got
                assert v1.size == min(k, v1.size) and v1.size > 0
                np.testing.assert_array_equal(v1, v2)
                np.testing.assert_array_equal(e1, e2)
                assert (c1, r1) == (c2, r2) and steps.pushes() == whole.pushes() > 0
                np.testing.assert_array_equal(steps.r, whole.r)
                np.testing.assert_array_equal(steps.touched[: steps.nt], whole.touched[: whole.nt])
                np.testing.assert_allclose(whole.est_h, _alg4(idx, whole), rtol=1e-12, atol=1e-300)
                delta /= 2


def _alg4(idx, q):
    """Alg. 4 in NumPy: sum over the vertices v with residue of r(v) / omega(v) times each H entry of v."""
    a = idx.arrays
    v = q.touched[: q.nt][q.r[q.touched[: q.nt]] > 0]
    lens = a["hptr"][v + 1] - a["hptr"][v]
    entry = np.concatenate([np.arange(a["hptr"][u], a["hptr"][u + 1]) for u in v]).astype(np.int64)
    w = np.repeat(q.r[v] / q.omega[v], lens) * a["h_freq"][entry]
    return np.bincount(a["h_end"][entry], weights=w, minlength=a["high"].size)
