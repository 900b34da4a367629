"""Operators: pure functions over graphs and flat arrays, dispatched to the GPU (CuPy) or CPU (Numba)."""

from ._ppr_index_io import load_ppr_index
from .errors import ConvergenceError, InsufficientMemoryError
from .influence import InfluenceResult, influence_maximization
from .pagerank import pagerank
from .ppr import ppr
from .ppr_index import PPRIndex, build_ppr_index
from .simrank import SimRankTopk, simrank, simrank_topk
from .spread import influence_spread
from .topk_ppr import TopkPPR, topk_ppr

__all__ = [
    "ConvergenceError",
    "InfluenceResult",
    "InsufficientMemoryError",
    "PPRIndex",
    "SimRankTopk",
    "TopkPPR",
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
