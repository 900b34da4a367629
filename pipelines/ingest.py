"""Partitioned ingestion: edge files -> a partitioned graph on disk, without the whole graph on one host.

One task per input file parses it once (kept in binary); when any file holds labels that are not
integers >= 0, one task merges the files' distinct labels into the sorted label table (vertex i is the
i-th label in sorted order; ``read_edgelist`` numbers string labels by first appearance instead, which
needs the files in order); one task per file then numbers its edges and counts
degrees; one task sums the counts and cuts the destination ranges (balanced by in-edges, as
``graphs.partition``); one task per input file splits its edges into one bucket per range; one task per
range sorts its buckets into the in-edge CSR of the part. Only degree vectors (8 bytes a vertex) and
the label table are ever whole on one worker. Integer ids >= 0 are used as they are (vertex i is id
i). The result is the directory that ``PartitionedGraph.save`` writes (labels included), read by
``graphs.load_partitioned`` and ``operators.pagerank``.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
from pathlib import Path

import dask
import numpy as np
from dask.base import tokenize

from graphs.errors import GraphFormatError, OptionError
from graphs.partition import FORMAT, VERSION, range_bounds, verify_partitioned
from graphs.read import read_edge_columns
from graphs.store import _write_labels, file_sha256, meta_checksum, read_json

from ._output import warn
from .job import Job
from .stages import default_workdir


def partition_files(
    files,
    parts: int,
    out,
    *,
    n: int | None = None,
    directed: bool = True,
    weighted=False,
    dedupe: bool = False,
    read_options=None,
    workdir=None,
) -> Job:
    """Build a partitioned graph from many edge files as a Dask job (nothing runs until ``run``).

    Parameters
    ----------
    files : list of paths
        Edge files (text, CSV/TSV, .gz, Parquet): each holds some of the edges, any split.
    parts : int
        Destination ranges (one per worker that will hold the graph).
    out : path
        Directory to write (replaced atomically when the job finishes).
    n : int, optional
        Number of vertices (default: largest id + 1). Integer ids >= 0 are vertex numbers; any other
        labels (strings, negative numbers) are numbered in sorted order and kept as the graph's ids.
    directed, weighted, dedupe
        Undirected edges are stored both ways; weights come from the third column (or
        ``read_options['weight_col']``); ``dedupe`` drops repeated (source, destination) pairs.
    read_options : dict, optional
        ``comment``, ``delimiter``, ``header``, ``src_col``, ``dst_col``, ``weight_col``.
    workdir : path, optional
        Where the buckets are kept while the job runs.

    Returns
    -------
    Job
        Its result is a summary dict: ``out``, ``n``, ``m``, ``bounds``, edges per part.
    """
    files = [str(Path(f).resolve()) for f in files]
    if not files:
        raise OptionError("partition_files needs at least one edge file")
    for f in files:
        if not os.path.isfile(f):
            raise FileNotFoundError(f"{f}: no such file")
    if isinstance(parts, bool) or not isinstance(parts, int) or parts < 1:
        raise OptionError(f"parts must be an int >= 1, got {parts!r}")
    opts = {k: v for k, v in (read_options or {}).items() if v is not None}
    if weighted and "weight_col" not in opts:
        opts["weight_col"] = 2
    stamp = [(f, os.stat(f).st_size, os.stat(f).st_mtime_ns) for f in files]
    token = tokenize("ingest", stamp, parts, n, directed, sorted(opts.items()), dedupe)
    out = Path(out).resolve()
    tmp = Path(workdir or default_workdir()).resolve() / f"ingest-{token}"
    if _reusable(out, token):  # built by an earlier run, and intact
        done = dask.delayed(_summary, pure=True)(
            str(out), str(tmp), dask_key_name=f"graphjobs-ingest-{token}"
        )
        return Job("ingest", done, tmp.parent, stages={"summary": done})
    d = functools.partial(dask.delayed, pure=True)
    parsed = [
        d(_parse)(f, i, opts, directed, str(tmp), dask_key_name=f"ingest-parse-{token}-{i}")
        for i, f in enumerate(files)
    ]
    table = d(_label_table)(parsed, n, str(tmp), dask_key_name=f"ingest-labels-{token}")
    degrees = [
        d(_degrees)(p, i, table, str(tmp), dask_key_name=f"ingest-degrees-{token}-{i}")
        for i, p in enumerate(parsed)
    ]
    plan = d(_plan)(degrees, parts, n, table, dask_key_name=f"ingest-plan-{token}")
    buckets = [
        d(_bucket)(deg[2], i, plan, str(tmp), dask_key_name=f"ingest-bucket-{token}-{i}")
        for i, deg in enumerate(degrees)
    ]
    built = [
        d(_part)(r, buckets, plan, dedupe, str(tmp), token, dask_key_name=f"ingest-part-{token}-{r}")
        for r in range(parts)
    ]
    result = d(_finish)(
        built,
        plan,
        table,
        directed,
        "weight_col" in opts,
        str(tmp),
        str(out),
        token,
        dask_key_name=f"graphjobs-ingest-{token}",
    )
    return Job("ingest", result, tmp.parent, stages={"degrees": degrees, "parts": built, "summary": result})


def _reusable(out: Path, token: str) -> bool:
    """Whether ``out`` holds the graph an earlier run of this very ingest wrote, every file matching its
    checksum; a damaged one is reported (a warning) and built again."""
    if not (out / "meta.json").is_file():
        return False
    try:
        return verify_partitioned(out).get("token") == token
    except GraphFormatError as exc:
        warn(f"{exc}; building it again")
        return False


def _summary(out: str, tmp: str) -> dict:
    """The summary of the graph an earlier run of this ingest built in ``out``. Its work folder ``tmp``
    is removed if it is still there (a run that ended after moving the graph into place, before removing
    it): the workdir holds no temporaries once the job returns."""
    shutil.rmtree(tmp, ignore_errors=True)
    meta = read_json(Path(out) / "meta.json")
    keys = ("n", "m", "bounds", "edges")
    return {"job": "ingest", "out": out, **{k: meta[k] for k in keys}, "cached": True}


def dataset_files(source) -> list[str] | None:
    """The edge files of a dataset source (a folder of edge files, or a list of paths), else None."""
    if isinstance(source, list | tuple):
        return [str(Path(f).resolve()) for f in source]
    folder = isinstance(source, str | os.PathLike) and Path(source).is_dir()
    if folder and not (Path(source) / "meta.json").exists():
        suffixes = (".parquet", ".csv", ".tsv", ".txt", ".gz", ".el", ".edges")
        files = sorted(str(f.resolve()) for f in Path(source).iterdir() if f.name.endswith(suffixes))
        if not files:
            raise FileNotFoundError(f"{source}: a folder without edge files (expected {', '.join(suffixes)})")
        return files
    return None


def _parse(path, i, opts, directed, tmp):
    """Parse one file (undirected: both ways); keep it (binary). Returns its path, whether its ids are
    integers >= 0, and its distinct labels when they are not."""
    src, dst, w = read_edge_columns(path, **opts)
    src, dst = np.asarray(src), np.asarray(dst)
    if not directed:
        loop = src == dst
        src, dst = np.concatenate([src, dst[~loop]]), np.concatenate([dst, src[~loop]])
        w = None if w is None else np.concatenate([w, w[~loop]])
    ints = all(a.dtype.kind in "iu" and not (a.size and int(a.min()) < 0) for a in (src, dst))
    if not ints:
        src, dst = _as_labels(src), _as_labels(dst)
    arrays = {"src": src, "dst": dst} | ({} if w is None else {"w": np.asarray(w, dtype=np.float32)})
    saved = _save_npz(Path(tmp) / "parsed" / f"raw{i}.npz", **arrays)
    return {"path": saved, "ints": ints, "labels": None if ints else np.unique(np.concatenate([src, dst]))}


def _as_labels(a):
    """Labels as numbers (kept) or strings: one comparable, picklable-free dtype."""
    return a if a.dtype.kind in "iuf" else np.asarray(a, dtype=str)


def _label_table(parsed, n, tmp):
    """None when every file has integer ids >= 0; else the sorted distinct labels, saved for the tasks."""
    if all(p["ints"] for p in parsed):
        return None
    if n is not None:
        raise OptionError(f"n={n} was given, but the files hold labels (they are numbered, not taken as ids)")
    pieces = []
    for p in parsed:  # integer files among labelled ones: their ids are labels too (loaded here)
        if p["ints"]:
            with np.load(p["path"]) as f:
                pieces.append(np.unique(np.concatenate([f["src"], f["dst"]])))
        else:
            pieces.append(p["labels"])
    if any(x.dtype.kind == "U" for x in pieces):
        pieces = [x.astype(str) for x in pieces]
    labels = np.unique(np.concatenate(pieces))
    path = Path(tmp) / "labels.npy"
    np.save(path, labels, allow_pickle=False)
    return {"path": str(path), "n": int(labels.size)}


def _degrees(parsed, i, table, tmp):
    """Vertex numbers of one file's edges (through the label table, if any) and its in-degree counts;
    the numbered edges are kept (binary) for ``_bucket``."""
    with np.load(parsed["path"]) as f:
        src, dst, w = f["src"], f["dst"], (f["w"] if "w" in f else None)
    if table is not None:
        labels = np.load(table["path"], allow_pickle=False)
        src, dst = (np.searchsorted(labels, a.astype(labels.dtype)) for a in (src, dst))
    src, dst = src.astype(np.int64), dst.astype(np.int64)
    top = int(max(src.max(initial=-1), dst.max(initial=-1))) + 1
    numbered = _save_npz(
        Path(tmp) / "parsed" / f"file{i}.npz", src=src, dst=dst, **({} if w is None else {"w": w})
    )
    return np.bincount(dst, minlength=top), top, numbered


def _save_npz(path: Path, **arrays) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(f"{path}.partial.npz", **arrays)
    os.replace(f"{path}.partial.npz", path)
    return str(path)


def _plan(degrees, parts, n, table=None):
    top = max(t for _, t, _ in degrees)
    n = table["n"] if table is not None else (top if n is None else n)
    if top > n:
        raise OptionError(f"vertex id {top - 1} found, but n={n}")
    ind = np.zeros(n, dtype=np.int64)
    for i, _, _ in degrees:
        ind[: len(i)] += i
    indptr = np.concatenate([[0], np.cumsum(ind)])
    m = int(indptr[-1])
    bounds = range_bounds(indptr, parts)
    return {"n": n, "m": m, "bounds": bounds}


def _bucket(parsed_path, i, plan, tmp):
    with np.load(parsed_path) as parsed:
        src, dst, w = parsed["src"], parsed["dst"], (parsed["w"] if "w" in parsed else None)
    which = np.searchsorted(plan["bounds"], dst, side="right") - 1
    order = np.argsort(which, kind="stable")
    edges = np.bincount(which, minlength=len(plan["bounds"]) - 1)
    start = np.concatenate([[0], np.cumsum(edges)])
    names = []
    for r in range(len(edges)):
        sel = order[start[r] : start[r + 1]]
        arrays = {"src": src[sel], "dst": dst[sel]} | ({} if w is None else {"w": w[sel]})
        names.append(_save_npz(Path(tmp) / "buckets" / f"file{i}-part{r}.npz", **arrays))
    return names  # the parsed file stays until _finish removes tmp: a retried task may need it


def _part(r, buckets, plan, dedupe, tmp, token):
    lo, hi = int(plan["bounds"][r]), int(plan["bounds"][r + 1])
    loaded = [np.load(b[r]) for b in buckets]
    src = np.concatenate([x["src"] for x in loaded]) if loaded else np.zeros(0, np.int64)
    dst = np.concatenate([x["dst"] for x in loaded]) if loaded else np.zeros(0, np.int64)
    w = np.concatenate([x["w"] for x in loaded]) if loaded and "w" in loaded[0] else None
    order = np.lexsort((src, dst))
    src, dst = src[order], dst[order]
    w = None if w is None else w[order]
    if dedupe and src.size:
        keep = np.concatenate([[True], (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])])
        src, dst, w = src[keep], dst[keep], (None if w is None else w[keep])
    indptr = np.concatenate([[0], np.cumsum(np.bincount(dst - lo, minlength=hi - lo))]).astype(np.int64)
    folder = Path(tmp) / "graph" / f"part-{r}"
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "indptr.npy", indptr)
    np.save(folder / "indices.npy", src.astype(np.int32 if plan["n"] < 2**31 else np.int64))
    if w is not None:
        np.save(folder / "weights.npy", w)
    # out-degree after dedupe is not known here: each part reports its sources' counts
    return {"m": int(src.size), "out": np.bincount(src, minlength=plan["n"]), "token": tokenize(token, r)}


def _finish(built, plan, table, directed, weighted, tmp, out, token):
    folder = Path(tmp) / "graph"
    outd = np.sum([b["out"] for b in built], axis=0).astype(np.int64)
    np.save(folder / "out_degree.npy", outd)
    files = ["out_degree.npy"]
    if table is not None:
        files.append(_write_labels(np.load(table["path"], allow_pickle=False), folder))
    if weighted:  # out-weight of every vertex: from the parts' weights (one pass over each part)
        outw = np.zeros(plan["n"], dtype=np.float64)
        for r in range(len(built)):
            idx = np.load(folder / f"part-{r}" / "indices.npy", mmap_mode="r")
            w = np.load(folder / f"part-{r}" / "weights.npy").astype(np.float64)
            outw += np.bincount(idx, weights=w, minlength=plan["n"])
        np.save(folder / "out_weight.npy", outw)
        files.append("out_weight.npy")
    for r in range(len(built)):
        files += [
            f"part-{r}/{a}.npy"
            for a in ("indptr", "indices", "weights")
            if (folder / f"part-{r}" / f"{a}.npy").is_file()
        ]
    m = sum(b["m"] for b in built)
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "n": plan["n"],
        "m": m,
        "directed": directed,
        "weighted": weighted,
        "bounds": plan["bounds"].tolist(),
        "token": token,
        "part_tokens": [b["token"] for b in built],
        "edges": [b["m"] for b in built],
        "checksums": {f: file_sha256(folder / f) for f in files},
    }
    meta["checksum"] = meta_checksum(meta)
    (folder / "meta.json").write_text(json.dumps(meta, indent=1))
    out = Path(out)
    if out.exists():
        shutil.rmtree(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    os.replace(folder, out)
    shutil.rmtree(tmp, ignore_errors=True)
    return {
        "job": "ingest",
        "out": str(out),
        "n": plan["n"],
        "m": m,
        "bounds": plan["bounds"].tolist(),
        "edges": meta["edges"],
    }
