"""Progress of a job by stage: tasks done / tasks of each key prefix (``load 1/1  ppr 12/40``), and
inside the stages that run long, their operators' own counts with an ETA. In a Jupyter kernel the line
is an output of the cell, redrawn in place under a bar of the tasks done (``_Cell``).

Job keys are readable (``graphjobs-load-<token>``, ``ppr-<token>-<chunk>``), so ``dask.utils.key_split``
names the stage of every task. On a cluster the counts come from the scheduler's progress feed (as for
``distributed.progress``); on Dask's local scheduler from a callback. On a terminal one line, redrawn in
place; written to a file or a pipe (a log), a line every ``LOG_INTERVAL`` seconds and the last one.

Inside a stage (Dask's local scheduler only): a task wraps its operator call in ``in_task(stage)``,
which hands the operator a ``progress(done, total, unit)`` callable (``operators._progress``), so the
line reads ``irw-index 0/1 (walks 1,200,000/4,000,000, ETA 25s)``, or ``(compiling kernels (once)...)``
while a first call compiles (written at once, where the stream is a log too). On a distributed cluster
the tasks run in the workers' processes: there only the scheduler's task counts are shown
(``cluster_stages``); in-task counts are not streamed back from workers.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import threading
import time
from collections import Counter
from typing import ClassVar

from dask.callbacks import Callback
from dask.utils import format_time, key_split

from operators._progress import COMPILE, share

from ._output import TaskInterrupted, task_cancelled

LOG_INTERVAL = 10.0  # seconds between the lines written where the stream is not a terminal
TTY_INTERVAL = 0.1  # seconds between the redraws of a terminal's line
# Dask's own tasks between the job's stages (an item taken out of a stage's tuple result, a collection's
# finalization): they are not stages a user ran, so the line leaves them out
INTERNAL = frozenset({"getitem", "finalize", "finalize-hlgfinalizecompute"})


def stage_line(done: dict, total: dict, elapsed: float, order=(), inside=None, finished=True) -> str:
    """``[elapsed] stage done/total ...``: the stages of ``order`` first, then those of ``inside``, then
    the others of ``total`` (Dask's internal tasks, ``INTERNAL``, not listed; nor, unless ``finished``,
    the stages whose tasks are all done); ``inside`` maps stages to what runs in them, written in
    parentheses after their counts."""
    inside = inside or {}
    first = [*order, *(n for n in inside if n not in order)]
    names = [n for n in first if n in total] + [n for n in total if n not in first]
    names = [n for n in names if n not in INTERNAL and (finished or done.get(n, 0) < total[n])]
    stages = "  ".join(
        f"{name} {done.get(name, 0)}/{total[name]}" + (f" ({inside[name]})" if inside.get(name) else "")
        for name in names
    )
    return f"[{format_time(elapsed)}] {stages}"


def eta(seconds: float) -> str:
    """A duration to come, to the second: ``25s``, ``4m05s``, ``2h10m``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class _Line:
    """Redraws one line in place, at most every ``interval`` seconds, and always at the end (or when
    ``force``d); stages are listed in the order their first task finished (so, roughly, the order they
    run in). Where the stream is not a terminal, each line is written whole, the first after
    ``LOG_INTERVAL`` seconds. ``inside`` (no arguments) gives ``stage_line``'s, built only for a line
    that is written. Not thread-safe: callers from several threads hold a lock."""

    def __init__(self, stream=None, interval: float | None = None):
        self.stream = stream or sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.tty = bool(isatty and isatty())
        interval = TTY_INTERVAL if interval is None else interval
        self.interval = interval if self.tty else max(interval, LOG_INTERVAL)
        self.t0, self.last, self.order = time.perf_counter(), "", []
        self.shown = 0.0 if self.tty else self.t0

    def draw(self, done: dict, total: dict, *, final: bool = False, force: bool = False, inside=None) -> None:
        now = time.perf_counter()
        self.order += [n for n, d in done.items() if d and n not in self.order]
        if not (final or force) and now - self.shown < self.interval:
            return
        inside = inside() if inside else None
        text = stage_line(done, total, now - self.t0, self.order, inside)
        if final or force or text != self.last:
            if self.tty:  # within the terminal's width (a wrapped line is not redrawn in place):
                width = max(shutil.get_terminal_size().columns - 1, 20)  # finished stages left out first
                if len(text) > width:
                    text = stage_line(done, total, now - self.t0, self.order, inside, finished=False)[:width]
            self.write(text, done, total, final)
            self.last, self.shown = text, now

    def write(self, text: str, done: dict, total: dict, final: bool) -> None:
        if self.tty:
            clear = "\x1b[K" if len(text) < len(self.last) else ""  # the rest of a longer line before
            print("\r" + text + clear, end="\n" if final else "", file=self.stream, flush=True)
        else:
            print(text, file=self.stream, flush=True)


class _Cell(_Line):
    """In a Jupyter kernel: the line as one output of the running cell, replaced in place (an IPython
    display handle; updates are messages, safe from the tasks' threads) under a bar of the job's tasks
    done, every ``TTY_INTERVAL`` seconds; a stored notebook keeps its last state, as HTML and as text."""

    def __init__(self):
        super().__init__(stream=sys.stderr)
        self.tty, self.interval, self.shown, self.handle = False, TTY_INTERVAL, 0.0, None

    def write(self, text: str, done: dict, total: dict, final: bool) -> None:
        from html import escape

        from IPython.display import display, update_display

        tasks = sum(t for n, t in total.items() if n not in INTERNAL)
        finished = sum(d for n, d in done.items() if n not in INTERNAL)
        html = (
            f'<progress value="{finished}" max="{max(tasks, 1)}" style="width:24em"></progress> '
            f"<code>{escape(text)}</code>"
        )
        data = {"text/plain": text, "text/html": html}
        if self.handle is None:
            self.handle = display(data, raw=True, display_id=True).display_id
        else:
            update_display(data, raw=True, display_id=self.handle)


