"""Per-process state of a worker: graphs loaded once from the workdir and reused by every task."""

from __future__ import annotations

import threading
from collections import OrderedDict

import graphs
from cluster.worker import on_teardown
from graphs.errors import IntegrityError

MAX_GRAPHS = 4
_GRAPHS: OrderedDict[tuple[str, str], graphs.CSRGraph] = OrderedDict()
_LOCK = threading.Lock()


def graph(path: str, token: str, device: str) -> graphs.CSRGraph:
    """The graph saved at ``path`` on ``device``: read from disk once per process (LRU of MAX_GRAPHS)."""
    key = (token, device)
    with _LOCK:
        g = _GRAPHS.get(key)
        if g is not None:
            _GRAPHS.move_to_end(key)
            return g
        g = graphs.load(path, device=device, verify=False)
        if g.token != token:
            graphs.load(path, verify=True)  # names the file that changed, if a checksum tells
            raise IntegrityError(
                path, None, f"expected graph {token}, found {g.token}: its files changed since it was saved"
            )
        _GRAPHS[key] = g
        while len(_GRAPHS) > MAX_GRAPHS:
            _GRAPHS.popitem(last=False)
        return g


_INDEXES: OrderedDict[tuple[str, str, str], object] = OrderedDict()


def ppr_index(path: str, g: graphs.CSRGraph, device: str | None = None):
    """The PPR index saved at ``path`` for graph ``g``, on ``device`` (default: ``g``'s), loaded once per
    process (LRU of MAX_GRAPHS). ``g`` on the host and ``device`` 'gpu' put only the index's graph on the
    GPU (its renumbered copy, where the index holds one), not ``g`` beside it."""
    from operators import load_ppr_index

    device = device or g.device
    key = (path, g.token, device)
    with _LOCK:
        idx = _INDEXES.get(key)
        if idx is None:
            idx = _INDEXES[key] = load_ppr_index(path, g, device=device)
            while len(_INDEXES) > MAX_GRAPHS:
                _INDEXES.popitem(last=False)
        _INDEXES.move_to_end(key)
        return idx


def loaded() -> list[tuple[str, str]]:
    with _LOCK:
        return list(_GRAPHS)


def clear() -> None:
    with _LOCK:
        _GRAPHS.clear()
        _INDEXES.clear()


on_teardown(clear)  # the worker plugin's teardown empties this process's caches
