"""Saving and loading kPAR indexes: a directory of .npy arrays and meta.json, with or beside its graph.

meta.json records the SHA-256 of every array file and its own checksum (over its other fields), so a
load finds a flipped byte or an edited parameter instead of answering from them; indexes saved before
checksums (format versions 1 to 3) are refused with what to do (rebuild). The arrays' shapes and cheap
value ranges (offsets that start at 0 and never decrease, counts that are not negative, vertex ids below
n) are checked too, for loads that skip the checksums.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

import graphs
from graphs import CSRGraph, GraphFormatError, reorder
from graphs._device import to_device, to_host
from graphs.errors import IntegrityError, OptionError
from graphs.store import file_sha256, meta_checksum, read_json, write_directory
from operators._checks import check_graph

GRAPH_DIR = "graph"
PERM = "perm"  # perm.npy: vertex i of the index's graph is vertex perm[i] of the graph it was built from
LENGTH_N = ("beta", "omega", "ret", "omega_i", "h_index")
LISTS = {"ip1": ("starts",), "ip2": ("freqs",), "hptr": ("h_end", "h_freq")}  # indptr -> its lists
CHECKSUMS = 4  # the first version whose meta.json holds checksums: older indexes are refused (rebuild)
REBUILD = "rebuild the index (graphjobs index, or build_ppr_index(...).save)"


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
            checksums={f"{name}.npy": file_sha256(tmp / f"{name}.npy") for name in names},
        )
        meta["checksum"] = meta_checksum(meta)
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
        return [*(f"{name}.npy" for name in names), "meta.json"]

    write_directory(path, fill, overwrite=overwrite)


def load_ppr_index(
    path, G: CSRGraph | None = None, *, device: str | None = None, mmap: bool = False, verify: bool = True
):
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
    verify : bool
        Check every array file (and a graph loaded from disk) against the SHA-256 recorded at save time,
        and the arrays' value ranges: reads each file once. False skips both (for a very large index
        whose files are trusted); the metadata's own checksum and the arrays' shapes are always checked.

    Returns
    -------
    PPRIndex

    Raises
    ------
    FileNotFoundError
        If ``path`` holds no index, or the graph it records is gone.
    ValueError
        If the index has another format version (or an older one, 1 to 3, saved before checksums: rebuild
        it), was built for a different graph than ``G``, or was saved without its graph and ``G`` is
        omitted.
    IntegrityError
        If a file differs from its checksum, is missing, is not a NumPy array, or holds values an index
        cannot hold (a ``GraphFormatError``, like meta.json that is not JSON).
    """
    from operators.topk.index import ARRAYS, PPRIndex, PPRParams

    path = Path(path)
    meta = verify_ppr_index(path, files=verify)
    if G is None:
        if meta.get("graph") is None:
            raise OptionError(f"{path}: the index was saved without its graph; pass load_ppr_index(path, G)")
        where = path / meta["graph"]
        if not (where / "meta.json").is_file():
            raise FileNotFoundError(f"{where}: the graph of the index at {path} is not there any more")
        G = graphs.load(where, device=device or "cpu", mmap=mmap, verify=verify)
    else:
        G = check_graph(G)
        G = G.to(device) if device is not None else G
    source = meta.get("source_token")
    perm = _load_perm(path, meta["n"], G.device, mmap, verify) if source is not None else None
    if G.token == source and G.token != meta["graph_token"]:  # the graph it was renumbered from
        G = reorder(G, by=perm)
    if meta["graph_token"] != G.token:
        built = meta["graph_token"] if source is None else f"{source} (renumbered: {meta['graph_token']})"
        raise OptionError(
            f"{path}: the index was built for graph {built} (n={meta['n']}, m={meta['m']}), "
            f"not for this one ({G.token}, n={G.n}, m={G.m})"
        )
    arrays = {name: _load_array(path / f"{name}.npy", mmap) for name in ARRAYS}
    _check_lengths(path, arrays, G.n)
    if verify:
        _check_values(path, arrays, G.n)
    arrays = {name: to_device(a, G.device) for name, a in arrays.items()}
    first_step = bool(meta.get("first_step", False))  # version 1 indexes hold the paper's walks
    params = PPRParams(*(meta[k] for k in ("n", "m", "alpha", "epsilon", "delta_min", "p_fail")), first_step)
    args = (meta["seed"], meta["budget"], arrays, meta["omega_i_ub"], meta["info"], perm, source)
    return PPRIndex(G, params, *args)


def verify_ppr_index(path, *, files: bool = True) -> dict:
    """The metadata of the index saved at ``path`` once its format, its own checksum and (``files``) every
    array file's checksum are checked; an ``IntegrityError`` (a ``GraphFormatError``) names what is not.
    The message ends with ``REBUILD``, what to do."""
    from operators.topk.index import FORMAT, VERSION

    path = Path(path)
    meta_file = path / "meta.json"
    meta = _read_meta(meta_file, f"{path}: no PPR index here (missing meta.json)")
    found = (
        (meta.get("format"), meta.get("version")) if isinstance(meta, dict) else (type(meta).__name__, None)
    )
    if found[0] != FORMAT or found[1] not in range(1, VERSION + 1):
        raise GraphFormatError(
            meta_file,
            None,
            f"expected format {FORMAT} version {VERSION}, found {found[0]} version {found[1]}",
        )
    if found[1] < CHECKSUMS:
        raise IntegrityError(
            meta_file,
            None,
            f"expected an index of format version {VERSION}, found version {found[1]}, saved before "
            f"indexes held checksums (it cannot be verified); {REBUILD}",
        )
    _check_meta(path, meta, files)
    return meta


