"""Global PageRank: node-centric pull and edge-centric push, on the GPU (CuPy) and CPU (Numba)."""

from __future__ import annotations

import warnings

import numpy as np

from graphs import CSRGraph
from graphs._device import array_module
from graphs.errors import OptionError
from operators._checks import (
    check_choice,
    check_count,
    check_graph,
    check_positive,
    check_probability,
    vertex_vector,
)
from operators.errors import ConvergenceError
from operators.pagerank.cpu import pagerank_cpu
from operators.pagerank.order import back, degree_ordered, into
from operators.pagerank.parts import reciprocal

METHODS = ("auto", "pull", "push", "binned")


def pagerank(
    G: CSRGraph,
    *,
    alpha: float = 0.85,
    personalization=None,
    max_iter: int = 100,
    tol: float = 1e-6,
    nstart=None,
    dangling=None,
    weighted: bool | None = None,
    method: str = "auto",
    dtype=None,
    reorder: bool = False,
    client=None,
    info: dict | None = None,
):
    """PageRank of every vertex, with the semantics of ``networkx.pagerank``.

    Iterates ``x <- alpha * (x P + s(x) d) + (1 - alpha) p`` where ``P`` is the out-weight
    normalised adjacency, ``s(x)`` the rank held by dangling vertices (no out-edges, or out-weight
    0), ``d`` the dangling distribution and ``p`` the personalization, until the L1 change is
    below ``n * tol``.

    Parameters
    ----------
    G : CSRGraph
        On the CPU or the GPU; the computation runs where the graph is.
    alpha : float
        Probability of following an edge (damping factor), in [0, 1].
    personalization : dict or array, optional
        Teleport distribution: dict keyed by original vertex label, or array over internal ids
        (normalised to sum 1). Uniform by default.
    max_iter : int
        Iterations allowed before ``ConvergenceError``.
    tol : float
        Stop when the L1 change of an iteration is below ``n * tol`` (as NetworkX does). On large
        graphs this rule is loose: from ``n * tol >= 2`` it holds after one iteration, so a
        UserWarning is issued when ``n * tol >= 1``; pass ``tol=eps / n`` for an L1 change below eps.
    nstart : dict or array, optional
        Starting vector (normalised). Uniform by default.
    dangling : dict or array, optional
        Where dangling vertices send their rank (normalised); the personalization by default.
    weighted : bool, optional
        Use edge weights (default: when the graph has them).
    method : {'auto', 'pull', 'push', 'binned'}
        'pull': node-centric over in-edges, no atomics. 'push': edge-centric over out-edges with
        atomic (GPU) or per-thread (CPU) accumulation. 'binned': propagation blocking, two streaming
        passes per iteration over a layout of the edges by (source chunk, destination bin). The
        layout is built on the first call and kept with the graph: 8 bytes an edge (12 weighted),
        plus 4 or 8 for the contributions while it runs; it is over ids renumbered by degree (a
        permutation kept with the graph) unless the graph is in such an order already. Its build
        makes a first call on an H100 a little slower than pull's (R-MAT 24: 0.15-0.16 s against
        0.14 s; 25: 0.38-0.39 against 0.34), later calls 2.6-3.7x faster (0.03 against 0.08 s; 0.06
        against 0.22). On the GPU 'binned' accumulates sums in shared memory in the
        value type, in an order that can vary between runs (float32: about 1e-7 L1 from 'pull').
        'auto' is 'binned' in float32 once the value vector outgrows half the GPU's L2 cache (from
        about 6.6M vertices on an H100; 3.3M when the first 32,768 vertices have under a fifth of the
        out-edges, as in graphs not in degree order) and the layout fits in free memory, else 'pull'
        (a RuntimeWarning says so when the build runs out of memory after all). A partitioned graph
        takes 'pull' or 'binned' (each part laid out over its own rows, not renumbered); with 'auto'
        each GPU worker applies the same rule to its part, and CPU workers pull.
    dtype : {None, float32, float64}
        Value type on the GPU (default float32; 'pull' and 'push' accumulate sums in float64). The
        CPU always computes in float64.
    reorder : bool
        Iterate on a copy of the graph renumbered by decreasing degree, built on the first call and
        kept with the graph (about twice its memory, with the transpose; ``G.forget_derived()``
        frees it and every other plan or copy kept with ``G``); the result comes back in
        the graph's own numbering. On skewed graphs this halves the GPU pull iteration (R-MAT 24:
        4.2 -> 2.0 ms) but the first call pays the build (0.3 s there): for repeated runs. Ignored
        for partitioned graphs.
    client : distributed.Client, optional
        Required when ``G`` is a ``graphs.PartitionedGraph``: part ``r`` is placed on the ``r``-th
        worker (by address) for the call. With GPU workers each worker runs the iteration on its
        range and receives through NCCL the entries of the vector that its in-edges read; with CPU
        workers the vector is exchanged through Dask. The result is then a NumPy vector.
    info : dict, optional
        Filled with details of a partitioned run: ``device``, ``workers``, per-rank ``timings``.

    Returns
    -------
    ndarray
        Rank per internal vertex id (NumPy on the CPU, CuPy on the GPU); ``G.ids`` holds labels.

    Raises
    ------
    ConvergenceError
        If the tolerance is not reached within ``max_iter`` iterations.
    """
    from graphs.partition import PartitionedGraph

    parted = isinstance(G, PartitionedGraph)
    if parted and client is None:
        raise OptionError("a partitioned graph needs client= (a distributed.Client to hold the parts)")
    G = G if parted else check_graph(G)
    o = pagerank_options(alpha=alpha, max_iter=max_iter, tol=tol, method=method)
    alpha, max_iter, tol = o["alpha"], o["max_iter"], o["tol"]
    if parted and method not in ("auto", "pull", "binned"):
        raise OptionError("a partitioned graph is computed by 'pull' or 'binned' (or 'auto'), not 'push'")
    if weighted and not G.weighted:
        raise OptionError("weighted=True, but the graph has no edge weights")
    weighted = G.weighted if weighted is None else bool(weighted)
    if dtype is None:
        dtype = np.float32 if parted or G.device == "gpu" else np.float64
    if np.dtype(dtype) not in (np.float32, np.float64):
        raise OptionError(f"dtype must be float32 or float64, got {dtype}")
    chosen = method == "auto" and not parted
    n = G.n
    by_label = any(isinstance(v, dict) for v in (personalization, dangling, nstart))
    labels = G.label_graph() if parted and by_label else G
    p = vertex_vector(labels, personalization, "personalization")
    dw = vertex_vector(labels, dangling, "dangling")
    x0 = vertex_vector(labels, nstart, "nstart")
    if n == 0:
        return np.zeros(0, dtype=np.float64)
    if n * tol >= 1:
        warnings.warn(
            f"tol={tol:g} on {n:,} vertices: the stopping rule (L1 change < n * tol = {n * tol:.3g}, as in "
            f"NetworkX) can hold after the first iteration; tol={1e-6 / n:.1e} gives an L1 change below 1e-6",
            UserWarning,
            stacklevel=2,
        )
    if parted:
        from pipelines.distributed.pagerank import pagerank_partitioned

        x, iters, err = pagerank_partitioned(
            G, client, alpha=alpha, x0=x0, p=p, dw=dw, weighted=weighted, max_iter=max_iter,
            threshold=n * tol, dtype=np.dtype(dtype), device="auto", info=info, method=method,
        )  # fmt: skip
        if not err < n * tol:
            raise ConvergenceError("pagerank", iters, err, n * tol)
        return x
    if client is not None:
        raise OptionError("client= applies to a graphs.PartitionedGraph; this graph is a CSRGraph")
    perm = None
    if reorder:
        G, perm = degree_ordered(G)
        p, dw, x0 = into(p, perm), into(dw, perm), into(x0, perm)
    if info is not None:
        info["degree_order"] = perm is not None
    method = auto_method(G, dtype, weighted) if chosen else method  # on the graph iterated: its order counts
    inv_out = inverse_out_weight(G, weighted)
    args = dict(
        alpha=alpha,
        x0=x0,
        p=p,
        dw=dw,
        inv_out=inv_out,
        weighted=weighted,
        max_iter=max_iter,
        threshold=n * tol,
    )
    if G.device == "gpu":
        from operators.pagerank.gpu import pagerank_gpu

        try:
            x, iters, err, _ = pagerank_gpu(G, method=method, dtype=dtype, **args)
        except MemoryError:
            if not (chosen and method == "binned"):
                raise
            warnings.warn("the binned layout did not fit in the GPU's memory; PageRank pulls instead",
                          RuntimeWarning, stacklevel=2)  # fmt: skip
            x, iters, err, _ = pagerank_gpu(G, method="pull", dtype=dtype, **args)
    else:
        x, iters, err = pagerank_cpu(G, method=method, **args)
    if not err < n * tol:
        raise ConvergenceError("pagerank", iters, err, n * tol)
    return x if perm is None else back(x, perm)


