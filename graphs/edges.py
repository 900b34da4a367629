"""From edge arrays to a CSRGraph: label renumbering, symmetrizing, filtering, checking."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._build import build_csr, index_dtype
from ._device import array_module, is_gpu_array, to_host
from ._large import check_unique_size, compress, cumsum
from .csr import CSRGraph
from .errors import GraphFormatError, OptionError


def from_edges(
    src,
    dst,
    weights=None,
    *,
    n: int | None = None,
    directed: bool = True,
    renumber: bool = True,
    dedupe: bool = False,
    self_loops: bool = True,
) -> CSRGraph:
    """Build a graph from parallel arrays of edge endpoints.

    Parameters
    ----------
    src, dst : array_like
        Edge endpoints, NumPy or CuPy (a CuPy input builds the graph on the GPU). With
        ``renumber=True`` they may hold any integer or string labels; otherwise integers in
        ``[0, n)``.
    weights : array_like, optional
        One finite, non-negative weight per edge, stored as float32.
    n : int, optional
        Number of vertices when ``renumber=False`` (default ``max(id) + 1``); vertices without
        edges are kept.
    directed : bool
        If False, every edge is stored in both directions (a self-loop once).
    renumber : bool
        Map the labels to ``0..n-1`` (sorted order for integers, first appearance for strings)
        and keep them in ``CSRGraph.ids``.
    dedupe, self_loops : bool
        Drop repeated edges (keeping the first weight) / drop edges ``u -> u``.

    Returns
    -------
    CSRGraph

    Raises
    ------
    GraphFormatError
        For negative, NaN or infinite weights, ids outside ``[0, n)``, or mismatched lengths.

    Examples
    --------
    >>> import graphjobs as gj
    >>> G = gj.from_edges(["x", "y", "y"], ["y", "z", "x"])
    >>> G.n, G.m, list(G.ids)
    (3, 3, ['x', 'y', 'z'])
    """
    gpu = is_gpu_array(src) or is_gpu_array(dst)
    if gpu:
        xp = array_module(src if is_gpu_array(src) else dst)
        src, dst = xp.asarray(src), xp.asarray(dst)
        weights = None if weights is None else xp.asarray(weights)
    else:
        xp = np
        src, dst = _host_array(src), _host_array(dst)
        weights = None if weights is None else np.asarray(weights)
    if src.ndim != 1 or src.shape != dst.shape:
        raise GraphFormatError(
            None, None, f"src and dst must be 1-D of equal length, got {src.shape} and {dst.shape}"
        )
    if weights is not None:
        weights = check_weights(weights, None)
        if weights.shape != src.shape:
            raise GraphFormatError(
                None, None, f"weights must have one value per edge ({src.size}), got {weights.size}"
            )
    ids = None
    if renumber:
        if n is not None:
            raise OptionError("n applies only with renumber=False (renumbering counts the labels)")
        src, dst, ids = renumber_labels(xp, src, dst)
        n = len(ids)
    else:
        src, dst, n = _check_ids(xp, src, dst, n)
    return assemble(src, dst, weights, n, directed=directed, dedupe=dedupe, self_loops=self_loops, ids=ids)


def assemble(src, dst, weights, n, *, directed, dedupe, self_loops, ids=None) -> CSRGraph:
    """CSRGraph from internal ids (already checked): filter, symmetrize, sort, dedupe."""
    xp = array_module(src)
    if not self_loops or not directed:
        loop = src == dst
        if not self_loops:
            keep = ~loop
            src, dst = compress(src, keep), compress(dst, keep)
            weights = None if weights is None else compress(weights, keep)
            loop = None
    if not directed:

        def back(a):
            return a if loop is None else compress(a, ~loop)

        src, dst = xp.concatenate([src, back(dst)]), xp.concatenate([dst, back(src)])
        if weights is not None:
            weights = xp.concatenate([weights, back(weights)])
    indptr, indices, w = build_csr(src, dst, weights, n, dedupe=dedupe)
    return CSRGraph(indptr, indices, w, directed=directed, ids=ids, validate=False)


def check_weights(weights, path, *, line_of=None):
    """float32 weights, or GraphFormatError naming the first NaN/inf/negative entry."""
    i = first_bad_weight(weights)
    if i is not None:
        value = float(weights[i])
        what = f"a finite, non-negative edge weight, got {value!r}"
        if line_of is None:
            where = f"weights[{i}]" if path is None else f"row {i}"
            raise GraphFormatError(path, None, f"{where}: expected {what}")
        raise GraphFormatError(path, line_of(i), f"expected {what}")
    return weights.astype(np.float32, copy=False)


def first_bad_weight(weights) -> int | None:
    """The position of the first NaN, infinite or negative weight, or None: the rule of every input."""
    xp = array_module(weights)
    w = weights.astype(np.float64, copy=False)
    bad = ~xp.isfinite(w) | (w < 0)
    return int(xp.argmax(bad)) if bool(bad.any()) else None


def _host_array(a) -> np.ndarray:
    if hasattr(a, "to_numpy") and not isinstance(a, np.ndarray):  # pandas / pyarrow
        a = a.to_numpy(zero_copy_only=False) if "pyarrow" in type(a).__module__ else a.to_numpy()
    return np.asarray(a)


def _check_ids(xp, src, dst, n):
    if src.dtype.kind not in "iu" or dst.dtype.kind not in "iu":
        raise GraphFormatError(None, None, f"with renumber=False ids must be integers, got {src.dtype}")
    if src.size:
        lo = min(int(src.min()), int(dst.min()))
        hi = max(int(src.max()), int(dst.max()))
        if lo < 0:
            raise GraphFormatError(None, None, f"vertex ids must be >= 0 with renumber=False, got {lo}")
        if n is None:
            n = hi + 1
        elif hi >= n:
            raise GraphFormatError(None, None, f"vertex id {hi} is out of range for n={n}")
    elif n is None:
        n = 0
    t = index_dtype(int(n))
    return src.astype(t, copy=False), dst.astype(t, copy=False), int(n)


def renumber_labels(xp, src, dst) -> tuple[Any, Any, np.ndarray]:
    """Internal ids for arbitrary labels: ``(src_ids, dst_ids, labels)`` with labels on the host.

    Integer labels keep their sorted order (a dense lookup table when their range is compact,
    otherwise a sort); other labels are numbered by first appearance.
    """
    m = src.size
    if src.dtype.kind in "iu" and dst.dtype.kind in "iu":
        if m == 0:
            return src.astype(np.int32), dst.astype(np.int32), np.empty(0, dtype=np.int64)
        lo = min(int(src.min()), int(dst.min()))
        hi = max(int(src.max()), int(dst.max()))
        span = hi - lo + 1
        if span <= max(1 << 20, 4 * 2 * m):
            present = xp.zeros(span, dtype=np.bool_)
            s, d = src.astype(np.int64) - lo, dst.astype(np.int64) - lo
            present[s] = True
            present[d] = True
            labels = xp.flatnonzero(present) + lo
            t = index_dtype(int(labels.size))
            new_of = cumsum(present, dtype=t) - 1
            return new_of[s], new_of[d], to_host(labels).astype(np.int64)
        check_unique_size(xp, 2 * m)
        labels, inv = xp.unique(xp.concatenate([src, dst]).astype(np.int64), return_inverse=True)
        t = index_dtype(int(labels.size))
        inv = inv.astype(t).reshape(-1)
        return inv[:m], inv[m:], to_host(labels)
    if xp is not np:
        raise GraphFormatError(None, None, "non-integer labels are supported on the host only")
    import pandas as pd

    codes, uniques = pd.factorize(np.concatenate([src.astype(object), dst.astype(object)]))
    t = index_dtype(len(uniques))
    codes = codes.astype(t)
    return codes[:m], codes[m:], np.asarray(uniques, dtype=object)
