"""The sources of a batch job: labels given in Python, N random vertices (``RandomSources(N)``), or labels
as text (a file of one label per line, or the command line) typed only once the graph's own labels are known.

Text has no types: "17" is the integer 17 in a graph of integer labels and the string "17" in a graph of
string labels. Guessing before the graph is loaded would lose one of them, so a ``SourceText`` keeps the
lines and their numbers, and ``resolve_sources`` (a task, where the graph is) reads them; a label that is
not in the graph, or cannot be one of its labels, is an error naming the file and the line.
"""

from __future__ import annotations

import hashlib
import math
import os
import sys
from typing import TYPE_CHECKING

import numpy as np

from graphs import GraphFormatError, LabelError
from graphs.errors import OptionError
from operators._checks import check_count

if TYPE_CHECKING:
    from .stages import GraphHandle


class RandomSources:
    """``count`` distinct vertices drawn uniformly by the job's ``seed`` (``--random N`` on the command line,
    ``{random: N}`` in a job file), among all vertices or, with ``among='out'`` / ``'in'``, among those
    with at least one out-edge / in-edge (``--random-among``, ``{random: N, among: out}``): about half of
    an R-MAT graph's vertices have no edge at all, and their PPR or SimRank answers are trivial."""

    AMONG = ("all", "out", "in")

    def __init__(self, count: int, *, among: str = "all"):
        self.count = check_count("the number of random sources", count)
        if among not in self.AMONG:
            raise OptionError(f"among must be one of {', '.join(map(repr, self.AMONG))}, got {among!r}")
        self.among = among

    def __repr__(self) -> str:
        return (
            f"RandomSources({self.count})"
            if self.among == "all"
            else f"RandomSources({self.count}, among={self.among!r})"
        )


class SourceText:
    """Source labels as text: ``items``, where they came from (``origin``: a file's path, or e.g.
    "--source") and, from a file, their 1-based ``lines``."""

    def __init__(self, items, *, origin: str = "<sources>", lines=None):
        self.items = [str(x).strip() for x in items]
        self.origin = origin
        self.lines = list(lines) if lines is not None else [None] * len(self.items)

    @classmethod
    def read(cls, path: str) -> SourceText:
        """One label per line; blank lines and lines starting with ``#`` are skipped. ``"-"`` reads
        standard input; a pipe (``<(...)`` in a shell) is read like a file."""
        if str(path) == "-":
            return cls._parse(sys.stdin, "<stdin>")
        if os.path.isdir(path):
            raise IsADirectoryError(f"{path}: a directory (expected a file of source labels, one per line)")
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path}: no such file (expected source labels, one per line)")
        with open(path) as f:
            return cls._parse(f, str(path))

    @classmethod
    def _parse(cls, f, origin: str) -> SourceText:
        items, lines = [], []
        for number, line in enumerate(f, 1):
            text = line.strip()
            if text and not text.startswith("#"):
                items.append(text)
                lines.append(number)
        if not items:
            raise GraphFormatError(origin, None, "expected source labels, one per line; found none")
        return cls(items, origin=origin, lines=lines)

    def __len__(self) -> int:
        return len(self.items)

    def __dask_tokenize__(self):
        digest = hashlib.sha1("\n".join(self.items).encode()).hexdigest()
        return ("graphjobs-source-text", len(self.items), digest)  # the labels, not where they came from

    def error(self, i: int, expected: str) -> GraphFormatError:
        return GraphFormatError(self.origin, self.lines[i], expected)

    def labels_for(self, kind: str) -> np.ndarray:
        """The labels typed as a graph whose labels have dtype kind ``kind`` holds them."""
        if kind in "iu":
            try:
                return np.array(self.items, dtype=str).astype(np.int64)
            except (ValueError, OverflowError):  # find the first bad line
                for i, text in enumerate(self.items):
                    try:
                        np.int64(int(text))
                    except (ValueError, OverflowError):
                        raise self.error(i, f"expected an integer vertex label, got {text!r}") from None
                raise
        if kind == "f":
            values = [_float(t) for t in self.items]
            bad = next((i for i, v in enumerate(values) if v is None), None)
            if bad is not None:
                raise self.error(bad, f"expected a number (the graph's labels are), got {self.items[bad]!r}")
            return np.array(values)
        return np.array(self.items, dtype=object)


def _float(text: str):
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def distinct_sources(sources) -> tuple[object, int]:
    """``sources`` with each label only at its first place, and how many repeats were dropped (labels in
    Python, or a ``SourceText``; random sources are distinct already)."""
    if isinstance(sources, SourceText):
        first = _first_places(sources.items)
        kept = SourceText([sources.items[i] for i in first], origin=sources.origin)
        kept.lines = [sources.lines[i] for i in first]
        return kept, len(sources) - len(first)
    if isinstance(sources, RandomSources | int | np.integer):
        return sources, 0
    labels = np.atleast_1d(np.asarray(sources))
    if labels.ndim != 1:
        return sources, 0
    first = _first_places(labels.tolist())
    return (labels[first] if len(first) < labels.size else sources), labels.size - len(first)


def _first_places(items: list) -> list[int]:
    seen: dict = {}
    for i, x in enumerate(items):
        seen.setdefault(x, i)
    return sorted(seen.values())


def sources_spec(sources, seed: int) -> tuple[tuple, int]:
    """A hashable spec of a batch of sources (labels, a ``SourceText`` or ``RandomSources``) and its size.

    A bare integer is refused as ambiguous: one vertex to ``operators``, N random vertices to earlier jobs.
    """
    if isinstance(sources, int | np.integer):
        v = int(sources)
        raise OptionError(
            f"sources={v} is ambiguous: pass RandomSources({v}) for {v} random vertices,"
            f" or [{v}] for the vertex labelled {v}"
        )
    if isinstance(sources, RandomSources):
        count, spec = sources.count, ("random", sources.count, seed)
        if sources.among != "all":  # earlier jobs' tokens (and their finished chunks) stay as they were
            spec += (sources.among,)
    elif isinstance(sources, SourceText):
        count, spec = len(sources), ("text", sources)
    else:
        spec = ("labels", np.atleast_1d(np.asarray(sources)))  # one label is a batch of one
        count = spec[1].size
    if count < 1:
        raise OptionError("sources must name at least one vertex")
    return spec, count


def resolve_sources(graph: GraphHandle, spec) -> np.ndarray:
    """Internal ids of the sources; an error naming missing labels (and their lines) before any query runs."""
    g = graph.get("cpu")
    if spec[0] == "random":
        count, seed, among = *spec[1:3], (spec[3] if len(spec) > 3 else "all")
        if among == "all":
            pool, what = g.n, "vertices"
        else:
            deg = g.out_degree() if among == "out" else g.in_degree()
            pool, what = np.flatnonzero(deg > 0), f"vertices with {among}-edges"
        size = pool if among == "all" else pool.size
        if count > size:
            raise OptionError(f"{count} random sources asked for, but the graph has only {size} {what}")
        return np.random.default_rng(seed).choice(pool, size=count, replace=False)
    if spec[0] == "labels":
        return g.internal_ids(spec[1])
    text = spec[1]
    labels = text.labels_for(g.ids.dtype.kind if g.has_labels else "i")
    try:
        return g.internal_ids(labels)
    except LabelError as exc:
        values = labels.tolist()
        first = exc.labels[0] if exc.labels else None
        i = next((j for j, x in enumerate(values) if x == first), 0)
        others = f" ({exc.count} of the {len(text)} labels are not)" if exc.count > 1 else ""
        raise text.error(i, f"vertex {values[i]!r} is not in the graph{others}") from None
