"""CSRGraph: the immutable compressed-sparse-row graph every operator consumes."""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from typing import Any

import numpy as np

from . import _build
from ._device import array_module, device_of, is_gpu_array, resolve_device, to_device, to_host
from ._labels import find_labels, whole_label
from ._mix import fingerprint
from .errors import LabelError

# derived values (the transpose, operators' plans and copies) are made under one lock, so that threads
# asking for the same one at once (a job's chunks) make it once rather than each holding a copy
_DERIVING = threading.RLock()


class CSRGraph:
    """A directed (or symmetrically stored undirected) graph in CSR form, on the CPU or a GPU.

    Row ``u`` of ``indptr``/``indices`` lists the out-neighbours of internal vertex ``u``, sorted;
    ``weights`` (float32) runs parallel to ``indices``. ``ids[u]`` is the original label of ``u``.
    Undirected graphs store every edge in both directions (a self-loop once).

    Instances are immutable: arrays are read-only views (CuPy arrays cannot be locked, so do not
    write into them), derived structures such as ``transpose()`` are cached, and
    ``__dask_tokenize__`` returns a content hash computed once, so Dask never pickles a graph to
    name a task. Build graphs with ``graphs.from_edges``, ``graphs.read_edgelist``, the generators
    or ``graphs.load`` rather than by hand; the constructor checks its arrays (``validate=True``).
    """

    __slots__ = ("__weakref__", "_cache", "_directed", "_ids", "_indices", "_indptr", "_token", "_weights")

    def __init__(self, indptr, indices, weights=None, *, directed: bool = True, ids=None, validate=True):
        xp = array_module(indptr)
        indptr = xp.asarray(indptr)
        indices = xp.asarray(indices)
        if validate:
            _validate(xp, indptr, indices, weights, ids)
        if weights is not None:
            weights = xp.asarray(weights, dtype=np.float32)
        if ids is not None:
            ids = to_host(ids)
        for a in (indptr, indices, weights, ids):
            if isinstance(a, np.ndarray):
                a.flags.writeable = False
        set_ = object.__setattr__
        set_(self, "_indptr", indptr)
        set_(self, "_indices", indices)
        set_(self, "_weights", weights)
        set_(self, "_directed", bool(directed))
        set_(self, "_ids", ids)
        set_(self, "_token", None)
        set_(self, "_cache", {})

    def __setattr__(self, name, value):
        raise AttributeError(f"CSRGraph is immutable (cannot set {name!r})")

    def __reduce__(self):
        state = (self._indptr, self._indices, self._weights, self._directed, self._ids, self._token)
        return (_rebuild, state)

    # -- shape and arrays -------------------------------------------------------------------
    @property
    def n(self) -> int:
        return int(self._indptr.shape[0]) - 1

    @property
    def m(self) -> int:
        """Stored (directed) edges; an undirected edge counts twice, a self-loop once."""
        return int(self._indices.shape[0])

    @property
    def indptr(self):
        return self._indptr

    @property
    def indices(self):
        return self._indices

    @property
    def weights(self):
        return self._weights

    @property
    def weighted(self) -> bool:
        return self._weights is not None

    @property
    def directed(self) -> bool:
        return self._directed

    @property
    def device(self) -> str:
        return device_of(self._indptr)

    @property
    def ids(self) -> np.ndarray:
        """Original label of every internal vertex (host array; 0..n-1 when never renumbered)."""
        if self._ids is None:
            ids = self._cache.get("ids")
            if ids is None:
                ids = np.arange(self.n, dtype=np.int64)
                ids.flags.writeable = False
                self._cache["ids"] = ids
            return ids
        return self._ids

    @property
    def has_labels(self) -> bool:
        return self._ids is not None

    def labels_of(self, internal):
        """Original labels of the internal ids ``internal`` (host); the ids themselves (int64) where the
        graph has no labels, without making its 0..n-1 ``ids``."""
        if self._ids is None:
            return np.asarray(internal, dtype=np.int64)
        return self._ids[internal]

    def internal_ids(self, labels) -> np.ndarray:
        """Internal ids (int64, host) of original ``labels``; KeyError naming those not in the graph."""
        labels = np.asarray(
            labels, dtype=object if self._ids is not None and self._ids.dtype == object else None
        )
        if self._ids is None:
            flat = labels.reshape(-1)
            if flat.size == 0:
                return np.empty(0, dtype=np.int64)
            bad = []  # 3.0 is vertex 3, as in NetworkX; 3.5, "3" or True are not
            if labels.dtype.kind == "f":  # vectorised: a Python loop over a million float sources is slow
                bad = flat[~(np.isfinite(flat) & (flat == np.trunc(flat)))][:5].tolist()
            elif labels.dtype.kind not in "iu":
                bad = [x for x in flat.tolist() if not whole_label(x)][:5]
            if bad:
                want = f"vertices must be integers 0..{self.n - 1}; got {labels.dtype} values, e.g. {bad}"
                raise LabelError(want, bad)
            try:  # a float beyond int64 casts outside 0..n-1 (quietly): reported as missing below
                with np.errstate(invalid="ignore"):
                    out = labels.astype(np.int64).reshape(-1)
            except OverflowError:  # a Python int beyond int64
                bad = [x for x in flat.tolist() if not -(2**63) <= int(x) < 2**63][:5]
                raise LabelError(f"{len(bad)} label(s) not in the graph, e.g. {bad}", bad) from None
            missing = (out < 0) | (out >= self.n)
        else:
            out = find_labels(self._ids, self.derived, labels.reshape(-1))
            missing = out < 0
        if missing.any():
            bad = labels.reshape(-1)[missing][:5].tolist()
            count = int(missing.sum())
            raise LabelError(f"{count} label(s) not in the graph, e.g. {bad}", bad, count)
        return out

    @property
    def nbytes(self) -> int:
        return sum(int(a.nbytes) for a in (self._indptr, self._indices, self._weights) if a is not None)

    def __repr__(self) -> str:
        kind = "directed" if self._directed else "undirected"
        w = ", weighted" if self.weighted else ""
        return f"CSRGraph(n={self.n:,}, m={self.m:,}, {kind}{w}, device={self.device!r})"

    # -- derived views ----------------------------------------------------------------------
    def to(self, device: str) -> CSRGraph:
        """The same graph on ``device`` ('cpu', 'gpu' or 'auto'); ``self`` if already there."""
        device = resolve_device(device)
        if device == self.device:
            return self
        g = CSRGraph(
            to_device(self._indptr, device),
            to_device(self._indices, device),
            to_device(self._weights, device),
            directed=self._directed,
            ids=self._ids,
            validate=False,
        )
        object.__setattr__(g, "_token", self._token)
        return g

    def bare(self) -> CSRGraph:
        """The same arrays, ids and token with nothing derived: what an operator derives on it (a
        transpose, a plan) is freed with it rather than kept with this graph."""
        g = CSRGraph(
            self._indptr, self._indices, self._weights, directed=self._directed, ids=self._ids, validate=False
        )
        object.__setattr__(g, "_token", self._token)
        return g

    @contextlib.contextmanager
    def scratch(self):
        """``self`` where it keeps a transpose already, else a bare view whose derived values (a
        transpose, a plan: the graph's size again) are dropped on leaving, so that an operator run
        inside leaves nothing behind with ``self``."""
        if self.has_derived("transpose"):
            yield self
            return
        view = self.bare()
        try:
            yield view
        finally:
            view.forget_derived()  # the transpose refers back to it: a cycle, freed only by a collection

    def transpose(self) -> CSRGraph:
        """The graph with every edge reversed (in-neighbour lists as rows); computed once."""
        if not self._directed:
            return self
        t = self._cache.get("transpose")
        if t is not None:
            return t
        with _DERIVING:
            t = self._cache.get("transpose")
            if t is None:
                indptr, indices, weights = _build.transpose_csr(
                    self._indptr, self._indices, self._weights, self.n
                )
                t = CSRGraph(indptr, indices, weights, directed=True, ids=self._ids, validate=False)
                object.__setattr__(t, "_cache", {"transpose": self})
                self._cache["transpose"] = t
            return t

    def has_derived(self, key: str) -> bool:
        """Whether ``derived(key, ...)`` was computed already."""
        return self._cache.get(key) is not None

    def forget_derived(self, key: str | None = None) -> None:
        """Drop a derived value (e.g. a large copy of the graph) so that its memory can be freed; without
        ``key``, all of them: operators' plans, copies and GPU workspaces, and the cached transpose."""
        self._cache.clear() if key is None else self._cache.pop(key, None)

    def derived(self, key: str, factory):
        """``factory(self)``, computed once and kept with the graph (e.g. an operator's plan); threads that
        ask at once wait for the one that computes it."""
        value = self._cache.get(key)
        if value is not None:
            return value
        with _DERIVING:
            value = self._cache.get(key)
            if value is None:
                value = self._cache[key] = factory(self)
            return value

    def out_degree(self, *, weighted: bool = False):
        """Out-degree of every vertex (int64), or the sum of out-edge weights (float64)."""
        xp = array_module(self._indptr)
        if weighted and self.weighted:
            rows = _build.expand_rows(self._indptr, self.m)
            return _build.count_ids(rows, self.n, weights=self._weights)
        return xp.diff(self._indptr)

    def in_degree(self, *, weighted: bool = False):
        """In-degree of every vertex (int64), or the sum of in-edge weights (float64)."""
        w = self._weights if (weighted and self.weighted) else None
        return _build.count_ids(self._indices, self.n, weights=w)

    def edges(self):
        """COO arrays ``(src, dst, weights)`` on the graph's device (weights may be None)."""
        return _build.expand_rows(self._indptr, self.m), self._indices, self._weights

    def to_scipy(self):
        """``scipy.sparse.csr_array`` of the adjacency (weights, or ones), on the host."""
        import scipy.sparse as sp

        data = to_host(self._weights) if self.weighted else np.ones(self.m, dtype=np.float32)
        return sp.csr_array((data, to_host(self._indices), to_host(self._indptr)), shape=(self.n, self.n))

    # -- identity ---------------------------------------------------------------------------
    @property
    def token(self) -> str:
        """Content hash (hex): equal for equal arrays, labels and flags on any device."""
        if self._token is None:
            object.__setattr__(self, "_token", _content_token(self))
        return self._token

    def __dask_tokenize__(self) -> str:
        return self.token

    def save(self, path, *, overwrite: bool = False) -> None:
        """Write the graph to directory ``path`` (see ``graphs.load``), atomically."""
        from .store import save_graph

        save_graph(self, path, overwrite=overwrite)


