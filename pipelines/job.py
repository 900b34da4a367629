"""Jobs (a named Dask graph with a summary result) and running them with progress shown."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dask

from graphs.errors import LockedError
from graphs.store import process_alive

from ._progress import LocalStages, cluster_stages
from .summary import Summary


@dataclass(frozen=True)
class Job:
    """A job's Dask graph, ready to compute on any scheduler.

    ``result`` is a Delayed producing the job's summary (a ``pipelines.summary.Summary``);
    ``stages`` maps stage names to their Delayed objects (for ``dask.visualize`` or partial computation).
    """

    name: str
    result: Any
    workdir: Path
    stages: dict = field(default_factory=dict)

    def visualize(self, **kw):
        return self.result.visualize(**kw)

    def keys(self) -> list[str]:
        return list(dict(self.result.__dask_graph__()))


class WorkdirLockedError(LockedError):
    """Another job is running on the same workdir (its lock file names the process); a
    ``graphs.errors.LockedError``, so a user error."""


LOCK = ".graphjobs.lock"


@contextlib.contextmanager
def workdir_lock(workdir, job: str):
    """Hold ``workdir/.graphjobs.lock`` while a job runs; refuse if a live process holds it.

    A lock left by a process that is gone (same host, pid not running) is taken over.
    """
    path = Path(workdir) / LOCK
    path.parent.mkdir(parents=True, exist_ok=True)
    since = time.strftime("%Y-%m-%d %H:%M:%S")
    me = {"pid": os.getpid(), "host": socket.gethostname(), "job": job, "since": since}
    for _ in range(3):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                holder = json.loads(path.read_text())
            except (OSError, ValueError):  # being written right now, or removed meanwhile
                time.sleep(0.05)
                continue
            if holder.get("host") == me["host"] and not process_alive(int(holder.get("pid", -1))):
                path.unlink(missing_ok=True)  # its process is gone: a stale lock
                continue
            raise WorkdirLockedError(
                f"workdir {Path(workdir).resolve()} is in use by the {holder.get('job')} job of process "
                f"{holder.get('pid')} on {holder.get('host')} (since {holder.get('since')}); wait for it to "
                f"finish, use another --workdir, or delete {path} if that process no longer runs"
            ) from None
        with os.fdopen(fd, "w") as f:
            json.dump(me, f)
        break
    else:
        raise WorkdirLockedError(f"could not take the lock {path}; try again")
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


def _active_client():
    try:
        from distributed import default_client

        return default_client()
    except (ImportError, ValueError):
        return None


def run(job: Job, client=None, *, progress: bool = True) -> Summary:
    """Compute ``job`` and return its summary (a ``Summary`` of the job's kind).

    With ``client`` (or an active ``distributed.Client``) the graph runs on that cluster, otherwise on
    Dask's default local scheduler. ``progress`` shows the tasks done of every stage on one line
    (``[3.2s] graphjobs-load 1/1  ppr 12/40 ...``) on standard error, or ``distributed.progress``'s bars
    in Jupyter.
    The job's workdir is locked meanwhile: a second job on it raises ``WorkdirLockedError``.
    """
    with workdir_lock(job.workdir, job.name):
        return _run(job, client, progress)


def _widgets() -> bool:
    """In a Jupyter kernel with ipywidgets: ``distributed.progress`` draws a bar per stage there."""
    from distributed.utils import is_kernel

    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return bool(is_kernel())


def _run(job: Job, client, progress: bool) -> Summary:
    client = client or _active_client()
    if client is not None:
        future = client.compute(job.result)
        if progress and _widgets():
            from distributed import progress as show

            show(future, notebook=True)
        elif progress:  # one text line of every stage's tasks done
            cluster_stages(client, future)
        return future.result()
    ctx = contextlib.nullcontext()
    if progress:
        ctx = LocalStages()
    with ctx:
        (summary,) = dask.compute(job.result)
    return summary
