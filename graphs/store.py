"""Saving and loading graphs: a directory of .npy arrays plus meta.json, written atomically."""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import socket
import tempfile
from pathlib import Path

import numpy as np

from ._device import resolve_device, to_host
from .csr import CSRGraph
from .errors import GraphFormatError, IntegrityError

FORMAT = "graphjobs-csr"
VERSION = 1
META = "meta.json"


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            h.update(chunk)
    return h.hexdigest()


def meta_checksum(meta: dict) -> str:
    """SHA-256 of a JSON document's fields but its own ``checksum``, in a canonical JSON text (a saved
    graph's or index's meta.json, an index manifest, a chunk's record): an edited parameter is found as a
    flipped byte in an array file is."""
    fields = {k: v for k, v in meta.items() if k != "checksum"}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


def _write_labels(ids: np.ndarray, folder: Path) -> str:
    if ids.dtype.kind in "iuf":
        np.save(folder / "ids.npy", ids, allow_pickle=False)
        return "ids.npy"
    import pyarrow as pa
    import pyarrow.feather as feather

    try:
        col = pa.array(ids.tolist())
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise ValueError(f"vertex labels of mixed types cannot be saved: {exc}") from exc
    feather.write_feather(pa.table({"ids": col}), folder / "ids.arrow")
    return "ids.arrow"


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def load_npy(path, *, mmap: bool = False) -> np.ndarray:
    """``np.load`` of a saved array; a truncated or damaged file is an ``IntegrityError`` naming it
    (numpy's own message names no file: "could only read 32752 elements")."""
    try:
        return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        if isinstance(exc, FileNotFoundError | PermissionError | IsADirectoryError):
            raise
        reason = " ".join(str(exc).split()) or type(exc).__name__  # one line: numpy pads its header
        raise IntegrityError(
            path, None, f"expected a NumPy array file ({reason[:160]}): truncated or damaged?"
        ) from exc


