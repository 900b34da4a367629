"""Operators: pure functions over graphs and flat arrays, dispatched to the GPU (CuPy) or CPU (Numba)."""

from .errors import ConvergenceError
from .pagerank import pagerank

__all__ = ["ConvergenceError", "pagerank"]
