"""Graphs to and from NetworkX, SciPy, cuDF and cuGraph; per-vertex results as DataFrames or dicts by label.

NetworkX and SciPy are plain imports inside the functions that need them; the RAPIDS packages (cuDF,
dask_cudf, cuGraph, pylibcugraph) are optional and their absence gives an ImportError that names the
package. Vertex labels survive every round trip.
"""

from __future__ import annotations

import itertools
import operator
import sys

import numpy as np

from ._device import device_of, to_device, to_host
from .csr import CSRGraph
from .edges import first_bad_weight, from_edges
from .errors import GraphFormatError, MissingDependencyError, OptionError


def _with_labels(g: CSRGraph, ids) -> CSRGraph:
    return CSRGraph(g.indptr, g.indices, g.weights, directed=g.directed, ids=ids, validate=False)


def _labels(nodes: list) -> np.ndarray:
    arr = np.asarray(nodes)
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        arr = np.empty(len(nodes), dtype=object)
        arr[:] = nodes
    return arr


def from_networkx(G, *, weight: str | None = "weight", device: str = "cpu") -> CSRGraph:
    """A CSRGraph of a NetworkX graph: its nodes in ``G.nodes`` order (isolated ones too) as labels.

    Parameters
    ----------
    G : networkx.Graph, DiGraph, MultiGraph or MultiDiGraph
        Undirected graphs are stored in both directions; parallel edges of multigraphs are kept.
    weight : str or None
        Edge attribute read as the weight (missing on an edge: 1.0), or None for an unweighted graph.
        A graph with no such attribute on any edge is unweighted.
    device : {'cpu', 'gpu'}

    Returns
    -------
    CSRGraph
    """
    nodes = list(G.nodes())
    n = len(nodes)
    labels = _labels(nodes)
    adj = G._adj if isinstance(getattr(G, "_adj", None), dict) else G.adj  # plain dicts read fastest
    rows = [adj[u] for u in nodes]  # each node's {neighbour: data} ({neighbour: {key: data}}: multigraphs)
    if G.is_multigraph():
        deg = np.fromiter((sum(map(len, r.values())) for r in rows), dtype=np.int64, count=n)
        nbrs = itertools.chain.from_iterable(
            itertools.repeat(v, len(keyed)) for r in rows for v, keyed in r.items()
        )

        def data():
            return itertools.chain.from_iterable(keyed.values() for r in rows for keyed in r.values())
    else:
        deg = np.fromiter(map(len, rows), dtype=np.int64, count=n)
        nbrs = itertools.chain.from_iterable(rows)

        def data():
            return itertools.chain.from_iterable(map(operator.methodcaller("values"), rows))

    m = int(deg.sum())
    dst = _positions(labels, nodes, nbrs, m)
    src = np.repeat(np.arange(n, dtype=np.int64), deg)
    w = None
    has = (
        weight is not None and any(data()) and any(map(operator.methodcaller("__contains__", weight), data()))
    )
    if has:  # (an unweighted graph's data are all empty: the first any() reads no keys)
        try:
            w = np.fromiter(map(operator.methodcaller("get", weight, 1.0), data()), dtype=np.float64, count=m)
        except (TypeError, ValueError):  # name the first edge whose weight is not a number
            i = next(i for i, d in enumerate(data()) if not _is_number(d.get(weight, 1.0)))
            raise _edge_error(_nth_edge(nodes, rows, G.is_multigraph(), i), weight, "a number") from None
        i = first_bad_weight(w)
        if i is not None:
            raise _edge_error(
                _nth_edge(nodes, rows, G.is_multigraph(), i), weight, "a finite, non-negative number"
            )
    if not G.is_directed():  # the adjacency holds each edge both ways (a self-loop once): keep one
        keep = src <= dst
        src, dst, w = src[keep], dst[keep], (None if w is None else w[keep])
    g = from_edges(src, dst, w, n=n, directed=G.is_directed(), renumber=False)
    return _with_labels(g, labels).to(device)


