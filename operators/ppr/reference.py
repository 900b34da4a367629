"""Slow, obvious single-source PPR for tests: a dense linear solve and a synchronous forward push that
records what each iteration touched (the order the cost model's statistics count in)."""

from __future__ import annotations

import numpy as np

from graphs import CSRGraph


def _ppr_reference(G: CSRGraph, s: int, alpha: float = 0.8) -> np.ndarray:
    """Slow and obvious: solve pi = (1 - alpha) e_s + alpha pi P_s densely (tests only, small n)."""
    import scipy.sparse as sp

    n = G.n
    g = G.to("cpu")
    A = sp.csr_matrix((np.ones(g.m), g.indices, g.indptr), shape=(n, n)).toarray()  # multi-edges add up
    P = np.zeros((n, n))
    for u in range(n):
        d = A[u].sum()
        if d > 0:
            P[u] = A[u] / d
        else:
            P[u, s] = 1.0
    e = np.zeros(n)
    e[s] = 1.0
    return np.linalg.solve((np.eye(n) - alpha * P).T, (1.0 - alpha) * e)


def _push_reference(G: CSRGraph, s: int, alpha: float, tol: float):
    """Slow and obvious synchronous forward push (tests only): reserves, residues and, per iteration,
    the active list in the order the solvers number it and the set of vertices that received mass.

    The active list of iteration k + 1 is built as the push solvers build it: the vertices that
    received mass in iteration k, in first-touch order (source last for dangling mass).
    """
    g = G.to("cpu")
    deg = np.diff(g.indptr)
    p, r = np.zeros(g.n), np.zeros(g.n)
    r[s] = 1.0
    active, history = [s], []
    while active:
        received: dict[int, float] = {}
        dangling = 0.0
        for v in active:
            rv, r[v] = r[v], 0.0
            p[v] += (1.0 - alpha) * rv
            if deg[v] == 0:
                dangling += rv
            for u in g.indices[g.indptr[v] : g.indptr[v + 1]]:
                received[int(u)] = received.get(int(u), 0.0) + alpha * rv / deg[v]
        if dangling:
            received[s] = received.get(s, 0.0) + alpha * dangling
        history.append((list(active), set(received)))
        for u, x in received.items():
            r[u] += x
        active = [u for u in received if r[u] > tol * max(deg[u], 1)]
    return p, r, history
