"""graphjobs: graph-analytics jobs as Dask task graphs on NVIDIA GPUs, with a NumPy/Numba path on the CPU.

One import name for everything a user calls. The four packages behind it keep their own names:
``graphs`` (the CSRGraph, readers, generators), ``operators`` (the algorithms on one device),
``pipelines`` (Dask jobs; ``pipelines.distributed`` for work spread over a cluster's workers) and
``cluster`` (making or joining a Dask cluster).

Examples
--------
>>> import graphjobs as gj
>>> G = gj.from_edges([0, 1, 2, 2], [1, 2, 0, 1])
>>> x = gj.pagerank(G, tol=1e-10)
>>> bool(abs(x.sum() - 1) < 1e-9)
True
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version

from graphs import (
    CSRGraph,
    GraphFormatError,
    IntegrityError,
    LabelError,
    barabasi_albert,
    erdos_renyi,
    from_edges,
    from_networkx,
    from_pandas,
    from_scipy,
    load,
    partition,
    read_edgelist,
    rmat,
    to_networkx,
)
from operators import (
    ConvergenceError,
    IMMOptions,
    IndexOptions,
    InfluenceResult,
    InsufficientMemoryError,
    PageRankOptions,
    PPRIndex,
    PPROptions,
    SimRankOptions,
    SimRankTopk,
    TopkOptions,
    TopkPPR,
    TopkTuning,
    build_ppr_index,
    influence_maximization,
    influence_spread,
    load_ppr_index,
    pagerank,
    ppr,
    simrank,
    simrank_topk,
    topk_ppr,
)

try:
    __version__ = version("graphjobs")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"

# Dask-side names, imported on first use: ``import graphjobs`` stays light
_LAZY = {
    "Job": "pipelines",
    "run": "pipelines",
    "pagerank_job": "pipelines",
    "ppr_job": "pipelines",
    "index_job": "pipelines",
    "topk_ppr_job": "pipelines",
    "influence_job": "pipelines",
    "simrank_job": "pipelines",
    "make_cluster": "cluster",
    "connect": "cluster",
    "distributed": "pipelines.distributed",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'graphjobs' has no attribute {name!r}")
    if name == "distributed":
        return importlib.import_module(module)
    return getattr(importlib.import_module(module), name)


def __dir__():
    return sorted([*globals(), *_LAZY])


__all__ = [
    "CSRGraph",
    "ConvergenceError",
    "GraphFormatError",
    "IMMOptions",
    "IndexOptions",
    "InfluenceResult",
    "InsufficientMemoryError",
    "IntegrityError",
    "LabelError",
    "PPRIndex",
    "PPROptions",
    "PageRankOptions",
    "SimRankOptions",
    "SimRankTopk",
    "TopkOptions",
    "TopkPPR",
    "TopkTuning",
    "__version__",
    "barabasi_albert",
    "build_ppr_index",
    "erdos_renyi",
    "from_edges",
    "from_networkx",
    "from_pandas",
    "from_scipy",
    "influence_maximization",
    "influence_spread",
    "load",
    "load_ppr_index",
    "pagerank",
    "partition",
    "ppr",
    "read_edgelist",
    "rmat",
    "simrank",
    "simrank_topk",
    "to_networkx",
    "topk_ppr",
    *_LAZY,
]