def _positions(labels: np.ndarray, nodes: list, nbrs, m: int) -> np.ndarray:
    """The positions in ``nodes`` of the ``m`` labels ``nbrs`` yields: read as integers where the labels
    are integers (0..n-1 in order: the labels are the positions), else looked up one by one."""
    if labels.dtype != object:
        got = np.fromiter(nbrs, dtype=labels.dtype, count=m)
        if np.array_equal(labels, np.arange(labels.size)):
            return got.astype(np.int64, copy=False)
        order = np.argsort(labels, kind="stable")
        return order[np.searchsorted(labels, got, sorter=order)].astype(np.int64, copy=False)
    index = {v: i for i, v in enumerate(nodes)}
    return np.fromiter(map(index.__getitem__, nbrs), dtype=np.int64, count=m)


def _nth_edge(nodes: list, rows: list, multigraph: bool, i: int) -> tuple:
    """The ``i``-th (u, v, data) of the adjacency, in the order ``from_networkx`` reads it."""

    def edges():
        for u, r in zip(nodes, rows, strict=True):
            for v, d in r.items():
                if multigraph:
                    yield from ((u, v, dd) for dd in d.values())
                else:
                    yield (u, v, d)

    return next(itertools.islice(edges(), i, None))


def _edge_error(edge, weight: str, expected: str) -> GraphFormatError:
    u, v, d = edge
    return GraphFormatError(
        None, None, f"edge ({u!r}, {v!r}): expected {expected} as its {weight!r}, got {d[weight]!r}"
    )


def _is_number(x) -> bool:
    try:
        float(x)
    except (TypeError, ValueError):
        return False
    return True


def to_networkx(G: CSRGraph, *, weight: str = "weight"):
    """The NetworkX graph of ``G`` with its labels: DiGraph or Graph, a multigraph when ``G`` has
    parallel edges; weights as the ``weight`` attribute."""
    import networkx as nx

    g = G.to("cpu")
    src, dst, w = g.edges()
    ids = g.ids
    parallel = bool(np.any((np.diff(dst) == 0) & (np.diff(src) == 0))) if g.m > 1 else False
    kind = {
        (True, False): nx.DiGraph,
        (False, False): nx.Graph,
        (True, True): nx.MultiDiGraph,
        (False, True): nx.MultiGraph,
    }[(g.directed, parallel)]
    out = kind()
    out.add_nodes_from(ids.tolist())
    if not g.directed:  # stored both ways: add each edge once (u <= v), self-loops once
        keep = src <= dst
        src, dst, w = src[keep], dst[keep], (None if w is None else w[keep])
    if w is None:
        out.add_edges_from(zip(ids[src].tolist(), ids[dst].tolist(), strict=True))
    else:
        triples = zip(ids[src].tolist(), ids[dst].tolist(), w.astype(float).tolist(), strict=True)
        out.add_weighted_edges_from(triples, weight=weight)
    return out


def from_scipy(A, *, directed: bool = True, weighted: bool | None = None, ids=None, device: str = "cpu"):
    """A CSRGraph of a square SciPy sparse (or dense) adjacency matrix: entry (u, v) != 0 is an edge.

    ``weighted`` keeps the entries as weights (default: when they are not all 1). With
    ``directed=False`` the matrix must be symmetric and is stored as it is. ``ids`` labels the rows.
    """
    import scipy.sparse as sp

    A = sp.csr_array(A)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"expected a square adjacency matrix, got shape {A.shape}")
    A = A.copy()
    A.sum_duplicates()
    A.eliminate_zeros()
    if not directed and (A != A.T).nnz:
        raise ValueError("directed=False needs a symmetric matrix (entry (u, v) equal to (v, u))")
    data = np.asarray(A.data, dtype=np.float64)
    i = first_bad_weight(data)
    if i is not None:  # the same rule as every other input: name the first bad entry
        row = int(np.searchsorted(A.indptr, i, side="right")) - 1
        what = f"a finite, non-negative edge weight, got {float(data[i])!r}"
        raise GraphFormatError(None, None, f"entry ({row}, {int(A.indices[i])}): expected {what}")
    weighted = bool(np.any(data != 1)) if weighted is None else weighted
    n = A.shape[0]
    if ids is not None and len(ids) != n:
        raise ValueError(f"ids must label the {n} rows, got {len(ids)}")
    g = CSRGraph(
        A.indptr.astype(np.int64),
        A.indices.astype(np.int32),
        data if weighted else None,
        directed=directed,
        ids=None if ids is None else _labels(list(ids)),
    )
    return g.to(device)


