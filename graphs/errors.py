"""The errors raised for malformed graph input and for labels a graph does not have."""

from __future__ import annotations

import os


class GraphFormatError(ValueError):
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


class LabelError(KeyError):
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
