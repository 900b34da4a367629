"""The errors a user can act on: malformed input, bad options, missing dependencies, a busy workdir.

Every one of them derives from ``UserError``, so a front end (the ``graphjobs`` command line) can print
its one-line message and stop, while any other exception is a bug and keeps its traceback. Each also keeps
the built-in base a caller would expect (``ValueError`` for a bad value, ``KeyError`` for a missing label,
``ImportError`` for a missing package ...), so ``except ValueError`` still catches a bad option. All of
them pickle with their attributes: errors raised on Dask workers travel back to the client that way.
"""

from __future__ import annotations

import os


class UserError(Exception):
    """An error the user can act on (fix an input, an option, install a package, wait for a lock).

    ``str()`` is a one-line message that says what is wrong and, where it can, what to do instead.
    """

    def __reduce__(self):
        # rebuilt from its arguments (and attributes), not by the built-in base's __new__: a subclass of
        # MemoryError cannot be made that way, and Dask (through tblib) pickles errors of its workers
        return (type(self), self.args, self.__dict__ or None)


class OptionError(UserError, ValueError):
    """An option (a keyword argument, a command-line option, a job spec's parameter) has a bad value."""


class MissingDependencyError(UserError, ImportError):
    """An optional package a code path needs is not installed; the message says how to install it."""


class DeviceError(UserError, RuntimeError):
    """The device asked for cannot be used here (e.g. ``device='gpu'`` with no visible GPU)."""


class LockedError(UserError, RuntimeError):
    """A resource another process holds (a work folder in use by another job)."""


class SchedulerUnreachableError(UserError, OSError):
    """No Dask scheduler answered at the address given; the message names it and what to check."""


class MemoryLimitError(UserError, MemoryError):
    """A working set does not fit in the memory of its device; the message says what to change."""


def size_text(nbytes: float) -> str:
    """Bytes as a person reads them: GiB (two decimals) from 50 MiB, else MiB or KiB (one decimal)."""
    if nbytes >= 50 * 2**20:
        return f"{nbytes / 2**30:.2f} GiB"
    return f"{nbytes / 2**20:.1f} MiB" if nbytes >= 2**20 else f"{nbytes / 2**10:.1f} KiB"


class InsufficientMemoryError(MemoryLimitError):
    """A working set would not fit in the memory of its device; raised before allocating.

    Attributes: ``what`` needs ``needed`` bytes where ``available`` are free.
    """

    def __init__(self, what: str, needed: int, available: int, hint: str = ""):
        self.what, self.needed, self.available, self.hint = what, needed, available, hint
        super().__init__(
            f"{what} needs about {size_text(needed)} but only {size_text(available)} are free"
            + (f"; {hint}" if hint else "")
        )

    def __reduce__(self):
        return (type(self), (self.what, self.needed, self.available, self.hint))


class GraphFormatError(UserError, ValueError):
    """Bad input (an edge list, a list of source labels): names the file, the line (1-based, when known)
    and what was expected.

    Attributes ``path``, ``line`` and ``expected`` hold the parts for programs; ``str()`` is the
    one-line message a person reads, e.g. ``edges.txt, line 7: expected an integer vertex id in
    column 2, got 'x17'``.
    """

    def __init__(self, path: str | os.PathLike | None, line: int | None, expected: str):
        self.path = None if path is None else os.fspath(path)
        self.line = line
        self.expected = expected
        where = self.path if self.path is not None else "<arrays>"
        if line is not None:
            where = f"{where}, line {line}"
        super().__init__(f"{where}: {expected}")

    def __reduce__(self):  # survive pickling (errors raised on Dask workers travel back this way)
        return (type(self), (self.path, self.line, self.expected))


class LabelError(UserError, KeyError):
    """Vertex labels a graph does not have (or that cannot be labels of it): ``labels`` holds the first
    few, ``count`` how many there are, ``str()`` the one-line message. A KeyError, so ``except KeyError``
    still catches it."""

    def __init__(self, message: str, labels=(), count: int | None = None):
        super().__init__(message)
        self.labels = list(labels)
        self.count = len(self.labels) if count is None else int(count)

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])

    def __reduce__(self):
        return (type(self), (self.args[0], self.labels, self.count))


class IntegrityError(GraphFormatError):
    """A saved artifact (a graph, a PPR index, a job's cached stage or output part) is not what was
    written: a checksum differs, a file is missing or damaged, or its values break the structure it must
    have. Names the file and what was expected; a ``GraphFormatError``, so ``except ValueError`` still
    catches it."""
