"""Global PageRank: node-centric pull and edge-centric push, on the GPU (CuPy) and CPU (Numba)."""

from __future__ import annotations

import warnings

import numpy as np

from graphs import CSRGraph, vertex_frame
from graphs._device import array_module
from graphs.errors import OptionError
from operators._checks import check_graph, vertex_vector
from operators.errors import ConvergenceError
from operators.options import PageRankOptions
from operators.pagerank.cpu import pagerank_cpu
from operators.pagerank.order import back, degree_ordered, into
from operators.pagerank.parts import reciprocal


def pagerank(
    G: CSRGraph,
    *,
    alpha: float = PageRankOptions.alpha,
    personalization=None,
    max_iter: int = PageRankOptions.max_iter,
    tol: float = PageRankOptions.tol,
    nstart=None,
    dangling=None,
    weighted: bool | None = None,
    method: str = PageRankOptions.method,
    dtype=None,
    reorder: bool = False,
    info: dict | None = None,
    options: PageRankOptions | None = None,
    as_frame: bool = False,
):
    """PageRank of every vertex, with the semantics of ``networkx.pagerank``.

    Iterates ``x <- alpha * (x P + s(x) d) + (1 - alpha) p`` where ``P`` is the out-weight
    normalised adjacency, ``s(x)`` the rank held by dangling vertices (no out-edges, or out-weight
    0), ``d`` the dangling distribution and ``p`` the personalization, until the L1 change is
    below ``n * tol``.

    Parameters
    ----------
    G : CSRGraph, NetworkX graph, SciPy sparse matrix or pandas edge DataFrame
        The last three are converted with their labels first (``graphs.as_graph``).
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
        passes per iteration over a layout of the edges by (source chunk, destination bin); the
        layout is built on the first call and kept with the graph (8 bytes an edge, 12 weighted, plus
        4 or 8 for the contributions while it runs), over ids renumbered by degree unless the graph
        is in such an order already. On the GPU 'binned' adds in shared memory in the value type, in
        an order that can vary between runs (float32: about 1e-7 L1 from 'pull'). 'auto' is 'binned'
        in float32 on a GPU once the value vector outgrows half the L2 cache (a quarter for graphs
        not in degree order) and the layout fits in free memory, else 'pull'; a RuntimeWarning says
        so when the layout's build runs out of memory after all.
    dtype : {None, float32, float64}
        Value type on the GPU (default float32; 'pull' and 'push' accumulate sums in float64). The
        CPU always computes in float64.
    reorder : bool
        Iterate on a copy of the graph renumbered by decreasing degree, built on the first call and
        kept with the graph (about twice its memory, with the transpose; ``G.forget_derived()``
        frees it and every other plan or copy kept with ``G``); the result comes back in the graph's
        own numbering. It pays on skewed graphs over repeated runs (benchmarks/RESULTS.md). With
        ``method='auto'`` on a GPU, where binned would run on that order, no copy is made and binned
        runs on the graph as it is: its layout renumbers sources by degree itself where the graph's
        first ids hold few of its edges (a permutation, no copy).
    info : dict, optional
        Filled with ``degree_order``: whether the iteration ran on the degree-ordered copy.
    options : PageRankOptions, optional
        ``alpha``, ``max_iter``, ``tol`` and ``method`` in one checked object, used as it is; a keyword
        among them that differs from it raises ``OptionError``.
    as_frame : bool
        Return a pandas DataFrame instead, columns ``vertex`` (original labels) and ``pagerank`` (as
        cuGraph returns it); ``dict(zip(frame.vertex, frame.pagerank))`` is NetworkX's dict.

    Returns
    -------
    ndarray
        Rank per internal vertex id (NumPy on the CPU, CuPy on the GPU); ``G.ids`` holds labels.
        With ``as_frame``, the DataFrame (on the host).

    Raises
    ------
    ConvergenceError
        If the tolerance is not reached within ``max_iter`` iterations.

    Examples
    --------
    >>> import graphjobs as gj
    >>> G = gj.from_edges([0, 0, 1, 2, 3], [1, 2, 2, 0, 2])
    >>> gj.pagerank(G, tol=1e-10).round(4).tolist()
    [0.3725, 0.1958, 0.3941, 0.0375]
    >>> import networkx as nx  # other graph shapes are converted with their labels
    >>> gj.pagerank(nx.DiGraph([("a", "b"), ("b", "a")]), as_frame=True).values.tolist()
    [['a', 0.5], ['b', 0.5]]
    """
    from graphs.partition import PartitionedGraph

    if isinstance(G, PartitionedGraph):
        raise TypeError(
            "a graphs.PartitionedGraph is computed over a cluster's workers: "
            "pipelines.distributed.pagerank(PG, client, ...)"
        )
    G = labelled = check_graph(G)
    o = PageRankOptions.resolve(options, alpha=alpha, max_iter=max_iter, tol=tol, method=method)
    alpha, max_iter, tol, method = o.alpha, o.max_iter, o.tol, o.method
    weighted = check_weighted(G, weighted)
    if dtype is None:
        dtype = np.float32 if G.device == "gpu" else np.float64
    dtype = check_dtype(dtype)
    chosen = method == "auto"
    n = G.n
    p, dw, x0 = start_vectors(G, personalization, dangling, nstart)
    if n == 0:
        x = np.zeros(0, dtype=np.float64)
        return vertex_frame(G, x, "pagerank") if as_frame else x
    warn_loose_tol(n, tol)
    perm = None
    binned_instead = reorder and chosen and _bins_in_degree_order(G, dtype, weighted)
    if reorder and not binned_instead:
        G, perm = degree_ordered(G)
        p, dw, x0 = into(p, perm), into(dw, perm), into(x0, perm)
    if info is not None:
        info["degree_order"] = perm is not None
    if binned_instead:
        method = "binned"
    elif chosen:
        method = auto_method(G, dtype, weighted)  # on the graph iterated: its order counts
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
            warnings.warn(
                "the binned layout did not fit in the GPU's memory; PageRank pulls instead",
                RuntimeWarning,
                stacklevel=2,
            )
            x, iters, err, _ = pagerank_gpu(G, method="pull", dtype=dtype, **args)
    else:
        x, iters, err = pagerank_cpu(G, method=method, **args)
    if not err < n * tol:
        raise ConvergenceError("pagerank", iters, err, n * tol)
    x = x if perm is None else back(x, perm)
    return vertex_frame(labelled, x, "pagerank") if as_frame else x


