"""Building blocks of jobs: graph sources, the cached load stage, handles passed between tasks.

Every stage is a ``dask.delayed(pure=True)`` call whose key is ``graphjobs-<stage>-<token>``; the token
depends only on the inputs and parameters, so it names the stage's artifact in the workdir too and a
re-run finds finished stages there. Tasks pass small handles (a path and a token), never graphs: each
worker loads a graph once (``pipelines._state``) and reuses it for every task.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
from dataclasses import dataclass
from pathlib import Path

import dask
import numpy as np
from dask.base import tokenize

import graphs
from cluster.worker import worker_device
from graphs.errors import InsufficientMemoryError, OptionError
from operators._checks import check_count
from operators._ranked import long_rows

from . import _output, _state
from ._output import write_atomic
from ._progress import in_task
from .job import Job
from .sources import distinct_sources, resolve_sources, sources_spec
from .summary import BatchSummary

GENERATORS = {"rmat": graphs.rmat, "ba": graphs.barabasi_albert, "er": graphs.erdos_renyi}
READ_OPTIONS = (
    "directed",
    "weighted",
    "dedupe",
    "self_loops",
    "comment",
    "delimiter",
    "src_col",
    "dst_col",
    "weight_col",
    "header",
)


@dataclass(frozen=True)
class GraphHandle:
    """A graph saved in the workdir: what tasks pass around instead of the graph itself."""

    path: str
    token: str
    n: int
    m: int
    directed: bool
    weighted: bool

    def get(self, device: str | None = None) -> graphs.CSRGraph:
        """The graph on ``device`` (default: this worker's), loaded once per process."""
        return _state.graph(self.path, self.token, device or worker_device())

    def __dask_tokenize__(self):
        return ("GraphHandle", self.token)


def chunk_memory(record: dict, per_chunk: int) -> dict:
    """A chunk's device memory record: ``record`` (an ``operators._gpu.memory.MemoryEstimate``'s checked
    record) with ``per_chunk_bytes``, the share of it each chunk running at the same time on the same
    device holds on its own, and the ``worker`` and ``thread`` that ran it (``BatchSummary.from_parts``
    counts chunks at once from them)."""
    import socket
    import threading

    worker = f"{socket.gethostname()}:{os.getpid()}"
    return {**record, "per_chunk_bytes": int(per_chunk), "worker": worker, "thread": threading.get_ident()}


@contextlib.contextmanager
def job_hint(hint: str):
    """Inside it, an ``InsufficientMemoryError`` from an operator (whose hint names the operator's
    options) is raised again naming ``hint``: what the job's user can change (its flags)."""
    try:
        yield
    except InsufficientMemoryError as exc:
        raise InsufficientMemoryError(exc.what, exc.needed, exc.available, hint) from None


def cluster_workers() -> int:
    """Workers of the Dask cluster running this task (0 outside a distributed worker)."""
    try:
        from distributed import get_client, get_worker

        get_worker()
        return len(get_client().scheduler_info(n_workers=-1)["workers"])
    except (ImportError, ValueError):
        return 0


def write_parquet(table, path) -> None:
    """Write a pyarrow table to ``path`` atomically."""
    import pyarrow.parquet as pq

    write_atomic(path, lambda tmp: pq.write_table(table, tmp))


def default_workdir() -> Path:
    return Path(os.environ.get("GRAPHJOBS_WORKDIR", ".graphjobs"))


def parse_source(source):
    """``('graph', g)``, ``('generator', name, kwargs)`` or ``('file', abspath)`` for a job's input.

    Generator specs look like ``rmat:16``, ``rmat:scale=20,seed=3`` or ``ba:n=10000,m=4``.
    """
    if isinstance(source, graphs.CSRGraph):
        return ("graph", source)
    text = os.fspath(source)
    name, sep, rest = text.partition(":")
    if sep and name in GENERATORS and not os.path.exists(text):
        kwargs = {}
        for i, part in enumerate(p for p in rest.split(",") if p):
            key, eq, value = part.partition("=")
            if not eq:
                key, value = ("scale" if name == "rmat" else "n") if i == 0 else key, key
            kwargs[key.strip()] = _number(value.strip(), text)
        _check_generator(name, kwargs, text)
        return ("generator", name, kwargs)
    path = Path(text)
    if not path.exists():
        raise FileNotFoundError(f"{text}: no such file (or generator spec like 'rmat:16', 'ba:n=1000,m=3')")
    if not (path.is_file() or path.is_dir()):  # a pipe (a shell's <(...)) can be read once, by this process
        raise OptionError(
            f"{text}: not a regular file (a pipe?): a job's workers read its input, again on a re-run; "
            "write it to a file first (gzipped edge lists are read as they are)"
        )
    return ("file", str(path.resolve()))


def _check_generator(name: str, kwargs: dict, spec: str) -> None:
    """Unknown or missing options of a generator spec are errors now, not a TypeError in a task later."""
    params = inspect.signature(GENERATORS[name]).parameters
    allowed = [p for p in params if p != "device"]  # the worker's device, or the job's
    unknown = [k for k in kwargs if k not in allowed]
    if unknown:
        raise OptionError(f"{spec}: unknown option {unknown[0]!r}; {name} takes {', '.join(allowed)}")
    missing = [p for p in allowed if params[p].default is inspect.Parameter.empty and p not in kwargs]
    if missing:
        raise OptionError(f"{spec}: {name} needs {' and '.join(missing)} (e.g. '{name}:{missing[0]}=...')")


def _number(value: str, spec: str):
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise OptionError(f"{spec}: {value!r} is not a number")


def generated_size(name: str, kwargs: dict) -> tuple[int, int]:
    """Vertices and stored edges of the graph generator ``name`` makes with ``kwargs`` (an estimate
    for ``er`` by ``p``)."""
    if name == "rmat":
        n = 1 << int(kwargs["scale"])
        m = int(kwargs.get("edge_factor", 16)) * n
        return n, m * (1 if kwargs.get("directed", True) else 2)
    if name == "ba":
        n, k = int(kwargs["n"]), int(kwargs["m"])
        return n, 2 * k * max(n - k, 0)
    n = int(kwargs["n"])
    m = kwargs.get("m")
    m = int(m) if m is not None else int(float(kwargs.get("p") or 0) * n * (n - 1))
    return n, m * (1 if kwargs.get("directed", True) else 2)


def generated_bytes(name: str, kwargs: dict) -> int:
    """Peak memory of generating a graph and building its CSR: the edge arrays, the sort's
    permutation, the CSR's indices and row pointer (and weights)."""
    n, m = generated_size(name, kwargs)
    return 24 * m + 8 * (n + 1) + (8 * m if kwargs.get("weighted") else 0)


def check_generator_memory(name: str, kwargs: dict, device: str) -> None:
    """Refuse (``InsufficientMemoryError``, before anything is allocated) a generated graph that does
    not fit in the free memory of ``device``; the message names what would fit."""
    from graphs._device import free_memory
    from operators.errors import InsufficientMemoryError

    if name == "rmat" and not 1 <= int(kwargs["scale"]) <= 31:
        return  # the generator's own error says what is allowed
    device = "gpu" if device == "gpu" else "cpu"
    need, free = generated_bytes(name, kwargs), free_memory(device)
    if need <= 0.9 * free:
        return
    n, m = generated_size(name, kwargs)
    spec = f"{name}:" + ",".join(f"{k}={v}" for k, v in kwargs.items() if k != "device")
    hint = "a smaller graph"
    if name == "rmat":
        fits = [
            s
            for s in range(int(kwargs["scale"]) - 1, 0, -1)
            if generated_bytes(name, {**kwargs, "scale": s}) <= 0.9 * free
        ]
        hint = f"rmat:{fits[0]} would fit" if fits else "no scale fits"
    raise InsufficientMemoryError(
        f"generating {spec} (n={n:,}, m={m:,}) on {device}",
        need,
        free,
        f"{hint}; or run on a machine or cluster with more memory (--scheduler); "
        "$GRAPHJOBS_MEMORY_LIMIT caps what counts as free",
    )


def source_token(src) -> str:
    if src[0] == "graph":
        return src[1].token
    if src[0] == "generator":
        return tokenize(src[1], sorted(src[2].items()))
    if os.path.isdir(src[1]):  # a dataset: each file's name, size and time
        files = sorted((e for e in os.scandir(src[1]) if e.is_file()), key=lambda e: e.name)
        return tokenize(src[1], [(e.name, e.stat().st_size, e.stat().st_mtime_ns) for e in files])
    st = os.stat(src[1])
    return tokenize(src[1], st.st_size, st.st_mtime_ns)


def load_stage(source, *, workdir, read_options=None, reorder=None) -> tuple[dask.delayed, str]:
    """The delayed load -> CSR stage and its token. Skipped when its artifact is in ``workdir``.

    ``reorder`` ('degree', 'in_degree', 'out_degree') renumbers the vertices once, before the graph
    is saved (``graphs.reorder``): worth it when the graph serves many computations.
    """
    if reorder is not None and reorder not in graphs.reorder_orders():
        raise OptionError(f"reorder must be one of {graphs.reorder_orders()} or None, got {reorder!r}")
    src = parse_source(source)
    options = {k: v for k, v in (read_options or {}).items() if v is not None}
    unknown = set(options) - set(READ_OPTIONS)
    if unknown:
        raise OptionError(f"unknown read options {sorted(unknown)}; allowed: {READ_OPTIONS}")
    token = tokenize("load", source_token(src), sorted(options.items()), reorder)
    if Path(workdir).exists() and not Path(workdir).is_dir():
        raise NotADirectoryError(f"{workdir}: exists and is not a folder (expected the job's work folder)")
    artifact = str(Path(workdir).resolve() / f"graph-{token}")
    call = dask.delayed(_load, pure=True)
    return call(src, options, reorder, artifact, dask_key_name=f"graphjobs-load-{token}"), token


def _load(src, options, reorder, artifact) -> GraphHandle:
    if (Path(artifact) / "meta.json").is_file():  # an earlier run's: checked before it is reused
        try:
            g = graphs.load(artifact, mmap=True)
            return GraphHandle(artifact, g.token, g.n, g.m, g.directed, g.weighted)
        except graphs.GraphFormatError as exc:
            _output.warn(f"{exc}; reading the graph again")
    if src[0] == "graph":
        g = src[1]
    elif src[0] == "generator":
        fn = GENERATORS[src[1]]
        kwargs = dict(src[2])
        if src[1] == "rmat":
            kwargs.setdefault("device", worker_device())
        check_generator_memory(src[1], kwargs, kwargs.get("device", "cpu"))
        g = fn(**kwargs)
    else:
        g = graphs.read_edgelist(src[1], **options)
    if reorder:
        g = graphs.reorder(g, by=reorder)
    g.save(artifact, overwrite=True)
    g = graphs.load(artifact, mmap=True, verify=False)
    return GraphHandle(artifact, g.token, g.n, g.m, g.directed, g.weighted)


def batch_job(
    name: str,
    load,
    gtoken: str,
    sources,
    opts: dict,
    *,
    seed: int,
    chunk: int,
    out,
    workdir,
    run_chunk,
    summarize,
    overwrite: bool = False,
    tuning: dict | None = None,
    per_source: tuple[str, int, int] | None = None,
) -> Job:
    """A job over a batch of sources: resolve them in one task, then ``run_chunk(graph, ids, opts, path,
    progress=...)`` per chunk (keys ``<name>-<token>-<i>``, partitions ``out/part-NNNNN.parquet``;
    ``progress``: ``pipelines._progress.in_task``'s, for its operator), then
    ``summarize(graph, parts, out, opts)``. Chunks finished by an earlier run of the same job are skipped
    (``pipelines._output``); an ``out`` folder of another job is refused unless ``overwrite``.
    ``tuning`` joins the chunks' ``opts`` but not the job's token: options that change how a chunk is
    computed, not its rows (a run with other ones resumes the same job). ``per_source`` (the option's
    name, its value, its default) is the rows asked for per source: more than the graph's vertices is
    refused (``OptionError``), or for the default, said in a warning.
    A source listed more than once is answered once (``duplicate_sources`` in the summary).
    """
    sources, duplicates = distinct_sources(sources)
    spec, count = sources_spec(sources, seed)
    chunk = check_count("chunk", chunk)
    jtoken = tokenize(name, gtoken, spec, opts, chunk)
    chunk_opts = {**opts, **(tuning or {})}
    out = Path(out).resolve()
    _output.check_reusable(out, name, jtoken, overwrite)
    resolved = dask.delayed(_resolve, pure=True)(
        load, spec, per_source, dask_key_name=f"graphjobs-sources-{jtoken}"
    )
    parts = [
        dask.delayed(_resumable, pure=True)(
            name,
            run_chunk,
            load,
            resolved[lo : lo + chunk],
            chunk_opts,
            str(out / f"part-{i:05d}.parquet"),
            f"{jtoken}-{i}",
            jtoken,
            dask_key_name=f"{name}-{jtoken}-{i}",
        )
        for i, lo in enumerate(range(0, count, chunk))
    ]
    skey = f"graphjobs-{name}-summary-{jtoken}"
    finish = dask.delayed(_finish, pure=True)
    result = finish(summarize, name, jtoken, load, parts, str(out), opts, duplicates, dask_key_name=skey)
    stages = {"load": load, "sources": resolved, "queries": parts, "summary": result}
    check = functools.partial(_output.check_reusable, out, name, jtoken, overwrite)
    return Job(name, result, Path(workdir), stages=stages, out=out, check_out=check)


def _resolve(graph, spec, per_source):
    if per_source is not None and per_source[1] > graph.n:
        name, k, default = per_source
        why = f"is more than the graph's {graph.n:,} vertices (a source has at most {graph.n:,} rows)"
        if k != default:
            raise OptionError(f"{name}={k:,} {why}; ask for {name} <= {graph.n:,}")
        _output.warn(f"{name}={k:,} (the default) {why}")
    return resolve_sources(graph, spec)


def graph_batch_job(
    name: str, source, sources, opts: dict, *, workdir, directed: bool, read_options, reorder=None, **batch
) -> Job:
    """``batch_job`` over the graph ``source``: its load stage (``load_stage``, reading it ``directed`` with
    ``read_options``, renumbered by ``reorder``) in ``workdir`` (default: ``default_workdir()``);
    ``batch`` holds ``batch_job``'s other keywords."""
    workdir = Path(workdir or default_workdir())
    read = {"directed": directed, **(read_options or {})}
    load, gtoken = load_stage(source, workdir=workdir, read_options=read, reorder=reorder)
    return batch_job(name, load, gtoken, sources, opts, workdir=workdir, **batch)


def _resumable(name, run_chunk, graph, ids, opts, path, token, jtoken) -> dict:
    done, damage = _output.finished(path, token)
    if done is not None:
        return {**done, "resumed": True}
    with in_task(name) as progress:
        summary = run_chunk(graph, ids, opts, path, progress=progress)
    _output.mark_finished(path, token, jtoken, summary)
    return {**summary, "resumed": False, "damage": damage}


def _finish(summarize, name, jtoken, graph, parts, out, opts, duplicates=0) -> BatchSummary:
    damaged = [p["damage"] for p in parts if p.get("damage")]
    if damaged:
        what = "1 part" if len(damaged) == 1 else f"{len(damaged)} parts"
        was = "was" if len(damaged) == 1 else "were"
        _output.warn(
            f"{what} finished by an earlier run had changed since and {was} computed again "
            f"({damaged[0]}{', ...' if len(damaged) > 1 else ''})"
        )
    parts = [{k: v for k, v in p.items() if k != "damage"} for p in parts]
    summary = summarize(graph, parts, out, opts)
    summary.resumed_parts = sum(bool(p.get("resumed")) for p in parts)
    summary.duplicate_sources = duplicates
    _output.finish(out, name, jtoken, [p["path"] for p in parts], summary.to_dict())
    return summary


def write_ranked(labels, vertices, values, counts, name: str, path) -> tuple:
    """Write rows (source, rank, vertex, ``name``) of per-source rankings to Parquet at ``path``, only the
    ``counts[i]`` real rows of source i (``operators._ranked``); return the first source with its top
    five (vertex, value) pairs, for job summaries."""
    import pyarrow as pa

    source, rank, vertex, value = long_rows(labels, vertices, values, counts)
    column = lambda a: a.tolist() if a.dtype == object else a  # noqa: E731
    table = pa.table(
        {
            "source": column(source),
            "rank": rank,
            "vertex": column(vertex),
            name: value.astype(np.float64),
        }
    )
    write_parquet(table, path)
    return first_rows(labels, vertices, values, counts)


def first_rows(labels, vertices, values, counts) -> tuple:
    """The first source with its top five real (vertex, value) pairs, for job summaries."""
    item = lambda v: v.item() if hasattr(v, "item") else v  # noqa: E731
    top = min(5, int(counts[0]))
    return item(labels[0]), [
        (item(v), float(p)) for v, p in zip(vertices[0][:top], values[0][:top], strict=True)
    ]
