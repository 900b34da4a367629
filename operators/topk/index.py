"""The kPAR index (Shi et al., PVLDB 13(1)): PRO-rank budget, random walks, inverted random walks.

Offline stages: global PageRank -> PRO-rank list (pr(u)/d_out(u), decreasing) -> r_max and psi
(Eq. 5) -> per-vertex thresholds beta(v) r_max from the 20% walk budget (Sec. 3.3.2, Eq. 8) ->
omega(v) walks from every v (Eq. 7) -> inverted random walks with the high-IRW set H (Fig. 2, 4).
By default the walks take their first step (``first_step``): a walk from v estimates where the
alpha share of a residue r(s, v) ends, and the query adds the (1 - alpha) r(s, v) that stays at v
exactly, so the same walks give estimates of lower variance than the paper's (R-MAT 20 and 22, CPU,
same pushes: precision@1000 0.9900 -> 0.9931 and 0.9839 -> 0.9877, median relative error of the
top 1000 about 15-20% lower; ``benchmarks/RESULTS.md``). Vertices without out-edges count as
out-degree 1 in every formula (their residue is pushed back to the source, and a walk from them
stops or returns). From 2^22 vertices on the index holds the graph renumbered by decreasing degree
(``order``; labels travel with the vertices, so queries take and return the same labels): the pushes'
records of hubs then share sectors and stay in L2; on smaller graphs, whose query state fits in L2, it
does not pay (``benchmarks/RESULTS.md``, top-k section).
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field

import numpy as np

from graphs import CSRGraph
from graphs._device import array_module, import_cupy, to_host
from graphs._mix import stream_key
from graphs.errors import MemoryLimitError, OptionError
from operators._checks import check_graph, vertex_vector, warn_if_weighted
from operators._gpu.memory import MemoryEstimate, graph_bytes
from operators.options import IndexOptions
from operators.pagerank.order import into, renumbered
from operators.topk.cache import QueryCache
from operators.topk.index_io import save_index
from operators.topk.irw import CHUNK, CHUNK_WORK, invert_walks, walk_pairs
from operators.topk.walks import budget_levels, walk_keys

FORMAT = "graphjobs-ppr-index"
# 2: first_step; 3: order (perm.npy); 4: checksums (versions 1 to 3 are refused: rebuild them)
VERSION = 4
HIGH_SHARE = 0.001  # |H| <= 0.1% of n
# order="auto": degree order from this many vertices on, where one query's 16-byte vertex records (64 MB)
# outgrow the L2 cache; below, the query state fits in L2 and the renumbering does not pay
DEGREE_ORDER_N = 2**22
# memory a walk takes at most while the index is built: its sort key (8 bytes) and the (end, start) pair
# it may add (8-byte key, 4-byte count); on the CPU 2 more for the host sort. Beside them one chunk's
# working arrays (irw.CHUNK_WORK bytes a pair); the build's memory estimate
WALK_BYTES = {"gpu": 20, "cpu": 22}
ARRAYS = ("beta", "omega", "ret", "ip1", "starts", "ip2", "freqs", "omega_i", "high", "h_index")
ARRAYS += ("hptr", "h_end", "h_freq")


@dataclass(frozen=True)
class PPRParams:
    """The accuracy constants of one index; every query formula reads them from here."""

    n: int
    m: int
    alpha: float
    epsilon: float
    delta_min: float
    p_fail: float
    first_step: bool = False  # the index's walks take their first step (see build_ppr_index)

    @property
    def own_share(self) -> float:
        """The share of r(s, t) that a query adds to t's estimate exactly: 1 - alpha with first-step walks."""
        return 1.0 - self.alpha if self.first_step else 0.0

    @property
    def walk_share(self) -> float:
        """The share of r(s, v) that v's index walks carry on: alpha with first-step walks."""
        return self.alpha if self.first_step else 1.0

    @property
    def kappa(self) -> float:
        return 2 * self.epsilon / 3 + 2

    @property
    def log_term(self) -> float:  # log(2 / p_f') with p_f' = p_f / (n log n)
        return math.log(2 * self.n * math.log(self.n) / self.p_fail)

    @property
    def psi(self) -> float:
        return self.kappa * self.log_term / self.epsilon**2

    def r_max(self, delta: float) -> float:  # Eq. 5
        return self.epsilon / math.sqrt(max(self.m, 1)) * math.sqrt(delta / (self.kappa * self.log_term))

    def rho(self, delta: float) -> float:  # Eq. 10: the most one index walk adds to an estimate
        return math.sqrt(delta * self.delta_min) / self.psi

    def eps_prime(self, pi_hat, delta: float, epsilon: float | None = None):
        """eps' at estimate ``pi_hat``: (2e/3 + 2) / (e^2 pi_hat) = kappa / (eps^2 sqrt(delta delta_min))."""
        eps = self.epsilon if epsilon is None else epsilon
        c = (2 * eps / 3 + 2) / (eps**2 * math.sqrt(delta * self.delta_min))
        cp = c * np.maximum(pi_hat, 1e-300)
        return (2 / 3 + np.sqrt(4 / 9 + 8 * cp)) / (2 * cp)