def check_weighted(G, weighted: bool | None) -> bool:
    """``weighted`` resolved against the graph: default when it has weights; True needs weights."""
    if weighted and not G.weighted:
        raise OptionError("weighted=True, but the graph has no edge weights")
    return G.weighted if weighted is None else bool(weighted)


def check_dtype(dtype) -> np.dtype:
    if np.dtype(dtype) not in (np.float32, np.float64):
        raise OptionError(f"dtype must be float32 or float64, got {dtype}")
    return np.dtype(dtype)


def start_vectors(G, personalization, dangling, nstart) -> tuple:
    """The personalization, dangling and starting vectors over ``G``'s internal ids (``vertex_vector``:
    normalised; None where not given)."""
    p = vertex_vector(G, personalization, "personalization")
    dw = vertex_vector(G, dangling, "dangling")
    x0 = vertex_vector(G, nstart, "nstart")
    return p, dw, x0


def warn_loose_tol(n: int, tol: float) -> None:
    """NetworkX's rule stops when the L1 change is below ``n * tol``: say when that cannot constrain."""
    if n * tol >= 1:
        warnings.warn(
            f"tol={tol:g} on {n:,} vertices: the stopping rule (L1 change < n * tol = {n * tol:.3g}, as in "
            f"NetworkX) can hold after the first iteration; tol={1e-6 / n:.1e} gives an L1 change below 1e-6",
            UserWarning,
            stacklevel=3,
        )


def auto_method(G: CSRGraph, dtype, weighted: bool) -> str:
    """'binned' for float32 on a GPU whose free memory holds the layout's build (or a run of the layout
    ``G`` keeps from an earlier call), once the value vector outgrows half the L2 cache (a quarter when pull's
    shared-memory cache of the first vertices would take under a fifth of the gathers: graphs not in
    degree order), else 'pull'."""
    if G.device != "gpu":
        return "pull"
    from operators.pagerank.binned import hot_share, kept_run_bytes
    from operators.pagerank.binned.gpu import binned_pays

    kept = kept_run_bytes(G, weighted, dtype)
    return "binned" if binned_pays(G.n, G.m, hot_share(G), dtype, weighted, kept) else "pull"


def _bins_in_degree_order(G: CSRGraph, dtype, weighted: bool) -> bool:
    """Whether ``method='auto'`` would run binned on ``G`` renumbered by degree. ``reorder=True`` then
    makes no copy and bins ``G`` as it is: the layout renumbers its sources by degree itself where
    ``G``'s first ids hold few of its edges (``binned_order``), and the copy would take memory that the
    layout's build may need. The degree order's hot share is kept with ``G``."""
    if G.device != "gpu" or np.dtype(dtype) != np.float32:  # binned runs in float32 only
        return False
    from graphs.reorder import order_permutation
    from operators.pagerank.binned import TUNING, kept_run_bytes
    from operators.pagerank.binned.gpu import binned_pays

    def share(g):
        first = order_permutation(g)[: TUNING["hot_vertices"]].copy()  # the whole order goes now
        return int((g.indptr[first + 1] - g.indptr[first]).sum()) / g.m if g.m else 1.0

    hot = G.derived(f"pagerank_degree_order_share_{TUNING['hot_vertices']}", share)
    return binned_pays(G.n, G.m, hot, dtype, weighted, kept_run_bytes(G, weighted, dtype))


def inverse_out_weight(G: CSRGraph, weighted: bool):
    """``1 / out-weight`` per vertex, 0 for dangling vertices (float64, on the graph's device; cached)."""

    def compute(g):
        outw = g.out_degree(weighted=weighted)
        return reciprocal(outw, array_module(outw))

    return G.derived(f"inverse_out_weight_{bool(weighted)}", compute)


def _pagerank_reference(
    G,
    *,
    alpha=PageRankOptions.alpha,
    personalization=None,
    max_iter=PageRankOptions.max_iter,
    tol=PageRankOptions.tol,
    nstart=None,
    dangling=None,
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
