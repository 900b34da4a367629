"""Line-level view of edge-list text files: sniffing the layout and naming the bad line.

The fast readers (pyarrow, pandas, cuDF) report *what* failed but not *where*; these helpers
re-read the file line by line only when something failed, to name the line and what was expected.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import io
import math
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from .errors import GraphFormatError, OptionError


def open_text(path: str) -> io.TextIOBase:
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8-sig", errors="replace")
    if path.endswith(".bz2"):
        return bz2.open(path, "rt", encoding="utf-8-sig", errors="replace")
    return open(path, encoding="utf-8-sig", errors="replace")


@dataclass(frozen=True)
class Layout:
    """What the first lines of a text file say about the rest."""

    skip: int  # leading comment/blank lines
    delimiter: str | None  # None: runs of whitespace
    header: list[str] | None  # column names when the first data line is a header
    string_ids: bool  # first data line holds non-numeric ids
    ragged: bool  # whitespace runs or leading spaces: pyarrow cannot split this
    first: list[str] | None  # fields of the first data line


def split(line: str, delimiter: str | None) -> list[str]:
    line = line.rstrip("\r\n")
    return line.split() if delimiter is None else line.split(delimiter)


@contextlib.contextmanager
def decompression_errors(path):
    """A truncated, damaged or mislabelled .gz / .bz2 file: a GraphFormatError naming it, not the
    EOFError, OSError or zlib.error of whichever reader met it first."""
    kind = {".gz": "gzip", ".bz2": "bzip2"}.get(os.path.splitext(str(path).lower())[1])
    try:
        yield
    except (FileNotFoundError, PermissionError, IsADirectoryError):
        raise
    except (EOFError, OSError, zlib.error) as exc:
        if kind is None:
            raise
        raise GraphFormatError(
            path,
            None,
            f"expected {kind}-compressed text, but it does not decompress ({exc}): truncated or damaged?",
        ) from exc


def is_int(s: str) -> bool:
    s = s.strip()
    return bool(s) and (s.isdigit() or (s[0] in "+-" and s[1:].isdigit()))


def is_float(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def _is_skipped(line: str, comment: str | None) -> bool:
    s = line.strip()
    return not s or (comment is not None and s.startswith(comment))


def sniff(path: str, *, comment, delimiter, header, id_cols, sample_lines: int = 200) -> Layout:
    lines: list[str] = []
    with open_text(path) as f:
        for line in f:
            lines.append(line)
            if len(lines) >= sample_lines:
                break
    skip = 0
    while skip < len(lines) and _is_skipped(lines[skip], comment):
        skip += 1
    data = [ln for ln in lines[skip:] if not _is_skipped(ln, comment)]
    if not data:
        return Layout(skip, delimiter, None, False, False, None)
    if delimiter is None:
        first = data[0].rstrip("\r\n")
        delimiter = "\t" if "\t" in first else ("," if path.endswith((".csv", ".csv.gz")) else " ")
    ragged = delimiter in (" ", "\t") and any(_ragged(ln.rstrip("\r\n"), delimiter) for ln in data)
    tokens = split(data[0], None if ragged else delimiter)
    names = None
    named = any(isinstance(c, str) for c in id_cols)
    rows = [split(ln, None if ragged else delimiter) for ln in data[1:]]
    ids = [c for c in id_cols if isinstance(c, int)]
    # a header names every column: one numeric field makes the line data ('a 1', 'a b 0.5'), and so does
    # a line with fewer fields than the id columns need ('1,2' above space-separated lines)
    looks_named = all(not is_float(t) for t in tokens) and len(tokens) > max(ids, default=1)
    next_numeric = bool(rows) and all(is_int(rows[0][c]) for c in ids if c < len(rows[0]))
    rest_numeric = bool(rows) and all(is_int(r[c]) for r in rows for c in ids if c < len(r))
    tabular = path.lower().removesuffix(".gz").removesuffix(".bz2").endswith((".csv", ".tsv"))
    if header is True or (header is None and (named or (looks_named and (next_numeric or tabular)))):
        names = [t.strip() for t in tokens]
        data = data[1:]
        tokens = split(data[0], None if ragged else delimiter) if data else None
    string_ids = tokens is not None and any(
        not is_int(tokens[c]) for c in _positions(id_cols, names) if c < len(tokens)
    )
    if header is None and names is None and string_ids and rest_numeric:  # a label here, numbers below
        line = data[0].rstrip("\r\n")
        raise GraphFormatError(
            path,
            skip + 1,
            f"expected a header line (a name for every column) or integer vertex ids as on the lines below, "
            f"got {line!r}; fix the line, or pass header=False to read every label as text",
        )
    return Layout(skip, None if ragged else delimiter, names, string_ids, ragged, tokens)


def _ragged(line: str, delimiter: str) -> bool:
    if not line.strip():
        return False
    if line != line.strip(" \t"):
        return True
    return (
        (delimiter * 2) in line or (delimiter == " " and "\t" in line) or (delimiter == "\t" and " " in line)
    )


def _positions(cols, names) -> list[int]:
    out = []
    for c in cols:
        if isinstance(c, str):
            out.append(names.index(c) if names and c in names else 10**9)
        else:
            out.append(c)
    return out


def column_index(col, names, path) -> int:
    """Position of a column given by position or by header name."""
    if isinstance(col, str):
        if not names or col not in names:
            have = f"the header has {names}" if names else "the file has no header line"
            raise GraphFormatError(path, None, f"expected a column named {col!r}, but {have}")
        return names.index(col)
    if not isinstance(col, int) or col < 0:
        raise OptionError(f"column must be a non-negative position or a header name, got {col!r}")
    return col


def data_lines(path: str, comment: str | None) -> Iterator[tuple[int, str]]:
    """(1-based line number, line) for every non-comment, non-blank line."""
    with open_text(path) as f:
        for lineno, line in enumerate(f, start=1):
            if not _is_skipped(line, comment):
                yield lineno, line


def line_of_row(path: str, comment: str | None, row: int, header: bool) -> int | None:
    """Line number of data row ``row`` (0-based, header excluded)."""
    target = row + (1 if header else 0)
    for k, (lineno, _) in enumerate(data_lines(path, comment)):
        if k == target:
            return lineno
    return None


def locate_error(path, *, comment, delimiter, header, src, dst, weight, string_ids) -> None:
    """Raise GraphFormatError for the first line a reader would reject; return if all lines are fine."""
    ncols = max(c for c in (src, dst, weight) if c is not None) + 1
    rows = data_lines(path, comment)
    if header:
        next(rows, None)
    for lineno, line in rows:
        fields = split(line, delimiter)
        if len(fields) < ncols:
            want = f"at least {ncols} columns (source in {src + 1}, target in {dst + 1}"
            want += f", weight in {weight + 1})" if weight is not None else ")"
            raise GraphFormatError(path, lineno, f"expected {want}, got {len(fields)}: {line.strip()!r}")
        for name, c in (("source", src), ("target", dst)):
            f = fields[c].strip()
            if not f or (not string_ids and not is_int(f)):
                kind = "a vertex id" if string_ids else "an integer vertex id"
                raise GraphFormatError(path, lineno, f"expected {kind} ({name}, column {c + 1}), got {f!r}")
            if not string_ids and not -(2**63) <= int(f) < 2**63:
                want = f"expected a vertex id in the int64 range ({name}, column {c + 1}), got {f!r}"
                raise GraphFormatError(path, lineno, want)
        if weight is not None:
            f = fields[weight].strip()
            if not is_float(f):
                raise GraphFormatError(
                    path, lineno, f"expected a numeric weight in column {weight + 1}, got {f!r}"
                )
            v = float(f)
            if not math.isfinite(v) or v < 0:
                raise GraphFormatError(
                    path, lineno, f"expected a finite, non-negative edge weight, got {f!r}"
                )


def check_exists(path) -> str:
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file")
    if os.path.isdir(path):
        raise GraphFormatError(
            path, None, "expected an edge-list file, got a directory (use graphs.load for saved graphs)"
        )
    if os.path.getsize(path) == 0:
        raise GraphFormatError(path, None, "expected edges, got an empty file")
    return path


SAMPLE_BYTES = 1 << 20  # decompressed text read to estimate a file's edges


def estimated_edges(path: str, comment: str | None) -> int:
    """About how many data lines (edges) the text file ``path`` holds, from its first ``SAMPLE_BYTES``
    of text: the file's (for .gz / .bz2 the decompressed) size over the sample's bytes per data line;
    exact when the sample is the whole file."""
    with open(path, "rb") as raw:
        size = os.fstat(raw.fileno()).st_size
        if path.endswith(".gz"):
            text = gzip.GzipFile(fileobj=raw)
        elif path.endswith(".bz2"):
            text = bz2.BZ2File(raw)
        else:
            text = raw
        with decompression_errors(path):
            sample = text.read(SAMPLE_BYTES)
            whole = not text.read(1)
        consumed = max(raw.tell(), 1)
    lines = sample.splitlines()
    if not whole and lines:
        lines = lines[:-1]  # the last may be cut short
    mark = comment.encode() if comment else None
    data = [ln for ln in lines if ln.strip() and not (mark and ln.lstrip().startswith(mark))]
    if whole or not data:
        return len(data)
    per_line = sum(len(ln) + 1 for ln in data) / len(data)
    text_size = size if text is raw else size * len(sample) / consumed
    return int(text_size / per_line)
