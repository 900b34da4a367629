"""graphjobs as a NetworkX backend: ``nx.pagerank(G, backend="graphjobs")``.

NetworkX finds ``backend`` through the ``networkx.backends`` entry point and calls its functions with
graphs converted by ``convert_from_nx`` (cached by NetworkX in ``G.__networkx_cache__`` until ``G``
changes through its methods). Each function keeps NetworkX's signature, defaults, errors and result
(a dict keyed by the graph's own nodes). ``can_run`` says False, with the reason, where graphjobs
would not give NetworkX's answer within NetworkX's tolerance; NetworkX then runs its own code (with
``nx.config.fallback_to_nx``, or when the backend was chosen by priority rather than by
``backend=``). ``should_run`` leaves graphs under ``nx.config.backends.graphjobs.min_edges`` edges
(50,000) to NetworkX unless ``backend="graphjobs"`` asks for graphjobs.

``nx.config.backends.graphjobs.device`` says where graphjobs computes: 'auto' (the default) on the GPU
when CuPy sees a CUDA device and the graph has ``gpu_min_edges`` edges (1,000,000) or more, else on the
CPU; 'gpu' on the GPU or an error naming what is missing; 'cpu' on the CPU. The converted graph's copy
on the GPU is made on its first GPU call and kept with the converted graph (in NetworkX's cache), so
later calls on the same graph do not move it again. Results are the same dicts of host floats on both.

Examples
--------
>>> import networkx as nx
>>> G = nx.DiGraph([(0, 1), (1, 2), (2, 0), (2, 1)])
>>> x = nx.pagerank(G, backend="graphjobs")
>>> y = nx.pagerank(G)
>>> all(abs(x[v] - y[v]) < 1e-6 for v in G)
True
"""

from __future__ import annotations

import math
from numbers import Real
from types import SimpleNamespace

import networkx as nx
import numpy as np

from _graphjobs_nx import GPU_MIN_EDGES, MIN_EDGES
from graphs import CSRGraph, _device, from_networkx, to_networkx
from graphs.errors import DeviceError, GraphFormatError, MissingDependencyError, OptionError
from operators import ConvergenceError, PageRankOptions, SimRankOptions
from operators import pagerank as _pagerank
from operators import simrank as _simrank
from operators.simrank import MAX_SAMPLES, plan

NAME = "graphjobs"
SIMRANK_MAX_WALKS = 1e8  # walk pairs one simrank_similarity call may need by the guarantee (seconds on a CPU)


class BackendGraph:
    """A NetworkX graph as graphjobs holds it: the CSRGraph (on the host), the nodes in NetworkX's
    order and the edge attribute read as weights (None: unweighted); ``on(device)`` is the CSRGraph
    on ``device``, its GPU copy made once and kept here."""

    __networkx_backend__ = NAME
    __slots__ = ("_gpu", "csr", "directed", "multigraph", "nodes", "weight")

    def __init__(self, csr: CSRGraph, nodes: list, *, directed: bool, multigraph: bool, weight: str | None):
        self.csr = csr
        self.nodes = nodes
        self.directed = directed
        self.multigraph = multigraph
        self.weight = weight
        self._gpu = None

    def on(self, device: str) -> CSRGraph:
        """The CSRGraph on ``device`` ('cpu' or 'gpu'): the GPU copy is made on the first call and kept
        with this graph (so are the plans the operators derive from it)."""
        if device == "cpu":
            return self.csr
        if self._gpu is None:
            self._gpu = self.csr.to("gpu")
        return self._gpu

    def is_directed(self) -> bool:
        return self.directed

    def is_multigraph(self) -> bool:
        return self.multigraph

    def __len__(self) -> int:
        return len(self.nodes)


def convert_from_nx(G, edge_attrs=None, node_attrs=None, preserve_edge_attrs=False, **kwargs) -> BackendGraph:
    """The graphjobs graph of a NetworkX graph: undirected edges both ways, parallel edges kept (their
    weights add up, as in NetworkX's adjacency matrix), weights from the one edge attribute asked for
    (missing on an edge: 1). Graphs whose weights graphjobs refuses (negative, non-finite, not numbers)
    raise NotImplementedError, so that NetworkX runs its own code."""
    if isinstance(edge_attrs, dict) and edge_attrs:
        weight = next(iter(edge_attrs))
    elif preserve_edge_attrs:
        weight = "weight"
    else:
        weight = None
    try:
        csr = from_networkx(G, weight=weight)
    except GraphFormatError as exc:
        raise NotImplementedError(f"graphjobs cannot hold this graph: {exc}") from exc
    return BackendGraph(csr, list(G), directed=G.is_directed(), multigraph=G.is_multigraph(), weight=weight)


