"""CPU (Numba) solver of single-source PPR by synchronous forward push, forward pull, or the hybrid.

Iteration k takes the active set A_k = {v : r(v) > tol * max(d_out(v), 1)} (the source is active in
iteration 0 whatever its degree). Every v in A_k keeps (1 - alpha) r(v) as reserve and sends
alpha r(v) / d_out(v) along each out-edge (to the source when it has none); the others keep their
residue. Push walks A_k's out-edges and adds into a separate ``r_in`` (the separation that spares the
lock on the sender); pull lets each vertex sum the messages ``msg`` of its in-neighbours (zero for
inactive ones). Both give the same iterate, so the model only changes the cost.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from operators.ppr.cost import HYBRID, PULL, PUSH


@nb.njit(inline="always", cache=True)
def _ceil_div(a, b):
    return (a + b - 1) // b


@nb.njit(inline="always", cache=True)
def _add_rdw(q, d, blk, wrp, nblocks, warps, lanes):
    i = (q // warps) % nblocks
    blk[i] += _ceil_div(d, lanes * warps)
    wrp[i * warps + q % warps] += _ceil_div(d, lanes)


@nb.njit(inline="always", cache=True)
def _add_delta(u, blk, wrp, nblocks, warps, cblk, cwrp):
    i = (u // warps) % nblocks
    blk[i] += cblk
    wrp[i * warps + u % warps] += cwrp


@nb.njit(inline="always", cache=True)
def _join(u, q, deg, r, msg, alpha, light, rdw_b, rdw_w, nblocks, warps, lanes):
    """u joins the active set at slot q: its push statistics and its message; returns (whether it is
    heavy, the residue it sends back to the source when it has no out-edges)."""
    _add_rdw(q, deg[u], rdw_b, rdw_w, nblocks, warps, lanes)
    if deg[u] > 0:
        msg[u] = alpha * r[u] / deg[u]
        return deg[u] > light, 0.0
    return deg[u] > light, r[u]


@nb.njit(cache=True)
def rdw_bound(f, heavy, light, dmax, nblocks, warps, lanes):
    """An upper bound of Phi_rdw of a frontier of ``f`` vertices, ``heavy`` of them of out-degree above
    ``light`` (all at most ``dmax``). Slots go round-robin, so a block holds at most ``b * per`` of them
    and a warp ``per``, ``per = ceil(f / (b * blocks))``."""
    per = _ceil_div(f, warps * nblocks)
    top = light if heavy == 0 else dmax
    return per * (warps * _ceil_div(top, lanes * warps) + _ceil_div(top, lanes))


@nb.njit(cache=True)
def _phi(sblk, swrp, blk, wrp, warps):
    best = 0.0
    for i in range(blk.size):
        top = 0.0
        for j in range(warps):
            top = max(top, swrp[i * warps + j] + wrp[i * warps + j])
        best = max(best, sblk[i] + blk[i] + top)
    return best


@nb.njit(cache=True, nogil=True)
def _pull_one(u, tptr, tind, deg, msg, r, p, recv, s, force, alpha, tol, dmass):
    acc = 0.0
    for e in range(tptr[u], tptr[u + 1]):
        acc += msg[tind[e]]
    if u == s:
        acc += alpha * dmass
    ru = r[u]
    if ru > tol * max(deg[u], 1) or u == force:
        p[u] += (1.0 - alpha) * ru
        ru = 0.0
    r[u] = ru + acc
    recv[u] = acc > 0.0


@nb.njit(parallel=True, cache=True)
def _pull_sweep(tptr, tind, deg, msg, r, p, recv, s, force, alpha, tol, dmass):
    for u in nb.prange(deg.size):
        _pull_one(u, tptr, tind, deg, msg, r, p, recv, s, force, alpha, tol, dmass)


@nb.njit(cache=True, nogil=True)
def _pull_sweep_serial(tptr, tind, deg, msg, r, p, recv, s, force, alpha, tol, dmass):
    for u in range(deg.size):  # a solve on a thread of a batch (``_cpu_threads``)
        _pull_one(u, tptr, tind, deg, msg, r, p, recv, s, force, alpha, tol, dmass)


@nb.njit(cache=True, nogil=True)
def solve(
    indptr,
    indices,
    tptr,
    tind,
    deg,
    s,
    alpha,
    tol,
    mode,
    max_iter,
    weights,
    layout,
    static,
    degrees,
    p,
    r,
    trace,
    serial,
    it0,
):
    """Run to an empty active set; returns (iterations, 0) or (max_iter, 1) when it ran out. ``serial``:
    pull sweeps in the calling thread (a solve of a threaded batch), else on Numba's threads.

    ``it0`` = 0 starts from residue 1 at ``s``. ``it0`` > 0 resumes the reserves ``p`` and residues ``r``
    that ``it0`` iterations left (an epoch with a lower threshold ``tol``): the active set is every v
    with r(v) > tol * max(d_out(v), 1), the statistics are those of a frontier that a push produced
    and that received nothing, and iteration numbers (``trace``, ``max_iter``) continue from ``it0``.

    ``weights`` = (l1, l2, l3), ``layout`` = (blocks, warps, lanes), ``static`` = (blk, wrp, Phi_rdr)
    of the pull sweep. ``trace[k]`` gets (model, Phi_rdw, Phi_sqw, |A_k|, bounded) of iteration k.
    After a push the hybrid bounds Phi_rdw from above (``rdw_bound``; ``degrees`` = (light, the
    largest out-degree), light from ``_ppr_cost.light_degree``) and Phi_sqw from below (by Phi_rdr).
    Where that gives Psi < 0 push is certain, and the row holds the two bounds with bounded = 1,
    unless the GPU's merge counted the statistics anyway (after a pull, or after a push whose bound
    failed): as the GPU decides.
    """
    n = deg.size
    nblocks, warps, lanes = layout
    sblk, swrp, rdr = static
    cblk = 1.0 + np.log2(lanes * warps)
    cwrp = 1.0 + np.log2(lanes)
    zb = np.zeros(nblocks)
    zw = np.zeros(nblocks * warps)
    rdw_b, rdw_w, sqw_b, sqw_w = zb.copy(), zw.copy(), zb.copy(), zw.copy()
    r_in = np.zeros(n)
    msg = np.zeros(n)
    recv = np.zeros(n, dtype=np.bool_)
    front = np.empty(n, dtype=np.int64)
    touched = np.empty(n, dtype=np.int64)
    light, dmax = degrees
    heavy = 0
    pushed = counted = False  # after a push, and unless the statistics were counted (see above)
    if it0 == 0:
        r[s] = 1.0
        front[0] = s
        f = 1
        _add_rdw(0, deg[s], rdw_b, rdw_w, nblocks, warps, lanes)
        dmass = 1.0 if deg[s] == 0 else 0.0
        if deg[s] > 0:
            msg[s] = alpha / deg[s]
    else:  # as the GPU's restart: a frontier from a push, its statistics wanted
        f = 0
        dmass = 0.0
        for u in range(n):
            if r[u] > tol * max(deg[u], 1):
                front[f] = u
                big, back = _join(u, f, deg, r, msg, alpha, light, rdw_b, rdw_w, nblocks, warps, lanes)
                heavy += big
                dmass += back
                f += 1
        pushed = counted = True
    it = it0
    while f > 0:
        if it >= max_iter:
            return it, 1
        bound = rdw_bound(f, heavy, light, dmax, nblocks, warps, lanes)
        fits = weights[0] * bound - (weights[1] + weights[2]) * rdr < 0
        bounded = mode == HYBRID and pushed and not counted and fits
        if bounded:
            rdw, sqw, model = float(bound), rdr, PUSH
        else:
            rdw = _phi(zb, zw, rdw_b, rdw_w, warps)
            sqw = _phi(sblk, swrp, sqw_b, sqw_w, warps)
            model = mode
            if mode == HYBRID:
                model = PUSH if weights[0] * rdw - weights[1] * rdr - weights[2] * sqw < 0 else PULL
        if it < trace.shape[0]:
            trace[it, 0], trace[it, 1], trace[it, 2], trace[it, 3], trace[it, 4] = model, rdw, sqw, f, bounded
        counted = it > 0 and (not pushed or not fits)  # the GPU's next merge counts them
        pushed, heavy = model == PUSH, 0
        rdw_b[:] = 0.0
        rdw_w[:] = 0.0
        sqw_b[:] = 0.0
        sqw_w[:] = 0.0
        dm = dmass
        dmass = 0.0
        nf = 0
        if model == PUSH:
            t = 0
            for i in range(f):
                v = front[i]
                p[v] += (1.0 - alpha) * r[v]
                r[v] = 0.0
                m = msg[v]
                msg[v] = 0.0
                for e in range(indptr[v], indptr[v + 1]):
                    u = indices[e]
                    if r_in[u] == 0.0:
                        touched[t] = u
                        t += 1
                    r_in[u] += m
            if dm > 0.0:
                if r_in[s] == 0.0:
                    touched[t] = s
                    t += 1
                r_in[s] += alpha * dm
            for i in range(t):
                u = touched[i]
                _add_delta(u, sqw_b, sqw_w, nblocks, warps, cblk, cwrp)
                r[u] += r_in[u]
                r_in[u] = 0.0
                if r[u] > tol * max(deg[u], 1):
                    front[nf] = u
                    nf += 1
        else:
            force = s if it == 0 else -1
            if serial:
                _pull_sweep_serial(tptr, tind, deg, msg, r, p, recv, s, force, alpha, tol, dm)
            else:
                _pull_sweep(tptr, tind, deg, msg, r, p, recv, s, force, alpha, tol, dm)
            for u in range(n):
                msg[u] = 0.0
                if recv[u]:
                    _add_delta(u, sqw_b, sqw_w, nblocks, warps, cblk, cwrp)
                if r[u] > tol * max(deg[u], 1):
                    front[nf] = u
                    nf += 1
        for q in range(nf):
            big, back = _join(front[q], q, deg, r, msg, alpha, light, rdw_b, rdw_w, nblocks, warps, lanes)
            heavy += big
            dmass += back
        f = nf
        it += 1
    return it, 0