def from_pandas(
    df,
    *,
    source: str | None = None,
    target: str | None = None,
    weight: str | None = None,
    directed: bool = True,
) -> CSRGraph:
    """A CSRGraph of a pandas edge DataFrame: one row per edge, its labels kept.

    Parameters
    ----------
    df : pandas.DataFrame
        By default the columns ``source`` and ``target`` (or ``src`` and ``dst``), and ``weight`` when
        there is one.
    source, target, weight : str, optional
        The columns to read instead; ``weight`` is read only when named or present.
    directed : bool
        False stores every edge in both directions.

    Returns
    -------
    CSRGraph
        The vertices are the labels that occur in the two columns (integers in increasing order,
        other labels in order of first appearance), as ``from_edges`` numbers them.

    Examples
    --------
    >>> import pandas as pd
    >>> import graphjobs as gj
    >>> G = gj.from_pandas(pd.DataFrame({"source": ["a", "b"], "target": ["b", "c"]}))
    >>> G.n, list(G.ids)
    (3, ['a', 'b', 'c'])
    """
    columns = list(df.columns)
    if source is None and target is None:
        pair = next(((s, t) for s, t in PANDAS_COLUMNS if s in columns and t in columns), None)
        if pair is None:
            raise GraphFormatError(
                None,
                None,
                "an edge DataFrame with columns 'source' and 'target' (or 'src' and 'dst'), or "
                f"from_pandas(df, source=..., target=...); got columns {columns}",
            )
        source, target = pair
    missing = [c for c in (source, target, weight) if c is not None and c not in columns]
    if missing:
        raise GraphFormatError(None, None, f"columns {missing} in the edge DataFrame (it has {columns})")
    if weight is None and "weight" in columns:
        weight = "weight"
    w = None if weight is None else df[weight].to_numpy(dtype=np.float64)
    src, dst = (_column(df[c]) for c in (source, target))
    return from_edges(src, dst, w, directed=directed)


PANDAS_COLUMNS = (("source", "target"), ("src", "dst"))


def _column(series) -> np.ndarray:
    """A column's labels: integers as they are, anything else as Python objects."""
    values = series.to_numpy()
    return values if values.dtype.kind in "iu" else values.astype(object)


NX_CACHE_KEY = "graphjobs.csr"  # in G.__networkx_cache__, which NetworkX clears when G changes


