"""Matrix Market (coordinate) files as graphs: banner, size line, 1-based entries."""

from __future__ import annotations

import numpy as np

from . import _text
from .csr import CSRGraph
from .edges import assemble, check_weights
from .errors import GraphFormatError

FIELDS = ("real", "double", "integer", "pattern")
SYMMETRIES = ("general", "symmetric")


def _banner(path):
    with _text.open_text(path) as f:
        first = f.readline()
        tokens = first.split()
        if len(tokens) != 5 or tokens[0].lower() != "%%matrixmarket":
            raise GraphFormatError(
                path,
                1,
                f"expected '%%MatrixMarket matrix coordinate <field> <symmetry>', got {first.strip()!r}",
            )
        obj, fmt, field, sym = (t.lower() for t in tokens[1:])
        if obj != "matrix" or fmt != "coordinate":
            raise GraphFormatError(path, 1, f"expected a 'matrix coordinate' file, got '{obj} {fmt}'")
        if field not in FIELDS:
            raise GraphFormatError(path, 1, f"expected a field in {FIELDS}, got {field!r}")
        if sym not in SYMMETRIES:
            raise GraphFormatError(path, 1, f"expected symmetry 'general' or 'symmetric', got {sym!r}")
        lineno = 1
        for line in f:
            lineno += 1
            s = line.strip()
            if not s or s.startswith("%"):
                continue
            parts = s.split()
            if len(parts) != 3 or not all(_text.is_int(p) for p in parts):
                raise GraphFormatError(
                    path, lineno, f"expected the size line 'rows columns entries', got {s!r}"
                )
            rows, cols, nnz = (int(p) for p in parts)
            if rows != cols:
                raise GraphFormatError(
                    path, lineno, f"expected a square matrix for a graph, got {rows} x {cols}"
                )
            return field, sym, rows, nnz
    raise GraphFormatError(path, None, "expected a size line 'rows columns entries', got end of file")


def read_mtx(path, *, weighted, directed, dedupe, self_loops) -> CSRGraph:
    field, sym, n, nnz = _banner(path)
    if weighted and field == "pattern":
        raise GraphFormatError(path, 1, "weighted=True, but the file is a 'pattern' matrix without values")
    if nnz == 0:
        raise GraphFormatError(path, None, "expected edges, but the size line declares 0 entries")
    wc = 2 if weighted else None
    src, dst, w, line_of = _text_columns(path, wc)
    if src.size != nnz:
        raise GraphFormatError(
            path, None, f"expected {nnz} entries as the size line declares, found {src.size}"
        )
    for arr in (src, dst):
        bad = (arr < 1) | (arr > n)
        if bad.any():
            row = int(np.argmax(bad))
            raise GraphFormatError(
                path, line_of(row), f"expected a vertex index in 1..{n}, got {int(arr[row])}"
            )
    if w is not None:
        w = check_weights(w, path, line_of=line_of)
    t = np.int32 if n <= 2**31 - 1 else np.int64
    ids = np.arange(1, n + 1, dtype=np.int64)
    return assemble(
        (src - 1).astype(t),
        (dst - 1).astype(t),
        w,
        n,
        directed=directed and sym == "general",
        dedupe=dedupe,
        self_loops=self_loops,
        ids=ids,
    )


def _text_columns(path, wc):
    from .read import read_text_columns

    return read_text_columns(
        path, comment="%", delimiter=None, header=None, cols=(0, 1, wc), engine="pyarrow", skip_first=True
    )