def _in_kernel() -> bool:
    """Whether this process is a Jupyter kernel (its cells' output is where a person looks)."""
    from distributed.utils import is_kernel

    return bool(is_kernel())


class LocalStages(Callback):
    """Stage progress on Dask's local schedulers: ``with LocalStages(): dask.compute(...)``; tasks of
    the threaded scheduler add their operators' counts through ``in_task``."""

    running: ClassVar[list] = []  # the instances whose compute runs now, in this process (``in_task``)

    def __init__(self, stream=None):
        super().__init__()
        self._stream = stream
        self.lock = threading.Lock()  # the counts and the line: tasks report from their threads

    def _start_state(self, dsk, state):
        with self.lock:
            self.total = Counter(key_split(k) for k in dsk)
            self.done: Counter = Counter()
            self.line = _Cell() if self._stream is None and _in_kernel() else _Line(self._stream)
            self.started: dict = {}  # stage -> when its first task started
            self.slots: dict = {}  # (stage, thread) -> the latest (done, total, unit) of its task
            self.announced = False
        LocalStages.running.append(self)

    def _pretask(self, key, dsk, state):
        with self.lock:
            self.started.setdefault(key_split(key), time.perf_counter())

    def _posttask(self, key, result, dsk, state, worker_id):
        with self.lock:
            self.done[key_split(key)] += 1
            self.line.draw(self.done, self.total, inside=self._inside)

    def _finish(self, dsk, state, errored):
        with contextlib.suppress(ValueError):
            LocalStages.running.remove(self)
        with self.lock:
            self.slots.clear()
            self.line.draw(self.done, self.total, final=True)

    def report(self, slot: tuple, done: int, total: int, unit: str) -> None:
        """The task of ``slot`` (its stage, its thread) has done ``done`` of ``total`` ``unit``."""
        with self.lock:
            self.slots[slot] = (done, total, unit)
            first = unit == COMPILE and done < total and not self.announced
            self.announced |= first  # compilation is announced at once, and once
            self.line.draw(self.done, self.total, force=first, inside=self._inside)

    def forget(self, slot: tuple) -> None:
        with self.lock:
            self.slots.pop(slot, None)

    def _inside(self) -> dict:
        """What the running tasks of each stage report: ``unit done/total`` summed over them, with the
        stage's ETA (from the share of it done: finished tasks and their running ones' fractions)."""
        now, out = time.perf_counter(), {}
        for stage in {s for s, _ in self.slots}:
            counts = [c for (s, _), c in self.slots.items() if s == stage]
            if any(u == COMPILE and d < t for d, t, u in counts):
                out[stage] = "compiling kernels (once)..."
                continue
            counts = [c for c in counts if c[2] != COMPILE]
            units: dict = {}
            for d, t, u in counts:
                units[u] = (units.get(u, (0, 0))[0] + d, units.get(u, (0, 0))[1] + t)
            parts = [f"{u} {d:,}/{t:,}" for u, (d, t) in units.items()]
            done_share = (self.done[stage] + sum(share(*c) for c in counts)) / max(self.total[stage], 1)
            if parts and 0 < done_share < 1 and stage in self.started:
                parts.append(f"ETA {eta((now - self.started[stage]) * (1 - done_share) / done_share)}")
            out[stage] = ", ".join(parts)
        return out


@contextlib.contextmanager
def in_task(stage: str):
    """In a task of ``stage`` (its key's ``key_split``): a ``progress(done, total, unit)`` callable for
    the operator it runs (``operators._progress``). It draws the counts on the progress line of the job
    that runs on Dask's local scheduler in this process (``LocalStages``), where there is one (not where
    no progress was asked for, nor on a distributed worker: see the module's docstring), and it raises
    ``TaskInterrupted`` once that job is interrupted (``_output.task_cancelled``: on the local scheduler or
    on a cluster's worker): an operator that reports progress ends at its next report, so the process
    exits, or the worker's thread is free, then rather than when the task would end."""
    stages = LocalStages.running[-1] if LocalStages.running else None
    slot = (key_split(stage), threading.get_ident())

    def progress(done: int, total: int, unit: str) -> None:
        if task_cancelled():
            raise TaskInterrupted(f"{stage}: ended, the job was interrupted")
        if stages is not None:
            stages.report(slot, done, total, unit)

    try:
        yield progress
    finally:
        if stages is not None:
            stages.forget(slot)


def cluster_stages(client, future, stream=None) -> None:
    """Stage progress of ``future`` (and everything it depends on) on ``client``'s cluster, until done."""
    from distributed.diagnostics.progressbar import MultiProgressBar

    line = _Cell() if stream is None and _in_kernel() else _Line(stream)

    class Bars(MultiProgressBar):
        def _draw_bar(self, remaining, all, status, **kwargs):
            line.draw({k: all[k] - remaining.get(k, 0) for k in all}, all)

        def _draw_stop(self, remaining, all, status, **kwargs):
            line.draw({k: all[k] - remaining.get(k, 0) for k in all}, all, final=True)

    client.sync(Bars([future], client.scheduler.address, complete=True).listen)
