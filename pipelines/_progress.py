"""Progress of a job by stage: tasks done / tasks of each key prefix (``load 1/1  ppr 12/40``).

Job keys are readable (``graphjobs-load-<token>``, ``ppr-<token>-<chunk>``), so ``dask.utils.key_split``
names the stage of every task. On a cluster the counts come from the scheduler's progress feed (as for
``distributed.progress``); on Dask's local scheduler from a callback. On a terminal one line, redrawn in
place; written to a file or a pipe (a log), a line every ``LOG_INTERVAL`` seconds and the last one.
"""

from __future__ import annotations

import sys
import time
from collections import Counter

from dask.callbacks import Callback
from dask.utils import format_time, key_split

LOG_INTERVAL = 10.0  # seconds between the lines written where the stream is not a terminal
# Dask's own tasks between the job's stages (an item taken out of a stage's tuple result, a collection's
# finalization): they are not stages a user ran, so the line leaves them out
INTERNAL = frozenset({"getitem", "finalize", "finalize-hlgfinalizecompute"})


def stage_line(done: dict, total: dict, elapsed: float, order=()) -> str:
    """``[elapsed] stage done/total ...``: the stages of ``order`` first, then the others of ``total``
    (Dask's internal tasks, ``INTERNAL``, not listed)."""
    names = [n for n in order if n in total] + [n for n in total if n not in order]
    names = [n for n in names if n not in INTERNAL]
    stages = "  ".join(f"{name} {done.get(name, 0)}/{total[name]}" for name in names)
    return f"[{format_time(elapsed)}] {stages}"


class _Line:
    """Redraws one line in place, at most every ``interval`` seconds, and always at the end; stages
    are listed in the order their first task finished (so, roughly, the order they run in). Where the
    stream is not a terminal, each line is written whole, the first after ``LOG_INTERVAL`` seconds."""

    def __init__(self, stream=None, interval: float = 0.1):
        self.stream = stream or sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.tty = bool(isatty and isatty())
        self.interval = interval if self.tty else max(interval, LOG_INTERVAL)
        self.t0, self.last, self.order = time.perf_counter(), "", []
        self.shown = 0.0 if self.tty else self.t0

    def draw(self, done: dict, total: dict, *, final: bool = False) -> None:
        now = time.perf_counter()
        self.order += [n for n, d in done.items() if d and n not in self.order]
        text = stage_line(done, total, now - self.t0, self.order)
        if final or (text != self.last and now - self.shown >= self.interval):
            if self.tty:
                print("\r" + text, end="\n" if final else "", file=self.stream, flush=True)
            else:
                print(text, file=self.stream, flush=True)
            self.last, self.shown = text, now


class LocalStages(Callback):
    """Stage progress on Dask's local schedulers: ``with LocalStages(): dask.compute(...)``."""

    def __init__(self, stream=None):
        super().__init__()
        self._stream = stream

    def _start_state(self, dsk, state):
        self.total = Counter(key_split(k) for k in dsk)
        self.done: Counter = Counter()
        self.line = _Line(self._stream)

    def _posttask(self, key, result, dsk, state, worker_id):
        self.done[key_split(key)] += 1
        self.line.draw(self.done, self.total)

    def _finish(self, dsk, state, errored):
        self.line.draw(self.done, self.total, final=True)


def cluster_stages(client, future, stream=None) -> None:
    """Stage progress of ``future`` (and everything it depends on) on ``client``'s cluster, until done."""
    from distributed.diagnostics.progressbar import MultiProgressBar

    line = _Line(stream)

    class Bars(MultiProgressBar):
        def _draw_bar(self, remaining, all, status, **kwargs):
            line.draw({k: all[k] - remaining.get(k, 0) for k in all}, all)

        def _draw_stop(self, remaining, all, status, **kwargs):
            line.draw({k: all[k] - remaining.get(k, 0) for k in all}, all, final=True)

    client.sync(Bars([future], client.scheduler.address, complete=True).listen)