def auto_method(G: CSRGraph, dtype, weighted: bool) -> str:
    """'binned' for float32 on a GPU whose free memory holds the layout's build, once the value vector
    outgrows half the L2 cache (a quarter when pull's shared-memory cache of the first vertices would
    take under a fifth of the gathers: graphs not in degree order), else 'pull'. On the H100 binned
    led from R-MAT 23 in degree order and from R-MAT 22 as generated (benchmarks/RESULTS.md)."""
    if G.device != "gpu":
        return "pull"
    from operators.pagerank.binned import hot_share
    from operators.pagerank.binned.gpu import binned_pays

    return "binned" if binned_pays(G.n, G.m, hot_share(G), dtype, weighted) else "pull"


def pagerank_options(*, alpha=0.85, max_iter=100, tol=1e-6, method="auto") -> dict:
    """``pagerank``'s scalar options checked (jobs call it before any work)."""
    return dict(
        alpha=check_probability("alpha", alpha),
        max_iter=check_count("max_iter", max_iter),
        tol=check_positive("tol", tol),
        method=check_choice("method", method, METHODS),
    )


def inverse_out_weight(G: CSRGraph, weighted: bool):
    """``1 / out-weight`` per vertex, 0 for dangling vertices (float64, on the graph's device; cached)."""

    def compute(g):
        outw = g.out_degree(weighted=weighted)
        return reciprocal(outw, array_module(outw))

    return G.derived(f"inverse_out_weight_{bool(weighted)}", compute)


