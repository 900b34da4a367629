"""Saving and loading kPAR indexes: a directory of .npy arrays and meta.json, with or beside its graph."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

import graphs
from graphs import CSRGraph, GraphFormatError, reorder
from graphs._device import to_device, to_host
from graphs.errors import OptionError
from graphs.store import write_directory
from operators._checks import check_graph

GRAPH_DIR = "graph"
PERM = "perm"  # perm.npy: vertex i of the index's graph is vertex perm[i] of the graph it was built from
LENGTH_N = ("beta", "omega", "ret", "omega_i", "h_index")
LISTS = {"ip1": ("starts",), "ip2": ("freqs",), "hptr": ("h_end", "h_freq")}  # indptr -> its lists


def save_index(index, path, *, overwrite: bool, graph) -> None:
    """``PPRIndex.save``: the arrays, meta.json, and the graph in ``graph/`` or a pointer to it."""
    from operators.topk.index import ARRAYS, FORMAT, VERSION

    path = Path(path)
    if graph is True:
        where = GRAPH_DIR
    elif graph is False or graph is None:
        where = None
    else:  # the folder a CSRGraph.save of this very graph wrote: recorded relative to the index
        saved = Path(graph)
        meta = _read_meta(saved / "meta.json", f"{saved}: no saved graph here")
        if meta.get("token") not in (index.graph.token, index.source_token):
            want = (
                index.graph.token
                if index.source_token is None
                else f"{index.source_token} (or {index.graph.token})"
            )
            raise ValueError(f"{saved} holds graph {meta.get('token')}, not this index's {want}")
        where = os.path.relpath(saved.resolve(), path.resolve())
    p = index.params

    def fill(tmp: Path) -> list[str]:
        names = [*ARRAYS, *([] if index.perm is None else [PERM])]
        for name in names:
            a = index.perm if name == PERM else index.arrays[name]
            np.save(tmp / f"{name}.npy", to_host(a), allow_pickle=False)
        if where == GRAPH_DIR:
            index.graph.save(tmp / GRAPH_DIR)
        meta = dict(
            format=FORMAT,
            version=VERSION,
            graph_token=index.graph.token,
            source_token=index.source_token,  # the graph the index was renumbered from (perm.npy)
            graph=where,
            n=p.n,
            m=p.m,
            alpha=p.alpha,
            epsilon=p.epsilon,
            delta_min=p.delta_min,
            p_fail=p.p_fail,
            first_step=p.first_step,
            seed=index.seed,
            budget=index.budget,
            omega_i_ub=index.omega_i_ub,
            info=index.info,
        )
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
        return [*(f"{name}.npy" for name in names), "meta.json"]

    write_directory(path, fill, overwrite=overwrite)


def load_ppr_index(path, G: CSRGraph | None = None, *, device: str | None = None, mmap: bool = False):
    """Load a kPAR index saved by ``PPRIndex.save``.

    Parameters
    ----------
    path : str or PathLike
        The directory given to ``save`` (or a ``graphjobs index`` job's ``ppr-index-*`` folder).
    G : CSRGraph, optional
        The graph the index was built for. Omitted, the graph saved with the index (``save(graph=True)``,
        the default) or at the place it recorded (``save(graph=FOLDER)``) is loaded.
    device : {'cpu', 'gpu', 'auto'}, optional
        Where the index and its graph live; default: G's device, or the CPU when G is omitted.
    mmap : bool
        Memory-map the arrays (and a graph loaded from disk) instead of reading them; host only.

    Returns
    -------
    PPRIndex

    Raises
    ------
    FileNotFoundError
        If ``path`` holds no index, or the graph it records is gone.
    ValueError
        If the index has another format version, was built for a different graph than ``G``, or was
        saved without its graph and ``G`` is omitted.
    GraphFormatError
        If meta.json is not JSON, or an array is missing or of the wrong length.
    """
    from operators.topk.index import ARRAYS, FORMAT, VERSION, PPRIndex, PPRParams

    path = Path(path)
    meta_file = path / "meta.json"
    meta = _read_meta(meta_file, f"{path}: no PPR index here (missing meta.json)")
    if meta.get("format") != FORMAT or meta.get("version") not in range(1, VERSION + 1):
        raise GraphFormatError(
            meta_file,
            None,
            f"expected format {FORMAT} version 1 to {VERSION}, "
            f"found {meta.get('format')} version {meta.get('version')}",
        )
    if G is None:
        if meta.get("graph") is None:
            raise OptionError(f"{path}: the index was saved without its graph; pass load_ppr_index(path, G)")
        where = path / meta["graph"]
        if not (where / "meta.json").is_file():
            raise FileNotFoundError(f"{where}: the graph of the index at {path} is not there any more")
        G = graphs.load(where, device=device or "cpu", mmap=mmap)
    else:
        G = check_graph(G)
        G = G.to(device) if device is not None else G
    source = meta.get("source_token")
    perm = _load_perm(path, meta["n"], G.device, mmap) if source is not None else None
    if G.token == source and G.token != meta["graph_token"]:  # the graph it was renumbered from
        G = reorder(G, by=perm)
    if meta["graph_token"] != G.token:
        built = meta["graph_token"] if source is None else f"{source} (renumbered: {meta['graph_token']})"
        raise OptionError(
            f"{path}: the index was built for graph {built} (n={meta['n']}, m={meta['m']}), "
            f"not for this one ({G.token}, n={G.n}, m={G.m})"
        )
    arrays = {}
    for name in ARRAYS:
        file = path / f"{name}.npy"
        if not file.is_file():
            raise GraphFormatError(file, None, "expected this array of the index; it is missing")
        arrays[name] = np.load(file, mmap_mode="r" if mmap else None, allow_pickle=False)
    _check_lengths(path, arrays, G.n)
    arrays = {name: to_device(a, G.device) for name, a in arrays.items()}
    first_step = bool(meta.get("first_step", False))  # version 1 indexes hold the paper's walks
    params = PPRParams(*(meta[k] for k in ("n", "m", "alpha", "epsilon", "delta_min", "p_fail")), first_step)
    args = (meta["seed"], meta["budget"], arrays, meta["omega_i_ub"], meta["info"], perm, source)
    return PPRIndex(G, params, *args)


def _load_perm(path: Path, n: int, device: str, mmap: bool):
    file = path / f"{PERM}.npy"
    if not file.is_file():
        raise GraphFormatError(
            file, None, "expected the index's vertex order (meta.json names a source graph)"
        )
    perm = np.load(file, mmap_mode="r" if mmap else None, allow_pickle=False)
    if perm.shape != (n,):
        raise GraphFormatError(
            file, None, f"expected {n} entries, one per vertex, found {perm.size}: a damaged index"
        )
    return to_device(perm, device)


def _read_meta(file: Path, missing: str) -> dict:
    if not file.is_file():
        raise FileNotFoundError(missing)
    try:
        return json.loads(file.read_text())
    except json.JSONDecodeError as exc:
        raise GraphFormatError(file, exc.lineno, f"expected JSON metadata: {exc.msg}") from exc


def _check_lengths(path: Path, arrays: dict, n: int) -> None:
    """Every per-vertex array has n entries, every pointer array n + 1 ending at its lists' length."""

    def bad(name: str, expected: str, got: int) -> GraphFormatError:
        return GraphFormatError(
            path / f"{name}.npy", None, f"expected {expected}, found {got}: a damaged index"
        )

    for name in LENGTH_N:
        if arrays[name].shape != (n,):
            raise bad(name, f"{n} entries, one per vertex", arrays[name].size)
    for ptr, lists in LISTS.items():
        if arrays[ptr].shape != (n + 1,):
            raise bad(ptr, f"{n + 1} offsets", arrays[ptr].size)
        total = int(arrays[ptr][-1])
        for name in lists:
            if arrays[name].shape != (total,):
                raise bad(name, f"{total} entries ({ptr}.npy ends at {total})", arrays[name].size)