def _load_perm(path: Path, n: int, device: str, mmap: bool, verify: bool):
    file = path / f"{PERM}.npy"
    if not file.is_file():
        raise IntegrityError(
            file, None, f"expected the index's vertex order (meta.json names a source graph); {REBUILD}"
        )
    perm = _load_array(file, mmap)
    if perm.shape != (n,):
        raise IntegrityError(
            file, None, f"expected {n} entries, one per vertex, found {perm.size}: a damaged index; {REBUILD}"
        )
    if perm.dtype.kind not in "iu":
        raise IntegrityError(file, None, f"expected integers, found {perm.dtype}: a damaged index; {REBUILD}")
    if verify and np.bincount(_in_range(file, perm, 0, n), minlength=n).max(initial=1) > 1:
        raise IntegrityError(file, None, f"expected a permutation of 0..{n - 1}: a damaged index; {REBUILD}")
    return to_device(perm, device)


def _check_meta(path: Path, meta: dict, verify: bool) -> None:
    """meta.json's own checksum, then (``verify``) every array file's."""
    meta_file = path / "meta.json"
    if "checksum" not in meta or not isinstance(meta.get("checksums"), dict):
        raise IntegrityError(meta_file, None, f"expected the index's checksums; they are missing; {REBUILD}")
    if meta["checksum"] != meta_checksum(meta):
        raise IntegrityError(
            meta_file,
            None,
            f"checksum mismatch: the index's parameters were edited or are damaged; {REBUILD}",
        )
    from operators.topk.index import ARRAYS

    names = [*ARRAYS, *([] if meta.get("source_token") is None else [PERM])]
    for file in (path / f"{name}.npy" for name in names):
        if file.name not in meta["checksums"]:
            raise IntegrityError(meta_file, None, f"expected a checksum of {file.name}; {REBUILD}")
        if not file.is_file():
            raise IntegrityError(file, None, f"expected this array of the index; it is missing; {REBUILD}")
        if verify and file_sha256(file) != meta["checksums"][file.name]:
            raise IntegrityError(file, None, f"checksum mismatch: the file changed or is damaged; {REBUILD}")


def _load_array(file: Path, mmap: bool) -> np.ndarray:
    """``np.load`` of an index array; a missing or unreadable file is an ``IntegrityError`` naming it."""
    if not file.is_file():
        raise IntegrityError(file, None, f"expected this array of the index; it is missing; {REBUILD}")
    try:
        return np.load(file, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:  # numpy's header and size errors name no file
        reason = " ".join(str(exc).split()) or type(exc).__name__  # one line: numpy pads its header
        raise IntegrityError(
            file, None, f"expected a NumPy array file ({reason[:120]}): a damaged index; {REBUILD}"
        ) from exc


def _in_range(file: Path, a, lo: int, hi: int):
    """``a`` when all its values are in [lo, hi), else an ``IntegrityError`` naming ``file``."""
    if a.size and (int(a.min()) < lo or int(a.max()) >= hi):
        raise IntegrityError(
            file,
            None,
            f"expected values in [{lo}, {hi}), found {int(a.min())} to {int(a.max())}: "
            f"a damaged index; {REBUILD}",
        )
    return a


def _read_meta(file: Path, missing: str) -> dict:
    if not file.is_file():
        raise FileNotFoundError(missing)
    return read_json(file)


def _check_lengths(path: Path, arrays: dict, n: int) -> None:
    """Every array holds integers (floats: beta), every per-vertex array has n entries, every pointer
    array n + 1 ending at its lists' length."""

    def bad(name: str, expected: str, got) -> IntegrityError:
        return IntegrityError(
            path / f"{name}.npy", None, f"expected {expected}, found {got}: a damaged index; {REBUILD}"
        )

    for name, a in arrays.items():
        if a.dtype.kind not in ("f" if name == "beta" else "iu"):
            raise bad(name, "floats" if name == "beta" else "integers", a.dtype)

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


# the arrays of vertex ids and what bounds them (n, or |H| for positions in the high-IRW set H)
IDS = {"starts": "n", "high": "n", "h_index": "h", "h_end": "h"}
COUNTS = ("omega", "omega_i", "ret", "freqs", "h_freq")


def _check_values(path: Path, arrays: dict, n: int) -> None:
    """Value ranges an index's arrays must have (one pass over each): integer ids below n (or |H|),
    offsets from 0 that never decrease, counts that are not negative, finite positive thresholds."""
    file = lambda name: path / f"{name}.npy"  # noqa: E731
    h = arrays["high"].size
    for name, bound in IDS.items():
        _in_range(file(name), arrays[name], -1 if name == "h_index" else 0, n if bound == "n" else h)
    for name in COUNTS:
        _in_range(file(name), arrays[name], 0, np.iinfo(np.int64).max)
    for ptr in LISTS:
        a = arrays[ptr]
        if int(a[0]) != 0 or bool((a[1:] < a[:-1]).any()):
            raise IntegrityError(
                file(ptr), None, f"expected offsets from 0 that never decrease: a damaged index; {REBUILD}"
            )
    beta = arrays["beta"]
    if not bool(np.isfinite(beta).all()) or (beta.size and float(beta.min()) <= 0):
        raise IntegrityError(
            file("beta"), None, f"expected finite positive thresholds: a damaged index; {REBUILD}"
        )
