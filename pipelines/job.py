"""Jobs (a named Dask graph with a summary result) and running them with progress shown."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dask


@dataclass(frozen=True)
class Job:
    """A job's Dask graph, ready to compute on any scheduler.

    ``result`` is a Delayed producing the job's summary (a dict); ``stages`` maps stage names to
    their Delayed objects (for ``dask.visualize`` or partial computation).
    """

    name: str
    result: Any
    workdir: Path
    stages: dict = field(default_factory=dict)

    def visualize(self, **kw):
        return self.result.visualize(**kw)

    def keys(self) -> list[str]:
        return list(dict(self.result.__dask_graph__()))


def _active_client():
    try:
        from distributed import default_client

        return default_client()
    except (ImportError, ValueError):
        return None


def run(job: Job, client=None, *, progress: bool = True) -> dict:
    """Compute ``job`` and return its summary.

    With ``client`` (or an active ``distributed.Client``) the graph runs on that cluster with
    ``distributed.progress``; otherwise on Dask's default local scheduler with a ProgressBar.
    """
    client = client or _active_client()
    if client is not None:
        future = client.compute(job.result)
        if progress:
            from distributed import progress as show

            show(future)
            print(flush=True)
        return future.result()
    ctx = contextlib.nullcontext()
    if progress:
        from dask.diagnostics import ProgressBar

        ctx = ProgressBar()
    with ctx:
        (summary,) = dask.compute(job.result)
    return summary
