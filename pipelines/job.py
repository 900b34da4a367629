"""Jobs (a named Dask graph with a summary result) and running them with progress shown."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dask

from graphs.errors import LockedError, SchedulerUnreachableError
from graphs.store import process_alive

from ._output import INTERRUPTED
from ._progress import LocalStages, cluster_stages
from .summary import Summary


@dataclass(frozen=True)
class Job:
    """A job's Dask graph, ready to compute on any scheduler.

    ``result`` is a Delayed producing the job's summary (a ``pipelines.summary.Summary``);
    ``stages`` maps stage names to their Delayed objects (for ``dask.visualize`` or partial computation).
    ``out`` is the file or folder the job writes, locked while it runs (``output_lock``); ``check_out``
    (no arguments) refuses it, once the lock is held, when it holds what this job may not replace.
    """

    name: str
    result: Any
    workdir: Path
    stages: dict = field(default_factory=dict)
    out: Path | None = None
    check_out: Callable[[], None] | None = None

    def visualize(self, **kw):
        return self.result.visualize(**kw)

    def keys(self) -> list[str]:
        return list(dict(self.result.__dask_graph__()))


class WorkdirLockedError(LockedError):
    """Another job is running on the same workdir (its lock file names the process); a
    ``graphs.errors.LockedError``, so a user error."""


class OutputLockedError(LockedError):
    """Another job is writing the same output file or folder (its lock file names the process); a
    ``graphs.errors.LockedError``, so a user error."""


LOCK = ".graphjobs.lock"


@contextlib.contextmanager
def _lock_file(path: Path, job: str, busy):
    """Hold lock file ``path`` (created exclusively, holding this process's pid, host, job and start)
    until the block ends; ``busy(holder)`` is the error raised when a live process holds it. A lock left
    by a process that is gone (same host, pid not running) is taken over."""
    path.parent.mkdir(parents=True, exist_ok=True)
    since = time.strftime("%Y-%m-%d %H:%M:%S")
    me = {"pid": os.getpid(), "host": socket.gethostname(), "job": job, "since": since}
    for _ in range(20):
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
            raise busy(holder) from None
        with os.fdopen(fd, "w") as f:
            json.dump(me, f)
        break
    else:
        raise busy({"job": "another", "pid": "?", "host": "?", "since": "?"})
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


def _holder(holder: dict) -> str:
    return (
        f"the {holder.get('job')} job of process {holder.get('pid')} on {holder.get('host')} "
        f"(since {holder.get('since')})"
    )


def workdir_lock(workdir, job: str):
    """Hold ``workdir/.graphjobs.lock`` while a job runs; refuse if a live process holds it.

    A lock left by a process that is gone (same host, pid not running) is taken over.
    """
    path = Path(workdir) / LOCK

    def busy(holder):
        return WorkdirLockedError(
            f"workdir {Path(workdir).resolve()} is in use by {_holder(holder)}; wait for it to "
            f"finish, use another --workdir, or delete {path} if that process no longer runs"
        )

    return _lock_file(path, job, busy)


def output_lock_path(out) -> Path:
    """The lock file of output ``out`` (a file or a folder): ``.NAME.graphjobs.lock`` beside it."""
    out = Path(out).resolve()
    return out.parent / f".{out.name}{LOCK}"


def output_lock(out, job: str):
    """Hold the lock of output ``out`` while a job writes it, whatever the job's workdir: a second job
    on the same output is refused (``OutputLockedError``) rather than mixing its parts with ours."""
    path = output_lock_path(out)

    def busy(holder):
        return OutputLockedError(
            f"output {Path(out).resolve()} is being written by {_holder(holder)}; wait for it to "
            f"finish, use another --out, or delete {path} if that process no longer runs"
        )

    return _lock_file(path, job, busy)


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
    in Jupyter. On the local scheduler the line also shows what runs inside the long stages, with an ETA
    (``ppr 1/4 (sources 66/200, ETA 33s)``), and says when kernels compile (once); a cluster's workers
    report only their tasks (``pipelines._progress``).
    The job's workdir and its output are locked meanwhile: a second job on either raises
    ``WorkdirLockedError`` or ``OutputLockedError``.
    """
    with contextlib.ExitStack() as stack:
        if job.out is not None:
            stack.enter_context(output_lock(job.out, job.name))
            if job.check_out is not None:  # again, now that no other job can write it
                job.check_out()
        stack.enter_context(workdir_lock(job.workdir, job.name))
        return _run(job, client, progress)


@contextlib.contextmanager
def _scheduler_lost(client):
    """Turn distributed's errors of a lost scheduler (a cancelled future, a closed comm) into a
    ``SchedulerLostError`` naming its address; errors of the job's own tasks pass unchanged."""
    from asyncio import CancelledError

    from distributed.client import FutureCancelledError
    from distributed.comm.core import CommClosedError

    address = getattr(client.scheduler, "address", None) or "?"
    try:
        yield
    except (FutureCancelledError, CancelledError, CommClosedError, OSError) as exc:
        if isinstance(exc, OSError) and not isinstance(exc, CommClosedError) and client.status == "running":
            raise  # a file error of the job's own (it travels back as itself)
        if isinstance(exc, FutureCancelledError | CancelledError) and "connection" not in str(exc):
            if client.status == "running":
                raise
        raise SchedulerLostError(
            f"scheduler at {address} lost while the job ran ({type(exc).__name__}); re-run to resume "
            "(finished stages and chunks are kept)"
        ) from None


def _widgets() -> bool:
    """In a Jupyter kernel with ipywidgets: ``distributed.progress`` draws a bar per stage there."""
    from distributed.utils import is_kernel

    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return bool(is_kernel())


class SchedulerLostError(SchedulerUnreachableError):
    """The connection to the job's scheduler was lost while the job ran (the scheduler died, or the
    network failed); finished stages and chunks are kept, so a re-run resumes."""


def _cancel(client, future) -> None:
    """Cancel ``future`` and the tasks it waits for on the cluster (a worker's task running then sees it
    through ``_output.task_cancelled``); a client that can no longer reach its scheduler gives up at once:
    the scheduler releases a gone client's tasks too."""
    try:
        client.cancel([future], force=True)
    except Exception:  # an interrupt must not turn into another error
        pass


def _run(job: Job, client, progress: bool) -> Summary:
    INTERRUPTED.clear()  # an earlier run's interrupt ends none of this run's tasks
    client = client or _active_client()
    if client is not None:
        with _scheduler_lost(client):
            future = client.compute(job.result)
            try:
                if progress and _widgets():
                    from distributed import progress as show

                    show(future, notebook=True)
                elif progress:  # one text line of every stage's tasks done
                    cluster_stages(client, future)
                return future.result()
            except KeyboardInterrupt:  # and SIGTERM: the workers' running tasks end at their next report
                _cancel(client, future)
                raise
    ctx = contextlib.nullcontext()
    if progress:
        ctx = LocalStages()
    try:
        with ctx:
            (summary,) = dask.compute(job.result)
    except KeyboardInterrupt:  # and SIGTERM, raised as one: the tasks left running write nothing more
        INTERRUPTED.set()
        raise
    return summary