def _pagerank_reference(
    G, *, alpha=0.85, personalization=None, max_iter=100, tol=1e-6, nstart=None, dangling=None
):
    """Slow, obvious PageRank over Python lists (tests only; same semantics as ``pagerank``)."""
    G = G.to("cpu")
    n = G.n
    indptr, indices = G.indptr.tolist(), G.indices.tolist()
    wts = G.weights.tolist() if G.weighted else [1.0] * G.m
    out = [sum(wts[indptr[u] : indptr[u + 1]]) for u in range(n)]
    p = vertex_vector(G, personalization, "personalization")
    p = [1.0 / n] * n if p is None else p.tolist()
    d = vertex_vector(G, dangling, "dangling")
    d = p if d is None else d.tolist()
    x = vertex_vector(G, nstart, "nstart")
    x = [1.0 / n] * n if x is None else x.tolist()
    for _ in range(max_iter):
        last = x
        dmass = sum(last[u] for u in range(n) if out[u] == 0)
        x = [(1.0 - alpha) * p[v] + alpha * dmass * d[v] for v in range(n)]
        for u in range(n):
            for e in range(indptr[u], indptr[u + 1]):
                if out[u] > 0:
                    x[indices[e]] += alpha * last[u] * wts[e] / out[u]
        err = sum(abs(a - b) for a, b in zip(x, last, strict=True))
        if err < n * tol:
            return np.array(x)
    raise ConvergenceError("pagerank (reference)", max_iter, err, n * tol)
