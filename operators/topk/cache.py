"""What top-k queries keep with an index between calls: a cache with declared keys and counted bytes."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from graphs import CSRGraph

# every key a query may keep with an index, and what it holds
KEYS = {
    "workspaces": "per calling thread, its query workspace (CPUQuery or GPUQuery)",
    "stream_pool": "the GPU workspaces of interleaved streams (StreamPool), reused by later batches",
    "cpu_spares": "(lock, list) of CPU workspaces lent to the threads of one call at a time",
    "tie_order": "(perm, inv) on the host: ties ranked by the graph's own ids",
    "cpu_query_constants": "(max(d_out, 1), ones, scaled omega) shared by the CPU workspaces",
    "round_constants": "RoundConstants shared by the GPU workspaces (inverse omega, H lists, packed H)",
    "thresholds32_adaptive": "GPU push thresholds d_out(v) beta(v) as floats rounded down, for workspaces",
    "thresholds32_plain": "GPU push thresholds max(d_out(v), 1) as floats rounded down, for workspaces",
    "need_sizes": "{(BIG_LIST, BIG_CHUNK): (long lists, their chunks)}: the GPU refinement's buffer sizes",
    "warmed": "True once a call has compiled the query's functions and kernels (``topk_ppr``'s warm-up)",
}


class QueryCache:
    """Derived data kept with a ``PPRIndex`` for later queries: only the keys of ``KEYS``.

    It is not part of the index's value: it is not pickled, not compared, and a copy of the index made
    by ``to()`` starts empty. ``nbytes`` counts the device and host arrays it holds.
    """

    def __init__(self) -> None:
        self._items: dict[str, Any] = {}
        self._lock = threading.RLock()  # a value's make() may read other keys

    def __reduce__(self):
        return (QueryCache, ())

    def __repr__(self) -> str:
        return f"QueryCache(keys={sorted(self._items)}, nbytes={self.nbytes})"

    def get(self, key: str, default=None):
        _check(key)
        return self._items.get(key, default)

    def setdefault(self, key: str, make: Callable[[], Any]):
        """The value kept under ``key``, made by ``make()`` (once) when there is none."""
        _check(key)
        with self._lock:
            got = self._items.get(key)
            if got is None:
                got = self._items[key] = make()
            return got

    def clear(self) -> None:
        """Forget every kept value, closing the workspaces among them (``close()``: a ``GPUQuery``, the
        ``StreamPool`` of several streams' workspaces), so that their buffers, streams and CUDA graphs go
        now rather than whenever nothing else refers to them."""
        with self._lock:
            values = list(self._items.values())
            self._items.clear()
            for value in values:
                _close(value, 2)

    def __contains__(self, key: str) -> bool:
        return key in self._items

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays the kept values hold (through tuples, lists, dicts and objects' fields)."""
        seen: set[int] = set()
        return sum(_nbytes(v, seen, 3) for v in list(self._items.values()))


def _check(key: str) -> None:
    if key not in KEYS:
        raise KeyError(f"{key!r} is not a declared query cache key ({', '.join(KEYS)})")


def _close(value, depth: int) -> None:
    """``value.close()`` where it has one, else that of what it holds (through dicts, lists and tuples)."""
    close = getattr(value, "close", None)
    if callable(close):
        close()
    elif depth > 0 and isinstance(value, dict):
        for v in value.values():
            _close(v, depth - 1)
    elif depth > 0 and isinstance(value, (list, tuple)):
        for v in value:
            _close(v, depth - 1)


def _owned_elsewhere(value) -> bool:
    """The graph and the index a workspace points to: their memory is not the cache's."""
    return isinstance(value, (QueryCache, CSRGraph)) or isinstance(getattr(value, "cache", None), QueryCache)


def _nbytes(value, seen: set[int], depth: int) -> int:
    if value is None or id(value) in seen or depth < 0 or _owned_elsewhere(value):
        return 0
    seen.add(id(value))
    if hasattr(value, "dtype") and hasattr(value, "shape"):  # a NumPy or CuPy array
        return int(value.nbytes)
    if isinstance(value, dict):
        return sum(_nbytes(v, seen, depth - 1) for v in value.values())
    if isinstance(value, (tuple, list)):
        return sum(_nbytes(v, seen, depth - 1) for v in value)
    fields = getattr(value, "__dict__", None)
    if fields is None and hasattr(value, "__slots__"):
        fields = {s: getattr(value, s, None) for s in value.__slots__}
    return sum(_nbytes(v, seen, depth - 1) for v in (fields or {}).values())