@dataclass(frozen=True, eq=False)
class PPRIndex:
    """A built kPAR index: the graph it belongs to, its parameters and arrays (on the graph's device).
    ``cache`` keeps what queries derive from it for later calls (``operators.topk.cache.KEYS``)."""

    graph: CSRGraph
    params: PPRParams
    seed: int
    budget: float
    arrays: dict
    omega_i_ub: int
    info: dict
    perm: object = None  # the graph's vertex perm[i] is vertex i of ``graph`` (None: the same numbering)
    source_token: str | None = None  # the token of the graph it was built from, when renumbered
    cache: QueryCache = field(default_factory=QueryCache, init=False, repr=False, compare=False)

    @property
    def walks(self) -> int:
        return int(to_host(self.arrays["omega"]).sum())

    @property
    def nbytes(self) -> int:
        return sum(int(a.nbytes) for a in self.arrays.values()) + (
            0 if self.perm is None else int(self.perm.nbytes)
        )

    def forget_workspaces(self) -> None:
        """Drop what queries keep with the index for the next call, so that its memory can be freed:
        their workspaces (about 93 bytes per vertex for each GPU stream, 81 with refine=False, 37 for each CPU
        thread) and round constants. GPU workspaces are closed (``GPUQuery.close``): their buffers, CUDA
        graphs and streams go at once, and a query on one kept elsewhere raises."""
        if self.graph.device == "gpu":  # no kernel may still use them when their memory is reused
            import_cupy().cuda.Device().synchronize()
        self.cache.clear()

    def to(self, device: str) -> PPRIndex:
        from graphs._device import to_device

        arrays = {k: to_device(v, device) for k, v in self.arrays.items()}
        perm = None if self.perm is None else to_device(self.perm, device)
        return dataclasses.replace(self, graph=self.graph.to(device), arrays=arrays, perm=perm)

    def save(self, path, *, overwrite: bool = False, graph=True) -> None:
        """Write the index to a new directory (arrays as .npy, meta.json), atomically; ``graph``: True
        saves the graph in it too, a folder records where ``CSRGraph.save`` put it, False neither
        (``load_ppr_index`` then needs the graph)."""
        save_index(self, path, overwrite=overwrite, graph=graph)


