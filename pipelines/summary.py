"""The result of every job: a ``Summary`` dataclass per job, with its human text and its JSON document.

``pipelines.run(job)`` returns one. Its fields are typed attributes (``s.n``, ``s.queries``); ``s["n"]``
reads the same attribute, for code written against the dicts jobs returned before. ``lines(seconds=...)``
gives the lines the command line prints, ``to_dict()`` a plain dict (the job's name under ``"job"``, then
every field), ``to_json()`` that dict as one JSON document.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from graphs.errors import size_text


def _plain(v):
    return v.item() if hasattr(v, "item") else str(v)


@dataclass(kw_only=True)
class Summary:
    """What a job did: the graph's size and the job's own fields (see the subclasses)."""

    job: ClassVar[str] = ""
    n: int
    m: int

    def __getitem__(self, key: str) -> Any:
        """``s[key]``: the field ``key`` (or the job's name for ``"job"``); KeyError for any other key."""
        if key == "job" or key in self._names():
            return getattr(self, key)
        raise KeyError(key)

    @classmethod
    def _names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    def to_dict(self) -> dict:
        """``{"job": name, field: value, ...}``, values as they are (not copied)."""
        return {"job": self.job, **{name: getattr(self, name) for name in self._names()}}

    def to_json(self) -> str:
        """The summary as one JSON document (NumPy scalars as numbers, other objects as strings)."""
        return json.dumps(self.to_dict(), default=_plain, indent=1)

    def lines(self, *, seconds: float) -> list[str]:
        """The lines a person reads, for a run that took ``seconds`` of wall time."""
        raise NotImplementedError


def job_memory(records: list) -> dict | None:
    """The device memory estimate of a batch job from its chunks' records (``stages.chunk_memory``): the
    largest, plus ``per_chunk_bytes`` for each further chunk that ran at the same time on one worker
    (counted as the distinct threads that ran chunks there: ``concurrent_chunks``); None without any."""
    if not records:
        return None
    top = max(records, key=lambda record: record["estimate_bytes"])
    threads: dict = {}
    for record in records:
        threads.setdefault(record.get("worker"), set()).add(record.get("thread"))
    at_once = max(len(t) for t in threads.values())
    extra = (at_once - 1) * int(top.get("per_chunk_bytes", 0))
    return {**top, "estimate_bytes": top["estimate_bytes"] + extra, "concurrent_chunks": at_once}


def memory_line(memory: dict) -> str:
    """A job's device memory estimate as a person reads it."""
    return (
        f"memory: estimated {size_text(memory['estimate_bytes'])} per {memory['device']} worker, "
        f"{size_text(memory['free_bytes'])} free"
    )


@dataclass(kw_only=True)
class PageRankSummary(Summary):
    """Global PageRank: ``out`` (Parquet file), the ``top`` (vertex, pagerank) pairs, the stage's
    ``pagerank_seconds``, the ``device``, what was ``cached`` ({"pagerank": bool, "output": bool}) and the
    ``memory`` plan ({"partitions", "estimate_bytes", "free_bytes", "device"}, or None)."""

    job: ClassVar[str] = "pagerank"
    out: str
    top: list
    pagerank_seconds: float
    device: str
    cached: dict
    memory: dict | None = None

    def lines(self, *, seconds: float) -> list[str]:
        stage = "found in the workdir" if self.cached.get("pagerank") else f"{self.pagerank_seconds:.3f} s"
        text = [
            "",
            f"{self.job}: n={self.n:,} vertices, m={self.m:,} edges, device={self.device}, {seconds:.2f} s "
            f"(PageRank {stage})",
            f"{'rank':>4}  {'vertex':>14}  {'pagerank':>12}",
        ]
        text += [f"{i:>4}  {v!s:>14}  {score:>12.6g}" for i, (v, score) in enumerate(self.top, start=1)]
        if self.memory:
            text.append(memory_line(self.memory) + f": {self.memory['partitions']} partition(s)")
        text.append(f"written: {self.out}")
        return text


@dataclass(kw_only=True)
class IndexSummary(Summary):
    """The kPAR index: its ``folder`` and manifest (``graph``, ``graph_token``, ``index``, ``directed``,
    ``weighted``), the build's counts (``walks``, ``base_walks``, ``boosted``, ``high``, ``irw_pairs``),
    ``seconds`` by step, the vertex ``order``, ``delta_min``, ``build_seconds`` and the build's ``memory``
    estimate (``operators._gpu.memory``; None for an index built by an earlier version)."""

    job: ClassVar[str] = "ppr-index"
    folder: str
    graph: str
    graph_token: str
    index: str
    directed: bool
    weighted: bool
    walks: int
    high: int
    irw_pairs: int
    delta_min: float
    build_seconds: float
    base_walks: int | None = None
    boosted: int | None = None
    seconds: dict = field(default_factory=dict)
    order: str | None = None
    memory: dict | None = None

    @property
    def out(self) -> str:
        return self.folder

    def lines(self, *, seconds: float) -> list[str]:
        return [
            "",
            f"index: n={self.n:,} vertices, m={self.m:,} edges, {self.walks:,} walks, "
            f"{self.irw_pairs:,} IRW pairs, |H|={self.high}, delta_min={self.delta_min:.3g}, {seconds:.2f} s",
            *([memory_line(self.memory)] if self.memory else []),
            f"written: {self.folder}",
        ]


@dataclass(kw_only=True)
class BatchSummary(Summary):
    """A job over a batch of sources: ``out`` (folder of Parquet parts), ``queries``, ``parts``,
    ``query_seconds_mean``, the ``device``, the ``first`` source's (source, [(vertex, value), ...]),
    ``resumed_parts`` (parts an earlier run had finished), ``sources_short`` (sources with fewer than k
    rows: only vertices of positive value are listed), ``compile_seconds`` (the workers' one-time
    compilation, in none of the per-source seconds), ``duplicate_sources`` (sources listed again,
    answered once) and ``memory``, the largest device memory estimate of a chunk (GPU jobs whose
    operator has one: ``operators._gpu.memory``), or None."""

    out: str
    queries: int
    parts: int
    query_seconds_mean: float
    device: str
    first: tuple | list | None = None
    resumed_parts: int = 0
    sources_short: int = 0
    compile_seconds: float = 0.0
    duplicate_sources: int = 0
    memory: dict | None = None

    @classmethod
    def from_parts(cls, graph, parts: list, out: str, device: str, **fields):
        """The summary of the chunks' records ``parts`` (each with ``queries``, ``seconds``, ``device``,
        ``first`` and, when written by this version, ``short`` and ``compile_seconds``) of a job on
        ``graph``, with the job's own ``fields``; ``device`` stands when no chunk ran."""
        queries = sum(p["queries"] for p in parts)
        return cls(
            out=out,
            n=graph.n,
            m=graph.m,
            queries=queries,
            parts=len(parts),
            query_seconds_mean=sum(p["seconds"] for p in parts) / max(queries, 1),
            sources_short=sum(p.get("short", 0) for p in parts),
            compile_seconds=sum(p.get("compile_seconds", 0.0) for p in parts),
            device=parts[0]["device"] if parts else device,
            first=parts[0]["first"] if parts else None,
            memory=job_memory([p["memory"] for p in parts if p.get("memory")]),
            **fields,
        )

    def describe(self) -> str:
        """The job's own part of the summary line (after the time per source)."""
        return ""

    def lines(self, *, seconds: float) -> list[str]:
        text = [
            "",
            f"{self.job}: {self.queries:,} sources, n={self.n:,}, m={self.m:,}, device={self.device}, "
            f"{seconds:.2f} s ({1e3 * self.query_seconds_mean:.2f} ms per source{self.describe()})",
        ]
        if self.first is not None:
            src, top = self.first
            shown = ", ".join(f"{v} ({p:.4g})" for v, p in top if p > 0)
            text.append(f"first source {src}: {shown or 'no vertex of positive score'}")
        if self.duplicate_sources:
            text.append(f"{self.duplicate_sources:,} repeated sources dropped (each source is answered once)")
        if self.sources_short:
            text.append(
                f"{self.sources_short:,} sources have fewer than k rows (fewer vertices of positive score)"
            )
        if self.compile_seconds:
            text.append(f"one-time compilation: {self.compile_seconds:.2f} s (not in the per-source times)")
        if self.memory:
            text.append(memory_line(self.memory))
        resumed = f", {self.resumed_parts} of them finished by an earlier run" if self.resumed_parts else ""
        text.append(f"written: {self.out} ({self.parts} parts{resumed})")
        return text


@dataclass(kw_only=True)
class PPRSummary(BatchSummary):
    """Personalized PageRank of a batch: the options (``topk``, ``method``, ``alpha``, ``tol``, ``seed``,
    ``block``), ``iterations_mean``, the push/pull ``models_first`` of the first source and
    ``l1_bound_max``, the largest certified L1 error of a source's PPR vector (None for Monte Carlo)."""

    job: ClassVar[str] = "ppr"
    topk: int
    method: str
    alpha: float
    tol: float
    seed: int
    block: int | None = None
    iterations_mean: float | None = None
    models_first: str | None = None
    l1_bound_max: float | None = None

    def describe(self) -> str:
        bound = "" if self.l1_bound_max is None else f", L1 error <= {self.l1_bound_max:.3g} (certified)"
        return f", method={self.method}{bound}, the first source's steps: {steps(self.models_first)}"


STEP_NAMES = {
    "P": ("push", "pushes"),
    "L": ("pull", "pulls"),
    "Q": ("queue pass", "queue passes"),
    "S": ("sweep", "sweeps"),
}


def steps(models: str | None) -> str:
    """A solver's step letters (``info["models"]``: P push, L pull, Q PowerPush queue pass, S sweep) in
    words, runs counted: "PPPLL" -> "3 pushes, 2 pulls"."""
    if not models:
        return "none recorded"
    runs = []
    for letter, run in itertools.groupby(models):
        one, many = STEP_NAMES.get(letter, (letter, letter))
        count = len(list(run))
        runs.append(f"{count} {one if count == 1 else many}")
    return ", ".join(runs)


@dataclass(kw_only=True)
class TopkSummary(BatchSummary):
    """Top-k PPR queries on an index: ``k``, ``latency_seconds_mean`` (from a query's first round),
    ``without_rounds``, the Monte-Carlo ``fallback`` and ``exact`` counts, ``refine`` and ``refined``."""

    job: ClassVar[str] = "topk-ppr"
    k: int
    latency_seconds_mean: float
    without_rounds: int
    fallback: int
    exact: int
    refine: bool
    refined: int

    def describe(self) -> str:
        return (
            f", k={self.k}, {1e3 * self.latency_seconds_mean:.2f} ms a query from its first round, "
            f"{self.fallback} Monte-Carlo fallbacks, {self.exact} exact ({self.without_rounds} before any "
            "round)" + (f", {self.refined} refined at the k-th value" if self.refine else "")
        )


@dataclass(kw_only=True)
class SimRankSummary(BatchSummary):
    """Single-source SimRank of a batch: the options ``k``, ``c``, ``epsilon``, ``clip``, ``samples``,
    ``seed``."""

    job: ClassVar[str] = "simrank"
    k: int
    c: float
    epsilon: float
    clip: bool
    samples: Any
    seed: int

    def describe(self) -> str:
        return f", k={self.k}, epsilon={self.epsilon:g}, samples={self.samples}"


@dataclass(kw_only=True)
class InfluenceSummary(Summary):
    """Influence maximization: ``out`` (CSV), the ``seeds`` with their ``rounds`` and ``gains``, the RR
    estimate ``spread``, ``theta``, ``lower_bound``, ``rr_sets``, ``rr_size``, ``theta_capped``,
    ``seconds`` by step, ``device``, ``workers``, the simulated ``mc_spread`` ({"mean", "stderr",
    "n_sim"}, or None) and the largest of IMM's sampling phases' ``memory`` estimates (None on a cluster)."""

    job: ClassVar[str] = "influence"
    out: str
    seeds: list
    rounds: list
    gains: list
    spread: float
    theta: int
    lower_bound: float
    rr_sets: int
    rr_size: int
    theta_capped: bool
    seconds: dict
    device: str
    workers: int
    mc_spread: dict | None = None
    memory: dict | None = None

    def lines(self, *, seconds: float) -> list[str]:
        mc = self.mc_spread
        check = f", simulated {mc['mean']:.1f} +- {mc['stderr']:.1f} ({mc['n_sim']:,} runs)" if mc else ""
        more = " ..." if len(self.seeds) > 10 else ""
        return [
            "",
            f"influence: n={self.n:,}, m={self.m:,}, device={self.device}, {seconds:.2f} s "
            f"(IMM {self.seconds['total']:.3f} s, theta={self.theta:,} RR samples"
            f"{', capped' if self.theta_capped else ''})",
            f"spread: RR estimate {self.spread:.1f}{check}",
            "seeds: " + ", ".join(str(v) for v in self.seeds[:10]) + more,
            *([memory_line(self.memory)] if self.memory else []),
            f"written: {self.out}",
        ]


@dataclass(kw_only=True)
class DemoRun:
    """One job of the demo: its ``name``, the ``title`` shown before it, its ``summary`` and wall
    ``seconds``."""

    name: str
    title: str
    summary: Summary
    seconds: float

    def lines(self) -> list[str]:
        return ["", f"== {self.title}", *self.summary.lines(seconds=self.seconds)]


@dataclass(kw_only=True)
class DemoSummary:
    """The demo: its ``runs`` in order and, when the cluster is kept up, its ``dashboard`` address."""

    job: ClassVar[str] = "demo"
    runs: list[DemoRun] = field(default_factory=list)
    dashboard: str = ""

    def lines(self) -> list[str]:
        kept = [f"dashboard: {self.dashboard}"] if self.dashboard else []
        return [line for run in self.runs for line in run.lines()] + ["", *kept]

    def to_dict(self) -> dict:
        runs = [{"title": r.title, "seconds": r.seconds, "summary": r.summary.to_dict()} for r in self.runs]
        return {"job": self.job, "runs": runs, "dashboard": self.dashboard}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), default=_plain, indent=1)
