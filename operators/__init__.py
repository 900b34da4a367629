"""Operators: pure functions over graphs and flat arrays, dispatched to the GPU (CuPy) or CPU (Numba)."""

from operators.errors import ConvergenceError, InsufficientMemoryError
from operators.influence import InfluenceResult, influence_maximization
from operators.influence.spread import influence_spread
from operators.options import (
    IMMOptions,
    IndexOptions,
    PageRankOptions,
    PPROptions,
    SimRankOptions,
    TopkOptions,
    TopkTuning,
)
from operators.pagerank import pagerank
from operators.ppr import ppr
from operators.simrank import SimRankTopk, simrank, simrank_topk
from operators.topk import TopkPPR, topk_ppr
from operators.topk.index import PPRIndex, build_ppr_index
from operators.topk.index_io import load_ppr_index

__all__ = [
    "ConvergenceError",
    "IMMOptions",
    "IndexOptions",
    "InfluenceResult",
    "InsufficientMemoryError",
    "PPRIndex",
    "PPROptions",
    "PageRankOptions",
    "SimRankOptions",
    "SimRankTopk",
    "TopkOptions",
    "TopkPPR",
    "TopkTuning",
    "build_ppr_index",
    "influence_maximization",
    "influence_spread",
    "load_ppr_index",
    "pagerank",
    "ppr",
    "simrank",
    "simrank_topk",
    "topk_ppr",
]