def convert_to_nx(obj, *, name: str | None = None):
    """A NetworkX graph of a BackendGraph (its edges and weights, no other attributes); results as
    they are."""
    if isinstance(obj, BackendGraph):
        return to_networkx(obj.csr, weight=obj.weight or "weight")
    return obj


def pagerank(
    G,
    alpha=0.85,
    personalization=None,
    max_iter=100,
    tol=1e-06,
    nstart=None,
    weight="weight",
    dangling=None,
):
    """``networkx.pagerank`` by ``graphjobs.pagerank`` (the same iteration and stopping rule)."""
    n = len(G.nodes)
    if n == 0:
        return {}
    if max_iter < 1:  # NetworkX iterates range(max_iter) times, then raises
        raise nx.PowerIterationFailedConvergence(max_iter)
    p = _vector(G.nodes, personalization)
    if p is not None and p.sum() == 0:
        raise ZeroDivisionError
    device = compute_device(G)
    try:
        x = _pagerank(
            G.on(device),
            alpha=alpha,
            personalization=p,
            max_iter=max_iter,
            tol=tol,
            nstart=_vector(G.nodes, nstart),
            dangling=_vector(G.nodes, dangling),
            weighted=None if weight is not None else False,
            dtype=np.float64,  # on the GPU too: float64 values, and NetworkX's stopping rule on their change
            method="pull",  # what 'auto' takes in float64 on the GPU, and the CPU's method
        )
    except ConvergenceError:
        raise nx.PowerIterationFailedConvergence(max_iter) from None
    return dict(zip(G.nodes, _device.to_host(x).tolist(), strict=True))


def simrank_similarity(
    G,
    source=None,
    target=None,
    importance_factor=0.9,
    max_iterations=1000,
    tolerance=1e-4,
):
    """``networkx.simrank_similarity`` by ``graphjobs.simrank`` at the epsilon that ``_simrank_epsilon``
    derives from ``tolerance`` (only called where ``can_run`` is True)."""
    if source is not None and source not in G.nodes:
        raise nx.NodeNotFound(f"Source node {source} not in G")
    if target is not None and target not in G.nodes:
        raise nx.NodeNotFound(f"Target node {target} not in G")
    epsilon = _simrank_epsilon(importance_factor, tolerance)
    csr = G.on(compute_device(G))

    def row(u) -> np.ndarray:
        return _device.to_host(_simrank(csr, u, c=importance_factor, epsilon=epsilon, samples="bound"))

    if source is not None:
        s = row(source)
        if target is not None:
            return float(s[G.nodes.index(target)])
        return dict(zip(G.nodes, s.tolist(), strict=True))
    return {u: dict(zip(G.nodes, row(u).tolist(), strict=True)) for u in G.nodes}


def compute_device(G: BackendGraph) -> str:
    """'cpu' or 'gpu': where ``nx.config.backends.graphjobs.device`` puts a call on ``G``.

    'auto' takes the GPU when ``graphs.gpu_available()`` and ``G`` has ``gpu_min_edges`` edges or more.
    'gpu' without a usable GPU raises ``MissingDependencyError`` (no CuPy) or ``DeviceError`` (CuPy
    sees no CUDA device), naming the setting.
    """
    config = nx.config.backends[NAME]
    device = config.get("device", "auto")
    if device == "cpu":
        return "cpu"
    if device == "gpu":
        try:
            return _device.resolve_device("gpu")
        except (MissingDependencyError, DeviceError) as exc:
            raise type(exc)(f"nx.config.backends.graphjobs.device is 'gpu', but {exc}") from None
    minimum = config.get("gpu_min_edges", GPU_MIN_EDGES)
    return "gpu" if G.csr.m >= minimum and _device.gpu_available() else "cpu"


def can_run(name: str, args, kwargs):
    """True where graphjobs gives NetworkX's result within NetworkX's tolerance, else the reason."""
    check = _CAN_RUN.get(name)
    if check is None:
        return f"graphjobs does not implement {name}"
    return check(*args, **kwargs)