def _rebuild(indptr, indices, weights, directed, ids, token) -> CSRGraph:
    g = CSRGraph(indptr, indices, weights, directed=directed, ids=ids, validate=False)
    object.__setattr__(g, "_token", token)
    return g


def _validate(xp, indptr, indices, weights, ids) -> None:
    if indptr.ndim != 1 or indptr.shape[0] < 1:
        raise ValueError("indptr must be a 1-D array of length n + 1 >= 1")
    if indptr.dtype != np.int64:
        raise TypeError(f"indptr must be int64, got {indptr.dtype}")
    n = indptr.shape[0] - 1
    if indices.ndim != 1 or indices.dtype != _build.index_dtype(n):
        raise TypeError(f"indices must be 1-D {_build.index_dtype(n)} for n={n}, got {indices.dtype}")
    if int(indptr[0]) != 0 or int(indptr[-1]) != indices.shape[0]:
        raise ValueError("indptr must start at 0 and end at len(indices)")
    if n and bool((indptr[1:] < indptr[:-1]).any()):
        raise ValueError("indptr must be non-decreasing")
    if indices.shape[0] and (int(indices.min()) < 0 or int(indices.max()) >= n):
        raise ValueError(f"indices must lie in [0, {n})")
    if weights is not None:
        if is_gpu_array(weights) != (xp is not np) or weights.shape != indices.shape:
            raise ValueError("weights must be on the same device and of the same length as indices")
        if not bool(xp.isfinite(weights).all()):
            raise ValueError("weights must be finite")
    if ids is not None and len(ids) != n:
        raise ValueError(f"ids must have one label per vertex ({n}), got {len(ids)}")


def _label_words(ids: np.ndarray) -> np.ndarray:
    if ids.dtype.kind in "iu" and ids.dtype.itemsize in (4, 8):
        return ids
    import pandas as pd

    return pd.util.hash_array(np.asarray(ids, dtype=object)).view(np.uint64)


def _content_token(g: CSRGraph) -> str:
    header: dict[str, Any] = {
        "n": g.n,
        "m": g.m,
        "directed": g.directed,
        "index": str(g.indices.dtype),
        "weighted": g.weighted,
        "labels": None if g._ids is None else str(g._ids.dtype),
    }
    parts = [fingerprint(g.indptr)]
    if g.m:
        parts.append(fingerprint(g.indices))
    if g.weighted and g.m:
        parts.append(fingerprint(g.weights))
    if g._ids is not None and g.n:
        parts.append(fingerprint(_label_words(g._ids)))
    header["fp"] = [f"{a:016x}{b:016x}" for a, b in parts]
    return hashlib.blake2b(json.dumps(header, sort_keys=True).encode(), digest_size=16).hexdigest()