def as_graph(G) -> CSRGraph:
    """The CSRGraph of a graph in any shape the operators accept, converted once with its labels.

    Accepted: a ``CSRGraph`` (returned as it is); a NetworkX graph (``from_networkx``, its
    ``weight`` attribute read as weights; kept in ``G.__networkx_cache__``, which NetworkX clears
    when the graph changes through its methods, so a second call does not convert again, unless
    ``nx.config.cache_converted_graphs`` is off); a SciPy sparse adjacency matrix, rows the sources
    (``from_scipy``, directed); a pandas edge DataFrame (``from_pandas``, directed). Matrices and
    DataFrames are converted on every call (they can change in place without notice): convert once
    with ``from_scipy`` or ``from_pandas`` to reuse the graph. Arrays over vertices (results,
    ``personalization``) follow the converted graph's order: ``G.nodes`` for NetworkX, the rows for
    SciPy; by label (dicts, ``as_frame=True``) they do not depend on it.

    Raises
    ------
    TypeError
        For anything else, listing the accepted types.
    """
    if isinstance(G, CSRGraph):
        return G
    nx, sp, pd = (sys.modules.get(m) for m in ("networkx", "scipy.sparse", "pandas"))
    if nx is not None and isinstance(G, nx.Graph):
        return _cached_networkx(G, nx)
    if sp is not None and sp.issparse(G):
        return from_scipy(G)
    if pd is not None and isinstance(G, pd.DataFrame):
        return from_pandas(G)
    raise TypeError(
        "expected a graph: a graphs.CSRGraph, a NetworkX graph, a SciPy sparse adjacency matrix (rows "
        "are sources) or a pandas edge DataFrame (columns source, target or src, dst; optional weight), "
        f"got {type(G).__module__}.{type(G).__qualname__}; edge arrays: graphs.from_edges(src, dst)"
    )


def _cached_networkx(G, nx) -> CSRGraph:
    cache = getattr(G, "__networkx_cache__", None)
    if cache is None or not nx.config.cache_converted_graphs:
        return from_networkx(G)
    g = cache.get(NX_CACHE_KEY)
    if g is None:
        g = cache[NX_CACHE_KEY] = from_networkx(G)
    return g


def from_cudf(
    df,
    *,
    source: str = "src",
    destination: str = "dst",
    weight: str | None = None,
    directed: bool = True,
    renumber: bool = True,
) -> CSRGraph:
    """A GPU CSRGraph from a cuDF edge DataFrame (needs cuDF); as ``from_edges`` on its columns."""
    _need("cudf", "graphs.from_cudf")
    missing = [c for c in (source, destination, weight) if c is not None and c not in df.columns]
    if missing:
        raise KeyError(f"columns {missing} not in the DataFrame (it has {list(df.columns)})")
    w = None if weight is None else df[weight].astype("float64").values
    src, dst = df[source], df[destination]
    if src.dtype.kind in "iu" and dst.dtype.kind in "iu":  # integer ids stay on the GPU
        return from_edges(src.values, dst.values, w, directed=directed, renumber=renumber)
    # string (or mixed) labels are renumbered on the host, as read_edgelist does; the graph goes back
    labels = (c.to_numpy().astype(object) for c in (src, dst))
    g = from_edges(*labels, None if w is None else to_host(w), directed=directed, renumber=renumber)
    return g.to("gpu")