def should_run(name: str, args, kwargs):
    """True from ``nx.config.backends.graphjobs.min_edges`` edges on: NetworkX is as fast below."""
    G = args[0] if args else kwargs.get("G")
    minimum = nx.config.backends[NAME].get("min_edges", MIN_EDGES)
    m = G.csr.m if isinstance(G, BackendGraph) else G.number_of_edges()
    if m < minimum:
        return f"{m} edges: below min_edges={minimum}, NetworkX is as fast"
    return True


def _can_pagerank(
    G, alpha=0.85, personalization=None, max_iter=100, tol=1e-06, nstart=None, weight="weight", dangling=None
):
    try:
        PageRankOptions(alpha=alpha, tol=tol)
    except (OptionError, TypeError) as exc:
        return f"graphjobs refuses these options: {exc}"
    for name, values in (("personalization", personalization), ("nstart", nstart), ("dangling", dangling)):
        if values is None:
            continue
        if not isinstance(values, dict):
            return f"{name} is not a dict"
        v = np.asarray(list(values.values()), dtype=float) if values else np.zeros(0)
        if not (np.isfinite(v).all() and (v >= 0).all()):
            return f"{name} has negative or non-finite values"
        if name != "personalization" and v.sum() <= 0:  # NetworkX divides by 0 and does not converge
            return f"{name} sums to 0"
    return True


def _simrank_epsilon(c: float, tolerance: float) -> float:
    """The epsilon at which graphjobs' SimRank lies within ``tolerance`` of NetworkX's iterate.

    NetworkX stops when no entry changes by more than ``tolerance + 1e-5 |s|``; its map contracts by
    ``c`` in the max norm, so its iterate lies within ``(tolerance + 1e-5) c / (1 - c)`` of SimRank.
    What is left of ``tolerance`` is graphjobs' share (0 or less: no epsilon will do).
    """
    return tolerance - (tolerance + 1e-5) * c / (1 - c)


def _can_simrank(G, source=None, target=None, importance_factor=0.9, max_iterations=1000, tolerance=1e-4):
    c = importance_factor
    if not (isinstance(c, Real) and 0 < c < 1 and isinstance(tolerance, Real) and tolerance > 0):
        return "graphjobs' SimRank needs importance_factor in (0, 1) and tolerance > 0"
    epsilon = _simrank_epsilon(c, tolerance)
    if not 0 < epsilon < 1:
        return (
            f"at importance_factor={c}, NetworkX's iterate may lie {c / (1 - c):.3g} * tolerance from "
            "SimRank: graphjobs' estimate cannot be held within tolerance of it"
        )
    # NetworkX raises ExceededMaxIterations when its last allowed iteration is reached: it may, so it decides
    if max_iterations <= math.ceil(math.log(tolerance) / math.log(c)) + 1:
        return "NetworkX may run out of iterations: it decides"
    if G.is_multigraph():
        return "NetworkX counts parallel edges; graphjobs' SimRank counts in-neighbours once"
    if isinstance(G, nx.Graph) and any("weight" in d for *_, d in G.edges(data=True)):
        return "NetworkX's SimRank follows the 'weight' attribute; graphjobs' ignores weights"
    n = len(G)
    if n == 0:
        return "empty graph"
    sources = 1 if source is not None else n
    walks = sources * plan.total_samples("bound", n=n, c=c, epsilon=epsilon, pi_norm=1.0, clip=True)
    if walks > min(SIMRANK_MAX_WALKS, MAX_SAMPLES):
        return f"the guarantee at epsilon={epsilon:.2g} needs up to {walks:.2g} walk pairs"
    try:
        SimRankOptions(c=c, epsilon=epsilon)
    except OptionError as exc:
        return str(exc)
    return True


_CAN_RUN = {"pagerank": _can_pagerank, "simrank_similarity": _can_simrank}


def _vector(nodes: list, values: dict | None):
    """``values`` over ``nodes`` (missing: 0), as NetworkX reads personalization, nstart and dangling."""
    if values is None:
        return None
    return np.fromiter((values.get(v, 0) for v in nodes), dtype=np.float64, count=len(nodes))


backend = SimpleNamespace(
    __doc__="The NetworkX backend interface of graphjobs (entry point ``networkx.backends``).",
    convert_from_nx=convert_from_nx,
    convert_to_nx=convert_to_nx,
    can_run=can_run,
    should_run=should_run,
    pagerank=pagerank,
    simrank_similarity=simrank_similarity,
)
