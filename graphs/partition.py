"""Graphs split over workers: contiguous destination-vertex ranges of the transposed CSR.

Part ``r`` holds the in-edges of vertices ``bounds[r] <= v < bounds[r + 1]`` (local row pointers, global
source ids) and the out-degree of every vertex, which is all a pull iteration of PageRank needs: each
worker computes its range from the full rank vector, then the ranges are all-gathered. Bounds balance the
in-edge counts (a part can exceed ``m / parts`` by at most one vertex's in-degree).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from dask.base import tokenize

from ._device import array_module, resolve_device, to_device, to_host
from .csr import CSRGraph
from .errors import GraphFormatError, IntegrityError, OptionError
from .store import file_sha256, load_npy, meta_checksum, read_json, write_directory

FORMAT = "graphjobs-partitioned-csr"
VERSION = 1


@dataclass(frozen=True, eq=False)
class GraphPart:
    """In-edges of vertices ``lo <= v < hi``: ``indptr`` (``hi - lo + 1``, from 0), ``indices`` (global
    source ids), optional ``weights``; ``out_degree`` (and ``out_weight`` when weighted) of all vertices."""

    index: int
    n: int
    lo: int
    hi: int
    indptr: object
    indices: object
    weights: object
    out_degree: object
    out_weight: object
    token: str
    # what operators derive from the part (e.g. a layout), kept for later calls in this process only
    _derived: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def m(self) -> int:
        return int(self.indices.shape[0])

    def derived(self, key: str, factory):
        """``factory(self)``, computed once and kept with the part (not pickled with it)."""
        value = self._derived.get(key)
        if value is None:
            value = self._derived[key] = factory(self)
        return value

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_derived"}

    def __setstate__(self, state):
        for k, v in {**state, "_derived": {}}.items():
            object.__setattr__(self, k, v)

    @property
    def device(self) -> str:
        return "gpu" if array_module(self.indptr) is not np else "cpu"

    def to(self, device: str) -> GraphPart:
        device = resolve_device(device)
        if device == self.device:
            return self
        move = {k: to_device(getattr(self, k), device) for k in _ARRAYS}
        return GraphPart(self.index, self.n, self.lo, self.hi, token=self.token, **move)

    def __dask_tokenize__(self):
        return ("GraphPart", self.token, self.index)


_ARRAYS = ("indptr", "indices", "weights", "out_degree", "out_weight")


@dataclass(frozen=True, eq=False)
class PartitionedGraph:
    """A graph as ``len(parts)`` destination ranges (``graphs.partition``); labels stay on the host."""

    n: int
    m: int
    directed: bool
    weighted: bool
    bounds: np.ndarray
    parts: tuple[GraphPart, ...]
    ids: np.ndarray | None = None
    token: str = field(default="")
    path: str | None = None  # where it was loaded from: workers then read their own part there

    def label_graph(self) -> CSRGraph:
        """An edgeless CSRGraph with the same vertices and labels (for label lookups)."""
        return CSRGraph(
            np.zeros(self.n + 1, dtype=np.int64), np.empty(0, dtype=np.int32), ids=self.ids, validate=False
        )

    def __len__(self) -> int:
        return len(self.parts)

    def __dask_tokenize__(self):
        return ("PartitionedGraph", self.token)

    def edge_counts(self) -> np.ndarray:
        return np.array([p.m for p in self.parts], dtype=np.int64)

    def save(self, path, *, overwrite: bool = False) -> None:
        """Write a directory ``part-R/`` per part plus ``meta.json`` (checksums), atomically."""
        write_directory(path, lambda tmp: _fill(self, Path(tmp)), overwrite=overwrite)


def range_bounds(cost, parts: int) -> np.ndarray:
    """``parts + 1`` vertex bounds cutting the cumulative ``cost`` (length n + 1, from 0) into ranges of
    about equal cost; a cut steps back one vertex when that lands closer to its target."""
    cost = np.asarray(cost)
    n = cost.size - 1
    targets = np.arange(1, parts, dtype=np.float64) * (float(cost[-1]) / parts)
    cut = np.searchsorted(cost, targets, side="left")
    # a cut at vertex v leaves v's in-edges on the right; step back when that is closer to the target
    back = (cut > 0) & (np.abs(cost[np.maximum(cut - 1, 0)] - targets) <= np.abs(cost[cut] - targets))
    cut = np.where(back, cut - 1, cut)
    return np.maximum.accumulate(np.concatenate(([0], cut, [n]))).astype(np.int64)


def partition(G: CSRGraph, parts: int, *, vertex_cost: float = 0.0) -> PartitionedGraph:
    """Split ``G`` into ``parts`` contiguous destination ranges with balanced in-edge counts.

    Parameters
    ----------
    G : CSRGraph
        On any device; the parts stay on the host (each worker moves its own to its device).
    parts : int
        Number of ranges (one per worker), at least 1 and at most ``G.n``.
    vertex_cost : float
        Balance ``in-edges + vertex_cost * vertices`` instead of in-edges alone (a pull iteration also
        pays per vertex; on degree-ordered graphs the hub range has few vertices).

    Returns
    -------
    PartitionedGraph
        ``parts[r]`` holds the in-edges of vertices ``bounds[r] .. bounds[r+1]-1``.
    """
    if not isinstance(G, CSRGraph):
        raise TypeError(f"expected a CSRGraph, got {type(G).__name__}")
    if isinstance(parts, bool) or not isinstance(parts, int | np.integer) or not 1 <= parts <= max(G.n, 1):
        raise OptionError(f"parts must be an int in [1, n={G.n}], got {parts!r}")
    T = G.to("cpu").transpose()
    indptr = to_host(T.indptr)
    cost = indptr + float(vertex_cost) * np.arange(G.n + 1) if vertex_cost else indptr
    bounds = range_bounds(cost, parts)
    outd = to_host(G.out_degree()).astype(np.int64)
    outw = to_host(G.out_degree(weighted=True)).astype(np.float64) if G.weighted else None
    weights = to_host(T.weights) if G.weighted else None
    indices = to_host(T.indices)
    out = []
    for r in range(parts):
        lo, hi = int(bounds[r]), int(bounds[r + 1])
        a, b = int(indptr[lo]), int(indptr[hi])
        out.append(
            GraphPart(
                r,
                G.n,
                lo,
                hi,
                indptr[lo : hi + 1] - a,
                indices[a:b],
                None if weights is None else weights[a:b],
                outd,
                outw,
                tokenize(G.token, parts, r),
            )
        )
    ids = to_host(G.ids) if G.has_labels else None
    token = tokenize(G.token, parts)
    return PartitionedGraph(G.n, G.m, G.directed, G.weighted, bounds, tuple(out), ids, token)


def _fill(pg: PartitionedGraph, tmp: Path) -> list[str]:
    files = []
    for p in pg.parts:
        (tmp / f"part-{p.index}").mkdir()
        for name in ("indptr", "indices", "weights"):
            if getattr(p, name) is not None:
                files.append(f"part-{p.index}/{name}.npy")
                np.save(tmp / files[-1], to_host(getattr(p, name)), allow_pickle=False)
    np.save(tmp / "out_degree.npy", to_host(pg.parts[0].out_degree), allow_pickle=False)
    files.append("out_degree.npy")
    if pg.weighted:
        np.save(tmp / "out_weight.npy", to_host(pg.parts[0].out_weight), allow_pickle=False)
        files.append("out_weight.npy")
    if pg.ids is not None:
        from .store import _write_labels

        files.append(_write_labels(pg.ids, tmp))
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "n": pg.n,
        "m": pg.m,
        "directed": pg.directed,
        "weighted": pg.weighted,
        "bounds": pg.bounds.tolist(),
        "token": pg.token,
        "part_tokens": [p.token for p in pg.parts],
        "edges": pg.edge_counts().tolist(),
        "checksums": {f: file_sha256(tmp / f) for f in files},
    }
    meta["checksum"] = meta_checksum(meta)
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
    return [*files, "meta.json"]


def _meta(path: Path) -> dict:
    meta_path = path / "meta.json"
    if not meta_path.is_file():
        raise GraphFormatError(path, None, "expected a partitioned graph directory (meta.json); none found")
    meta = read_json(meta_path)
    found = meta if isinstance(meta, dict) else {}
    if found.get("format") != FORMAT or found.get("version") != VERSION:
        raise GraphFormatError(
            meta_path,
            None,
            f"expected {FORMAT} version {VERSION}, "
            f"got {found.get('format')!r} version {found.get('version')!r}",
        )
    # graphs saved before meta.json held its own checksum have none to check
    if "checksum" in meta and meta["checksum"] != meta_checksum(meta):
        raise IntegrityError(
            meta_path, None, "checksum mismatch: the graph's metadata was edited or is damaged"
        )
    return meta


def verify_partitioned(path) -> dict:
    """The metadata of the partitioned graph saved at ``path`` once it and every file it lists match their
    checksums; an ``IntegrityError`` names the first file that does not."""
    path = Path(path)
    meta = _meta(path)
    for rel, digest in meta["checksums"].items():
        if not (path / rel).is_file():
            raise IntegrityError(path / rel, None, "expected this file (listed in meta.json); it is missing")
        if file_sha256(path / rel) != digest:
            raise IntegrityError(path / rel, None, "checksum mismatch: the file changed or is damaged")
    return meta


def load_part(path, index: int, *, device: str = "cpu", verify: bool = False) -> GraphPart:
    """Part ``index`` of the partitioned graph saved at ``path``, on ``device`` (what a worker loads)."""
    path = Path(path)
    meta = _meta(path)
    if not 0 <= index < len(meta["part_tokens"]):
        raise IndexError(f"{path} has {len(meta['part_tokens'])} parts; no part {index}")
    arrays = {}
    for name in _ARRAYS:
        rel = f"part-{index}/{name}.npy" if name in ("indptr", "indices", "weights") else f"{name}.npy"
        if rel not in meta["checksums"]:
            arrays[name] = None
            continue
        if verify and file_sha256(path / rel) != meta["checksums"][rel]:
            raise IntegrityError(path / rel, None, "checksum mismatch: the file changed or is damaged")
        arrays[name] = load_npy(path / rel, mmap=True)
    lo, hi = meta["bounds"][index], meta["bounds"][index + 1]
    part = GraphPart(index, meta["n"], lo, hi, token=meta["part_tokens"][index], **arrays)
    if part.indptr.shape[0] != hi - lo + 1 or int(part.indptr[-1]) != part.m:
        raise GraphFormatError(path / f"part-{index}", None, f"expected {hi - lo} rows and consistent indptr")
    return part.to(device)


def load_partitioned(path, *, verify: bool = True) -> PartitionedGraph:
    """The partitioned graph saved by ``PartitionedGraph.save`` (host arrays, memory-mapped)."""
    path = Path(path)
    meta = _meta(path)
    parts = tuple(load_part(path, r, verify=verify) for r in range(len(meta["part_tokens"])))
    ids = None
    if "ids.npy" in meta["checksums"]:
        ids = load_npy(path / "ids.npy")
    elif "ids.arrow" in meta["checksums"]:
        import pyarrow.feather as feather

        ids = np.asarray(feather.read_table(path / "ids.arrow").column("ids").to_pylist(), dtype=object)
    return PartitionedGraph(
        meta["n"],
        meta["m"],
        meta["directed"],
        meta["weighted"],
        np.asarray(meta["bounds"], dtype=np.int64),
        parts,
        ids,
        meta["token"],
        str(path.resolve()),
    )
