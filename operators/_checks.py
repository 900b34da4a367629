"""Validation shared by every operator: graphs, scalars, per-vertex vectors."""

from __future__ import annotations

import math
import warnings
from numbers import Integral, Real

import numpy as np

from graphs import CSRGraph, as_graph
from graphs._device import array_module, to_host
from graphs.errors import OptionError


def check_graph(G) -> CSRGraph:
    """The operators' one entry check: ``G`` as a CSRGraph (``graphs.as_graph``: a NetworkX graph, a
    SciPy sparse adjacency matrix or a pandas edge DataFrame converted with its labels; anything else
    a TypeError listing the accepted types)."""
    return as_graph(G)


def warn_if_weighted(G: CSRGraph, what: str) -> None:
    """PPR here follows out-edges uniformly (the issues' definition): say so when a graph has weights,
    which ``pagerank(G, personalization={s: 1})`` (NetworkX's meaning, the same PPR otherwise) follows."""
    if G.weighted:
        warnings.warn(
            f"{what} follows out-edges uniformly and ignores this graph's edge weights; for PPR that "
            "follows them, operators.pagerank(G, alpha=..., personalization={s: 1}) gives it exactly",
            UserWarning,
            stacklevel=3,
        )


def check_probability(name: str, value, *, closed_left: bool = True, closed_right: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    ok = (0 <= value if closed_left else 0 < value) and (value <= 1 if closed_right else value < 1)  # not NaN
    if not ok:
        interval = f"{'[' if closed_left else '('}0, 1{']' if closed_right else ')'}"
        raise OptionError(f"{name} must be in {interval}, got {value}")
    return float(value)


def check_positive(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not 0 < value < math.inf:
        raise OptionError(f"{name} must be a positive number, got {value!r}")
    return float(value)


def check_count(name: str, value, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or value < minimum:
        raise OptionError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_choice(name: str, value, choices) -> str:
    if value not in choices:
        raise OptionError(f"{name} must be one of {tuple(choices)}, got {value!r}")
    return value


def vertex_vector(G: CSRGraph, values, name: str, *, normalize: bool = True):
    """A float64 host vector over internal ids from a dict keyed by label or an array of length n.

    Returns None for None. Values must be finite and non-negative; with ``normalize`` they are
    divided by their sum, which must be positive.
    """
    if values is None:
        return None
    if isinstance(values, dict):
        vec = np.zeros(G.n, dtype=np.float64)
        if values:
            ids = G.internal_ids(np.array(list(values.keys()), dtype=object if G.has_labels else None))
            np.add.at(vec, ids, np.asarray(list(values.values()), dtype=np.float64))
    else:
        vec = np.asarray(to_host(values), dtype=np.float64)
        if vec.shape != (G.n,):
            raise OptionError(
                f"{name} must be a dict keyed by vertex or an array of length {G.n}, got shape {vec.shape}"
            )
    if not np.isfinite(vec).all() or (vec < 0).any():
        raise OptionError(f"{name} values must be finite and non-negative")
    if normalize:
        total = vec.sum()
        if total <= 0:
            raise OptionError(f"{name} must have a positive sum")
        vec = vec / total
    return vec


def same_module(*arrays):
    """The array module shared by all non-None arrays (they must agree)."""
    mods = {array_module(a) for a in arrays if a is not None}
    if len(mods) > 1:
        raise ValueError("arrays live on different devices; move them with .to(device) first")
    return mods.pop() if mods else np