def _need(module: str, what: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(f"{what} needs {module} (RAPIDS), which is not installed") from exc


def from_dask_cudf(
    ddf,
    *,
    source: str = "src",
    destination: str = "dst",
    weight: str | None = None,
    directed: bool = True,
    renumber: bool = True,
) -> CSRGraph:
    """A GPU CSRGraph from a dask_cudf edge DataFrame: its partitions are computed and joined on this GPU.

    For graphs that must not meet on one GPU, write the partitions to Parquet and use
    ``pipelines.ingest.partition_files`` (or ``pagerank_job`` on the folder) instead.
    """
    _need("dask_cudf", "graphs.from_dask_cudf")
    cols = [c for c in (source, destination, weight) if c is not None]
    return from_cudf(
        ddf[cols].compute(),
        source=source,
        destination=destination,
        weight=weight,
        directed=directed,
        renumber=renumber,
    )


def from_cugraph(Gc) -> CSRGraph:
    """A GPU CSRGraph of a ``cugraph.Graph`` (its edge list; weights when the graph has them)."""
    _need("cugraph", "graphs.from_cugraph")
    df = Gc.view_edge_list()
    weight = next((c for c in ("weight", "weights", "wgt") if c in df.columns), None)
    source, destination = (c for c in df.columns if c != weight)
    return from_cudf(df, source=source, destination=destination, weight=weight, directed=Gc.is_directed())


def to_cugraph(G: CSRGraph):
    """A ``cugraph.Graph`` with ``G``'s edges over internal ids (``G.ids`` keeps the labels)."""
    cudf = _need("cudf", "graphs.to_cugraph")
    cugraph = _need("cugraph", "graphs.to_cugraph")
    g = G.to("gpu")
    src, dst, w = g.edges()
    df = cudf.DataFrame({"src": src, "dst": dst} | ({} if w is None else {"weight": w}))
    out = cugraph.Graph(directed=g.directed)
    out.from_cudf_edgelist(
        df, source="src", destination="dst", edge_attr=None if w is None else "weight", renumber=False
    )
    return out


def to_pylibcugraph(G: CSRGraph, *, store_transposed: bool = False, renumber: bool = True, handle=None):
    """``(graph, handle)``: a ``pylibcugraph.SGGraph`` of ``G`` and the ``ResourceHandle`` to call
    pylibcugraph's algorithms with.

    The edges go in as int32 COO with every vertex listed (isolated ones too) and weights as float32
    when ``G`` has them. Vertex ids in pylibcugraph's results are ``G``'s internal ids (its own
    renumbering, on by default as cuGraph recommends, is undone in its outputs); ``G.ids[v]`` is the
    label. ``store_transposed=True`` suits pagerank-like algorithms.
    """
    plc = _need("pylibcugraph", "graphs.to_pylibcugraph")
    g = G.to("gpu")
    if g.n >= 2**31:
        raise ValueError(f"pylibcugraph's int32 ids hold fewer than 2**31 vertices, the graph has {g.n}")
    import cupy as cp

    src, dst, w = g.edges()
    src, dst = src.astype(cp.int32), dst.astype(cp.int32, copy=False)
    parallel = g.m > 1 and bool(cp.any((src[1:] == src[:-1]) & (dst[1:] == dst[:-1])))
    handle = plc.ResourceHandle() if handle is None else handle
    props = plc.GraphProperties(is_symmetric=not g.directed, is_multigraph=parallel)
    graph = plc.SGGraph(
        handle,
        props,
        src,
        dst,
        weight_array=None if w is None else w.astype(cp.float32),
        store_transposed=store_transposed,
        renumber=renumber,
        do_expensive_check=False,
        vertices_array=cp.arange(g.n, dtype=cp.int32),
    )
    return graph, handle


def vertex_frame(G: CSRGraph, values, name: str, *, library: str = "pandas"):
    """A DataFrame with columns ``vertex`` (original labels) and ``name`` (e.g. 'pagerank').

    ``library='cudf'`` gives a cuDF DataFrame on the GPU (needs cuDF); ``'auto'`` gives cuDF when
    ``values`` are on the GPU and cuDF is installed, else pandas.
    """
    if library not in ("pandas", "cudf", "auto"):
        raise OptionError(f"library must be 'pandas', 'cudf' or 'auto', got {library!r}")
    values = values if hasattr(values, "shape") else np.asarray(values)
    if values.shape != (G.n,):
        raise ValueError(f"expected one value per vertex ({G.n}), got shape {values.shape}")
    if library == "auto":
        from .read import has_cudf

        library = "cudf" if device_of(values) == "gpu" and has_cudf() else "pandas"
    if library == "cudf":
        cudf = _need("cudf", "vertex_frame(library='cudf')")
        return cudf.DataFrame({"vertex": G.ids, name: to_device(values, "gpu")})
    import pandas as pd

    return pd.DataFrame({"vertex": G.ids, name: to_host(values)})


def vertex_dict(G: CSRGraph, values) -> dict:
    """``{label: value}`` for every vertex, as NetworkX returns (e.g. ``networkx.pagerank``)."""
    values = to_host(values)
    if values.shape != (G.n,):
        raise ValueError(f"expected one value per vertex ({G.n}), got shape {values.shape}")
    return dict(zip(G.ids.tolist(), values.tolist(), strict=True))
