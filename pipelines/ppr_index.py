"""The kPAR index job: load -> CSR -> PageRank -> IRW index, kept in a folder with a manifest.

``index_job`` builds (or finds) the index; ``topk_ppr_job`` (``pipelines.topk_ppr``) answers batches of
sources from it. ``delta_min`` may be given per vertex count ("K/n"), resolved once the graph is known.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

import dask
import numpy as np
from dask.base import tokenize

import operators
from graphs._device import to_device
from graphs.errors import GraphFormatError, IntegrityError, OptionError
from graphs.store import meta_checksum, read_graph_meta, read_json
from operators.options import IndexOptions, PageRankOptions
from operators.topk.index_io import REBUILD, verify_ppr_index

from . import _output
from ._progress import in_task
from .job import Job
from .pagerank import _pagerank
from .stages import GraphHandle, default_workdir, load_stage
from .summary import IndexSummary

MANIFEST = "ppr-index.json"


@dataclass(frozen=True)
class IndexHandle:
    path: str
    token: str
    info: dict

    def __dask_tokenize__(self):
        return ("IndexHandle", self.token)


def index_job(
    source,
    *,
    out=None,
    workdir=None,
    alpha=IndexOptions.alpha,
    epsilon=IndexOptions.epsilon,
    delta_min=None,
    seed=IndexOptions.seed,
    directed=True,
    read_options=None,
    reorder=None,
    first_step=IndexOptions.first_step,
    order=IndexOptions.order,
) -> Job:
    """Build the kPAR index of a graph (nothing runs until ``pipelines.run``).

    Parameters
    ----------
    source : path, generator spec or CSRGraph
        As in ``pagerank_job``.
    out : path, optional
        Folder that receives the graph, its PageRank and the index, with a manifest
        (``ppr-index.json``) that ``topk_ppr_job(index=out)`` and ``graphjobs topk-ppr --index`` read;
        default: the workdir.
    delta_min : float or str, optional
        Smallest PPR value the index serves: a number in (0, 1], or ``"K/n"`` for K over the graph's
        vertex count; default 16/n. Smaller means more walks and a larger index, and buys precision
        where the exact values near the k-th are close: ``"8/n"`` gave precision@1000 0.9915 and
        0.9919 on R-MAT 22 and 24 (0.9889 and 0.9908 at the default), ``"2/n"`` 0.993 and 0.994.
    first_step : bool
        As in ``build_ppr_index``: the index's walks take their first step (lower-variance estimates);
        False builds the paper's walks (``graphjobs index --paper-walks``).
    order : str or None
        As in ``build_ppr_index``: from 2^22 vertices on ('auto') the index holds the graph renumbered by
        degree (faster queries; no copy when ``reorder`` put the job's graph in that order already);
        None keeps its numbering (``graphjobs index --order none``).
    workdir, alpha, epsilon, seed, directed, read_options, reorder
        Artifact folder and ``build_ppr_index`` / ``read_edgelist`` / ``graphs.reorder`` options.

    Returns
    -------
    Job
        Its result is an ``IndexSummary``: ``folder``, ``n``, ``m``, walks, sizes and timings.
    """
    options = IndexOptions(alpha=alpha, epsilon=epsilon, seed=seed, first_step=bool(first_step), order=order)
    delta_min = _delta_min(delta_min)  # both before anything runs
    workdir = Path(out or workdir or default_workdir())
    load, gtoken = load_stage(
        source, workdir=workdir, read_options={"directed": directed, **(read_options or {})}, reorder=reorder
    )
    pr_params = dict(
        options=PageRankOptions(alpha=options.alpha, tol=1e-12, max_iter=1000),
        weighted=False,
        dtype=np.float64,
    )
    ptoken = tokenize("pagerank", gtoken, pr_params)
    ranks = dask.delayed(_pagerank, pure=True)(
        load,
        pr_params,
        str(workdir.resolve() / f"pagerank-{ptoken}.npy"),
        1,  # the index needs the whole graph on one device anyway
        str(workdir.resolve()),
        dask_key_name=f"graphjobs-pagerank-{ptoken}",
    )
    # first_step: a new token, so that workdirs holding indexes of the paper's walks build the new kind
    # order: a new token too (indexes built before it hold the graph's own numbering)
    # the token of the settings as a dict: indexes built before IndexOptions keep theirs
    o = options
    params = dict(alpha=o.alpha, epsilon=o.epsilon, seed=o.seed, first_step=o.first_step, order=o.order)
    if delta_min is not None:  # the default keeps the tokens of indexes built before the option
        params["delta_min"] = delta_min
    itoken = tokenize("ppr-index", gtoken, params)
    artifact = str(workdir.resolve() / f"ppr-index-{itoken}")
    index = dask.delayed(_index, pure=True)(
        load, ranks, options, delta_min, artifact, dask_key_name=f"irw-index-{itoken}"
    )
    summary = dask.delayed(_manifest, pure=True)(
        load, index, str(workdir.resolve()), dask_key_name=f"graphjobs-index-summary-{itoken}"
    )
    return Job(
        "ppr-index",
        summary,
        workdir,
        stages={"load": load, "pagerank": ranks, "index": index, "summary": summary},
        out=workdir if out else None,
    )


def _index(graph: GraphHandle, ranks: dict, options: IndexOptions, delta_min, artifact: str) -> IndexHandle:
    t0 = time.perf_counter()
    if not _reusable_index(artifact):
        g = graph.get()
        pr = to_device(np.load(ranks["path"]), g.device)
        if delta_min is not None:  # "K/n" is resolved once the graph is known
            options = options.replace(delta_min=_resolve_delta_min(delta_min, g.n))
        with in_task("irw-index") as progress:
            index = operators.build_ppr_index(g, pagerank=pr, options=options, progress=progress)
        index.save(artifact, overwrite=True, graph=graph.path)  # load_ppr_index(artifact) finds it
    meta = read_json(Path(artifact) / "meta.json")
    info = {**meta["info"], "delta_min": meta["delta_min"], "build_seconds": time.perf_counter() - t0}
    return IndexHandle(artifact, tokenize(artifact, meta["graph_token"], meta["seed"]), info)


def _reusable_index(artifact: str) -> bool:
    """Whether an earlier run's index is at ``artifact`` and intact (checksums; a damaged one is reported)."""
    if not (Path(artifact) / "meta.json").is_file():
        return False
    try:
        verify_ppr_index(artifact)
    except GraphFormatError as exc:
        _output.warn(f"{str(exc).removesuffix(f'; {REBUILD}')}; building the index again")
        return False
    return True


def _delta_min(value):
    """``delta_min`` as the jobs take it, checked before anything runs: None, a float, or "K/n"."""
    if value is None or not isinstance(value, str):
        return None if value is None else IndexOptions(delta_min=value).delta_min
    per_n = re.fullmatch(r"\s*([0-9.]+(?:[eE][-+]?[0-9]+)?)\s*/\s*n\s*", value)
    try:
        k = float(per_n.group(1) if per_n else value)
    except ValueError:
        k = math.nan
    if not k > 0:
        raise OptionError(f"delta_min={value!r}: expected a number in (0, 1] or K/n with K > 0, e.g. '2/n'")
    return f"{repr(k).removesuffix('.0')}/n" if per_n else IndexOptions(delta_min=k).delta_min


def _resolve_delta_min(value, n: int) -> float:
    """A "K/n" delta_min for a graph of n vertices (a float stays as it is)."""
    if not isinstance(value, str):
        return value
    resolved = float(value[:-2]) / n
    if resolved > 1:
        raise OptionError(f"delta_min={value}: {resolved:g} is more than 1 for a graph of n={n} vertices")
    return resolved


def _manifest(graph: GraphHandle, index: IndexHandle, folder: str) -> IndexSummary:
    """Write ``folder``'s ``ppr-index.json`` atomically (``_output.write_atomic``: readers never see half
    of it, and the temporary of a write that was killed is removed by the next) and return the summary."""
    # the folders relative to the manifest's: a copied or moved index folder reads its own files
    manifest = {
        "graph": os.path.relpath(graph.path, folder),
        "graph_token": graph.token,
        "index": os.path.relpath(index.path, folder),
        "directed": graph.directed,
        "weighted": graph.weighted,
        "n": graph.n,
        "m": graph.m,
    }
    manifest["checksum"] = meta_checksum(manifest)
    text = json.dumps(manifest, indent=1)
    _output.write_atomic(Path(folder) / MANIFEST, lambda tmp: Path(tmp).write_text(text))
    known = IndexSummary._names()  # an index saved by another version may hold more or fewer counts
    manifest.update(graph=graph.path, index=index.path)
    del manifest["checksum"]
    return IndexSummary(folder=folder, **manifest, **{k: v for k, v in index.info.items() if k in known})


def read_manifest(folder) -> dict:
    """The ``ppr-index.json`` of an index folder, its ``graph`` and ``index`` as absolute paths (written
    relative to the folder; absolute in manifests written before that). It is checked against its own
    checksum (manifests written before it had none) and against the graph it names; a folder it names
    that is not there, or a mismatch, is an ``IntegrityError`` naming the file."""
    folder = Path(folder)
    file = folder / MANIFEST
    if not file.is_file():
        raise FileNotFoundError(
            f"{folder}: no {MANIFEST} here; build one with `graphjobs index INPUT --out {folder}`"
        )
    manifest = read_json(file, "the index's JSON manifest; rebuild the index")
    keys = ("graph", "graph_token", "index", "directed", "weighted", "n", "m")
    missing = [k for k in keys if k not in manifest] if isinstance(manifest, dict) else list(keys)
    if missing:
        raise IntegrityError(file, None, f"expected {', '.join(missing)} in the manifest; rebuild the index")
    if "checksum" in manifest and manifest["checksum"] != meta_checksum(manifest):
        raise IntegrityError(
            file, None, "checksum mismatch: the manifest was edited or is damaged; rebuild the index"
        )
    for key, what in (("graph", "the graph"), ("index", "the index")):
        where = (folder / manifest[key]).resolve()
        if not (where / "meta.json").is_file():
            raise IntegrityError(
                where / "meta.json",
                None,
                f"expected {what} that {file} names; it is missing: rebuild the index",
            )
        manifest[key] = str(where)
    graph = read_graph_meta(manifest["graph"])
    fields = {"graph_token": "token", "n": "n", "m": "m", "directed": "directed", "weighted": "weighted"}
    differ = [k for k, g in fields.items() if graph.get(g) != manifest[k]]
    if differ:
        raise IntegrityError(
            file, None, f"expected the {', '.join(differ)} of the graph it names; rebuild the index"
        )
    manifest.pop("checksum", None)
    return manifest