def read_json(path, what: str = "JSON metadata") -> dict:
    """The JSON document in ``path``; a broken one is an ``IntegrityError`` naming the file and line
    (``json``'s own message names no file: "Expecting value: line 2 column 1")."""
    try:
        return json.loads(Path(path).read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        line = getattr(exc, "lineno", None)
        msg = getattr(exc, "msg", None) or str(exc)
        raise IntegrityError(path, line, f"expected {what}: {msg} (truncated or damaged?)") from exc


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host runs (one of another user's counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def owner_tag() -> str:
    """``HOST-PID`` of this process, in the names of its temporaries, so that a later write can tell
    the temporaries of a process that died (killed mid-write) from those of one still writing."""
    return f"{socket.gethostname()}-{os.getpid()}"


def remove_stale(folder: Path, pattern: str, owner) -> int:
    """Remove the entries of ``folder`` matching ``pattern`` whose ``owner(name)`` (``HOST-PID``, or None
    for names written before owners were) is a process of this host that no longer runs, or unknown;
    temporaries of live processes and of other hosts stay. Returns how many were removed."""
    removed, host = 0, socket.gethostname()
    for entry in folder.glob(pattern):
        tag = owner(entry.name)
        if tag is not None:
            who, _, pid = tag.rpartition("-")
            if who != host or not pid.isdigit() or process_alive(int(pid)):
                continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
        removed += 1
    return removed


def _directory_owner(name: str):
    # .NAME.partial-HOST-PID-RANDOM (mkdtemp's RANDOM has no '-'); .NAME.partial-RANDOM before owners
    parts = name.split(".partial-", 1)[-1].split(".old-", 1)[-1].rsplit("-", 2)
    return None if len(parts) < 3 else f"{parts[0]}-{parts[1]}"


def write_directory(path, fill, *, overwrite: bool = False) -> None:
    """Create directory ``path`` atomically: ``fill(tmp)`` writes the files (returns their names) into
    a temporary sibling, which is synced and then renamed over ``path``; a failure leaves no trace.
    Temporaries that earlier writes of ``path`` left behind (their process was killed) are removed."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} exists; pass overwrite=True to replace it")
    path.parent.mkdir(parents=True, exist_ok=True)
    for kind in ("partial", "old"):
        remove_stale(path.parent, f".{glob.escape(path.name)}.{kind}-*", _directory_owner)
    tag = owner_tag()
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.partial-{tag}-", dir=path.parent))
    try:
        for f in fill(tmp):
            _fsync(tmp / f)
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old-{tag}-", dir=path.parent))
            os.replace(path, old / "content")
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
        _fsync(path.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def save_graph(g: CSRGraph, path, *, overwrite: bool = False) -> None:
    def fill(tmp: Path) -> list[str]:
        files = []
        for name, arr in (("indptr", g.indptr), ("indices", g.indices), ("weights", g.weights)):
            if arr is not None:
                np.save(tmp / f"{name}.npy", to_host(arr), allow_pickle=False)
                files.append(f"{name}.npy")
        if g.has_labels:
            files.append(_write_labels(g.ids, tmp))
        meta = {
            "format": FORMAT,
            "version": VERSION,
            "n": g.n,
            "m": g.m,
            "directed": g.directed,
            "weighted": g.weighted,
            "token": g.token,
            "checksums": {f: file_sha256(tmp / f) for f in files},
        }
        meta["checksum"] = meta_checksum(meta)
        (tmp / META).write_text(json.dumps(meta, indent=1))
        return [*files, META]

    write_directory(path, fill, overwrite=overwrite)


def read_graph_meta(path) -> dict:
    """The meta.json of the graph saved at ``path`` once its format, version, own checksum and keys are
    checked (not its array files: ``load`` checks those); a ``GraphFormatError`` names what is not."""
    path = Path(path)
    meta_path = path / META
    if not meta_path.is_file():
        raise GraphFormatError(path, None, f"expected a saved graph directory with {META}; none found")
    meta = read_json(meta_path)
    found = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
    if found != FORMAT:
        raise GraphFormatError(meta_path, None, f"expected format {FORMAT!r}, got {found!r}")
    if meta.get("version") != VERSION:
        raise GraphFormatError(
            meta_path, None, f"expected format version {VERSION}, got {meta.get('version')!r}"
        )
    # graphs saved before meta.json held its own checksum have none to check
    if "checksum" in meta and meta["checksum"] != meta_checksum(meta):
        raise IntegrityError(
            meta_path, None, "checksum mismatch: the graph's metadata was edited or is damaged"
        )
    missing = [k for k in ("n", "m", "directed", "token", "checksums") if k not in meta]
    if missing or not isinstance(meta["checksums"], dict) or "indptr.npy" not in meta["checksums"]:
        raise IntegrityError(
            meta_path, None, f"expected the graph's {', '.join(missing) or 'checksums'}: damaged metadata"
        )
    return meta


def _check_files(path: Path, checksums: dict, verify: bool) -> None:
    """Every file meta.json lists is there and (``verify``) matches its SHA-256: else an IntegrityError."""
    for f, digest in checksums.items():
        if not (path / f).is_file():
            raise IntegrityError(path / f, None, "expected this file (listed in meta.json); it is missing")
        if verify and file_sha256(path / f) != digest:
            raise IntegrityError(path / f, None, "checksum mismatch: the file changed or is damaged")


def load(path, *, device: str = "cpu", mmap: bool = False, verify: bool = True) -> CSRGraph:
    """Load a graph written by ``CSRGraph.save``.

    Parameters
    ----------
    path : str or PathLike
        The directory given to ``save``.
    device : {'cpu', 'gpu', 'auto'}
        Where the returned graph lives.
    mmap : bool
        Memory-map the arrays instead of reading them (host graphs only; pages load on use).
    verify : bool
        Check every file against the SHA-256 recorded at save time (reads each file once).

    Returns
    -------
    CSRGraph

    Raises
    ------
    GraphFormatError
        If the directory is not a saved graph, has another format version, or a checksum differs.
    """
    path = Path(path)
    meta_path = path / META
    meta = read_graph_meta(path)
    checksums = meta["checksums"]
    _check_files(path, checksums, verify)
    arrays = {f[:-4]: load_npy(path / f, mmap=mmap) for f in checksums if f.endswith(".npy")}
    ids = arrays.pop("ids", None)
    if "ids.arrow" in checksums:
        import pyarrow.feather as feather

        ids = feather.read_table(path / "ids.arrow").column("ids").to_numpy(zero_copy_only=False)
        ids = np.asarray(ids, dtype=object)
    try:
        g = CSRGraph(
            arrays["indptr"],
            arrays["indices"],
            arrays.get("weights"),
            directed=meta["directed"],
            ids=ids,
            validate=not verify,
        )
    except ValueError as exc:  # arrays no CSR graph has (checked when the checksums were not)
        _check_files(path, checksums, True)  # names the file that changed, if a checksum tells
        raise IntegrityError(path, None, f"expected a CSR graph: {exc}") from exc
    if (g.n, g.m) != (meta["n"], meta["m"]):
        raise GraphFormatError(
            meta_path, None, f"expected n={meta['n']}, m={meta['m']}; arrays hold {g.n}, {g.m}"
        )
    if verify:
        object.__setattr__(g, "_token", meta["token"])
    return g.to(resolve_device(device))