def build_ppr_index(
    G: CSRGraph,
    *,
    alpha: float = IndexOptions.alpha,
    epsilon: float = IndexOptions.epsilon,
    delta_min: float | None = IndexOptions.delta_min,
    p_fail: float | None = IndexOptions.p_fail,
    budget: float = IndexOptions.budget,
    pagerank=None,
    seed: int = IndexOptions.seed,
    first_step: bool = IndexOptions.first_step,
    order: str | None = IndexOptions.order,
    options: IndexOptions | None = None,
    progress=None,
) -> PPRIndex:
    """Build the kPAR index of ``G`` for top-k personalized PageRank queries (``topk_ppr``).

    Parameters
    ----------
    G : CSRGraph, NetworkX graph, SciPy sparse matrix or pandas edge DataFrame
        The last three are converted with their labels first (``graphs.as_graph``).
        At least 2 vertices; built on the graph's device (GPU kernels or Numba). Weights are ignored
        (a UserWarning says so).
    alpha : float
        Probability of following an edge (0.8: stop probability 0.2).
    epsilon : float
        Relative error guaranteed for PPR values above delta (w.p. 1 - p_fail).
    delta_min : float, optional
        Smallest delta the index serves (default 16/n); sets psi and the walks per vertex.
    p_fail : float, optional
        Failure probability (default 1/n).
    budget : float
        Extra walks, as a share of the base walks, given to the top of the PRO-rank list.
    pagerank : array or dict, optional
        Global PageRank (with this alpha) to order the PRO-rank list, an array of length n or a dict
        keyed by label; computed when omitted.
    seed : int
        Seed of the walks: the same seed gives the same index on the CPU and the GPU.
    first_step : bool
        The walks never stop before their first step, and queries add (1 - alpha) r(s, t) to t's
        estimate exactly instead of estimating it from immediate stops: the same number of walks,
        estimates of lower variance, the same guarantee. False: the paper's walks (and estimator).
    order : {'auto', 'degree', 'out_degree', 'in_degree'} or None
        The index holds a copy of ``G`` renumbered by this order (``graphs.reorder``; hubs first, labels
        kept), unless ``G`` is in it already: faster batches on large skewed graphs, for the
        graph's memory once more (``index.graph``; ``G`` itself may be dropped). None keeps ``G``'s
        numbering; 'auto' is 'degree' from 2^22 vertices on, None below (where it did not pay).
    options : IndexOptions, optional
        Every option above but ``pagerank`` in one checked object, used as it is; a keyword that
        differs from it raises ``OptionError``.
    progress : callable, optional
        ``progress(done, total, "walks")`` as the walks are drawn (``operators._progress``).

    Returns
    -------
    PPRIndex
        Arrays on the graph's device; ``.save(dir)`` and ``load_ppr_index(dir)`` keep it. Queries take
        and return labels, so the order does not show in their answers.

    Examples
    --------
    >>> import graphjobs as gj
    >>> G = gj.from_edges([0, 0, 1, 2, 3], [1, 2, 2, 0, 2])
    >>> index = gj.build_ppr_index(G, seed=0)
    >>> index.graph.n, index.params.alpha
    (4, 0.8)
    """
    from operators.pagerank import pagerank as global_pagerank

    G = check_graph(G)
    warn_if_weighted(G, "the top-k PPR index")
    if G.n < 2:
        raise OptionError(f"the PPR index needs a graph with at least 2 vertices, got n={G.n}")
    o = IndexOptions.resolve(
        options,
        alpha=alpha,
        epsilon=epsilon,
        delta_min=delta_min,
        p_fail=p_fail,
        budget=budget,
        seed=seed,
        first_step=first_step,
        order=order,
    )
    alpha, epsilon, budget, seed, order = o.alpha, o.epsilon, o.budget, o.seed, o.order
    first_step = o.first_step
    if pagerank is not None:  # only its order matters: any finite non-negative scores, by label or array
        pagerank = vertex_vector(G, pagerank, "pagerank", normalize=False)
    source, perm, t_order = G, None, time.perf_counter()
    order = ("degree" if G.n >= DEGREE_ORDER_N else None) if order == "auto" else order
    if order is not None:
        G, perm = renumbered(G, order)
        pagerank = into(pagerank, perm) if perm is not None else pagerank
    t_order = time.perf_counter() - t_order
    n, xp = G.n, array_module(G.indptr)
    delta_min = min(16.0 / n, 1.0) if o.delta_min is None else o.delta_min
    p_fail = 1.0 / n if o.p_fail is None else o.p_fail
    params = PPRParams(n, G.m, alpha, epsilon, delta_min, p_fail, bool(first_step))
    t0 = time.perf_counter()
    if pagerank is None:
        opts = dict(alpha=alpha, tol=1e-6 / n, max_iter=500, weighted=False, dtype=np.float64)
        # the transpose and the pull plan would stay with G (or the index's copy of it) through the
        # walks and after, and the queries never read them
        with G.scratch() as view:
            pagerank = global_pagerank(view, **opts)
    deg = xp.maximum(G.out_degree(), 1).astype(np.float64)
    # PRO-rank list: pr(u) / d(u) decreasing, rounded to 9 digits and ties by vertex id, so that the
    # CPU and the GPU (whose sums round differently) build the same list and the same index
    score = to_host(xp.asarray(pagerank, dtype=np.float64) / deg) * n
    pro = xp.asarray(np.argsort(-np.round(score, 9), kind="stable"))
    t1 = time.perf_counter()
    scale = params.r_max(delta_min) * params.psi / delta_min
    base = xp.ceil(deg * scale).astype(np.int64)
    level = budget_levels(to_host(base)[to_host(pro)], budget)
    mult = xp.ones(n, dtype=np.int64)
    mult[pro] = xp.asarray(level)
    omega = base * mult
    beta = xp.where(mult > 1, (mult * base - 1) / (deg * scale), 1.0)  # Eq. 8
    base_walks, boosted = int(base.sum()), int((mult > 1).sum())
    del pagerank, deg, pro, base, mult  # the walks need only omega (and the index beta)
    t2 = time.perf_counter()
    walks = int(omega.sum())
    memory = MemoryEstimate(
        f"the PPR index's {walks:,} walks (n={n:,})",
        G.device,
        (
            ("graph", graph_bytes(n, G.m, weighted=source.weighted)),
            ("renumbered copy", graph_bytes(n, G.m, weighted=G.weighted) if perm is not None else 0),
            ("omega and beta", 16 * n),
            ("walks", walks * WALK_BYTES[G.device]),
            ("a chunk's work", min(walks, CHUNK) * CHUNK_WORK),
        ),
        held=("graph", "renumbered copy", "omega and beta"),
    ).check(f"a larger delta_min (now {delta_min:.3g}) needs fewer walks: they grow as delta_min^-1/2")
    try:
        key = stream_key(seed, 7)
        keys = walk_keys(G.indptr, G.indices, omega, key, alpha, first_step=first_step, progress=progress)
        t3 = time.perf_counter()
        arrays, _ = invert_walks(walk_pairs(keys, n), n, HIGH_SHARE)
    except MemoryError as e:  # CuPy's OutOfMemoryError and thrust's bad_alloc are MemoryErrors
        per = WALK_BYTES[G.device]
        size = f"{walks * per / 2**30:.1f} GiB" if walks * per >= 2**30 else f"{walks * per / 2**20:.1f} MiB"
        raise MemoryLimitError(
            f"the PPR index of this graph (n={n:,}) needs {walks:,} walks at delta_min={delta_min:.3g} "
            f"({delta_min * n:g}/n): about {size} of {G.device} memory while they "
            f"are sorted ({per} bytes a walk), more than was free ({e}); a larger delta_min needs fewer "
            "walks (they grow as delta_min^-1/2)"
        ) from e
    t4 = time.perf_counter()
    arrays.update(beta=beta, omega=omega.astype(np.int32))
    ub = walks_bound(params, arrays, arrays["h_index"] < 0)
    info = dict(
        walks=walks,
        base_walks=base_walks,
        boosted=boosted,
        high=int(arrays["high"].size),
        irw_pairs=int(arrays["starts"].size),
        seconds=dict(order=t_order, pagerank=t1 - t0, budget=t2 - t1, walks=t3 - t2, invert=t4 - t3),
        order=order if perm is not None else None,
        memory=memory,
    )
    source_token = None if perm is None else source.token
    return PPRIndex(G, params, int(seed), budget, arrays, ub, info, perm, source_token)


def walks_bound(params: PPRParams, arrays: dict, where) -> float:
    """omega_I^ub of Eq. 11: the most index walks, in units of rho, an estimate outside the candidates
    may hold over the vertices ``where`` (a mask): max omega_I(t) for the paper's walks; with first-step
    walks (1 - alpha) omega(t) + alpha omega_I(t), as r(s, t) <= rho omega(t) bounds the share added
    exactly. Exact integers for the paper's walks (the value is the same as before first-step walks)."""
    units = params.own_share * arrays["omega"].astype(np.float64) + params.walk_share * arrays["omega_i"]
    units = units[where]
    top = float(units.max()) if units.size else 0.0
    return top if params.first_step else round(top)
