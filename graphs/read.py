"""Reading edge lists: SNAP text (.txt/.gz), CSV/TSV, Parquet and Matrix Market into a CSRGraph."""

from __future__ import annotations

import functools
import importlib.util
import os

import numpy as np

from . import _text
from ._device import array_module, resolve_device
from .csr import CSRGraph
from .edges import assemble, check_weights, renumber_labels
from .errors import GraphFormatError, InsufficientMemoryError, MissingDependencyError, OptionError

ENGINES = ("auto", "pyarrow", "pandas", "cudf")


def read_edgelist(
    path: str | os.PathLike,
    *,
    directed: bool = True,
    weighted: bool = False,
    comment: str | None = "#",
    delimiter: str | None = None,
    src_col: int | str = 0,
    dst_col: int | str = 1,
    weight_col: int | str | None = None,
    engine: str = "auto",
    dedupe: bool = False,
    self_loops: bool = True,
    header: bool | None = None,
    device: str = "cpu",
) -> CSRGraph:
    """Read an edge-list file into a CSRGraph.

    Parameters
    ----------
    path : str or PathLike
        ``.txt``/``.el``/other text (SNAP style: ``#`` comments, tab or space separated, LF or
        CRLF), ``.csv``, ``.tsv``, ``.parquet``/``.pq`` or ``.mtx``; text may be ``.gz``/``.bz2``.
        A folder of Parquet files with integer ids is read batch by batch, never holding its edge list
        whole (``graphs.stream.read_parquet_dataset``: vertex i is id i, isolated ids included).
    directed : bool
        If False, every edge is stored in both directions. Matrix Market ``symmetric`` files are
        always undirected.
    weighted : bool
        Read edge weights (column ``weight_col``, default the third column).
    comment : str or None
        Lines starting with this (after blanks) are skipped.
    delimiter : str, optional
        Field separator; by default tab if the first data line has one, ``,`` for CSV, else runs
        of whitespace.
    src_col, dst_col, weight_col : int or str
        Column positions (0-based) or header names. In a Parquet file, the default positions give way to
        columns named as an edge's ends (``src``/``dst``, ``source``/``target``, ``from``/``to``,
        ``u``/``v``; any case), wherever they stand; a name the file lacks is an error listing its names.
    engine : {'auto', 'pyarrow', 'pandas', 'cudf'}
        'auto' uses cuDF when ``device='gpu'`` and cuDF is installed, otherwise pyarrow (falling
        back to pandas for layouts pyarrow cannot split, e.g. comments in mid-file).
    dedupe, self_loops : bool
        Drop repeated edges (first weight kept) / drop edges ``u -> u``. Both kept by default.
    header : bool, optional
        Whether the first data line names the columns. By default it does when it holds the
        names given as ``src_col``/``dst_col``; in ``.csv``/``.tsv`` files also when its id fields
        are not numbers (pandas' convention: pass ``header=False`` for string labels without a
        header); in other text files when non-numeric ids stand above numeric ones.
    device : {'cpu', 'gpu', 'auto'}
        Where the returned graph lives.

    Returns
    -------
    CSRGraph
        Vertex labels (integers or strings) renumbered to ``0..n-1``, originals in ``ids``;
        Matrix Market keeps its ``1..N`` indices as labels, isolated vertices included.

    Raises
    ------
    GraphFormatError
        Naming the file, the line and what was expected (non-numeric id, missing column,
        negative or NaN weight, empty file, bad Matrix Market banner or size line).
    FileNotFoundError
        If ``path`` does not exist.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> import graphjobs as gj
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "edges.txt"
    >>> _ = path.write_text("# SNAP-style comment\\na b\\nb c\\nc a\\n")
    >>> G = gj.read_edgelist(path)
    >>> G.n, G.m, list(G.ids)
    (3, 3, ['a', 'b', 'c'])
    """
    if os.path.isdir(path):  # a Parquet dataset, read batch by batch
        from .stream import read_parquet_dataset

        weight_col = 2 if weighted and weight_col is None else weight_col
        cols = dict(src_col=src_col, dst_col=dst_col, weight_col=weight_col)
        return read_parquet_dataset(
            path, directed=directed, dedupe=dedupe, self_loops=self_loops, device=device, **cols
        )
    path = _text.check_exists(path)
    if engine not in ENGINES:
        raise OptionError(f"engine must be one of {ENGINES}, got {engine!r}")
    device = resolve_device(device)
    if engine == "auto":
        engine = "cudf" if device == "gpu" and has_cudf() else "pyarrow"
    if engine == "cudf" and not has_cudf():
        raise MissingDependencyError(
            "engine='cudf' needs cuDF (RAPIDS), which is not installed; use engine='pyarrow'"
        )
    if weight_col is not None:
        weighted = True
    elif weighted:
        weight_col = 2
    if file_format(path) == "mtx":
        from ._mtx import read_mtx

        with _text.decompression_errors(path):
            g = read_mtx(path, weighted=weighted, directed=directed, dedupe=dedupe, self_loops=self_loops)
        return g.to(device)
    check_read_memory(path, comment, directed)
    cols = dict(src_col=src_col, dst_col=dst_col, weight_col=weight_col)
    src, dst, w = read_edge_columns(
        path, comment=comment, delimiter=delimiter, header=header, engine=engine, **cols
    )
    xp = array_module(src)
    src, dst, ids = renumber_labels(xp, src, dst)
    g = assemble(src, dst, w, len(ids), directed=directed, dedupe=dedupe, self_loops=self_loops, ids=ids)
    return g.to(device)


READ_BYTES_PER_EDGE = 64  # a lower bound of the host peak of reading an edge (RESULTS.md: measured)


def check_read_memory(path: str, comment: str | None, directed: bool = True) -> None:
    """Refuse (``InsufficientMemoryError``, before parsing) a file whose edges, estimated from its size
    and first lines (``_text.estimated_edges``; a Parquet file's row count), would need more than the
    host's free memory (``$GRAPHJOBS_MEMORY_LIMIT`` applied) at ``READ_BYTES_PER_EDGE`` each."""
    from ._device import free_memory

    if file_format(path) == "parquet":
        import pyarrow.parquet as pq

        try:
            edges = pq.ParquetFile(path).metadata.num_rows
        except Exception:  # not a readable Parquet file: the reader says what is wrong with it
            return
    else:
        edges = _text.estimated_edges(path, comment)
    need, free = READ_BYTES_PER_EDGE * edges * (1 if directed else 2), free_memory("cpu")
    if need > free:
        raise InsufficientMemoryError(
            f"reading {path} (about {edges:,} edges)",
            need,
            free,
            "run on a machine with more memory or on a cluster (--scheduler), or split the file into a "
            "Parquet dataset read in partitions; $GRAPHJOBS_MEMORY_LIMIT caps what counts as free",
        )


def read_edge_columns(
    path, *, comment="#", delimiter=None, header=None, src_col=0, dst_col=1, weight_col=None, engine="pyarrow"
):
    """The raw (source, destination, weight or None) columns of a text or Parquet edge file (also what
    ``pipelines.ingest`` reads dataset files with)."""
    if file_format(str(path)) == "parquet":
        src, dst, w, line_of = _read_parquet(path, src_col, dst_col, weight_col)
    else:
        cols = (src_col, dst_col, weight_col)
        with _text.decompression_errors(path):
            src, dst, w, line_of = read_text_columns(
                path, comment=comment, delimiter=delimiter, header=header, cols=cols, engine=engine
            )
    if w is not None:
        w = check_weights(w, path, line_of=line_of)
    return src, dst, w


def file_format(path: str) -> str:
    name = path.lower()
    for z in (".gz", ".bz2"):
        name = name.removesuffix(z)
    if name.endswith((".parquet", ".pq")):
        if name != path.lower():
            raise GraphFormatError(
                path, None, "Parquet files carry their own compression; expected no .gz/.bz2 suffix"
            )
        return "parquet"
    if name.endswith(".mtx"):
        return "mtx"
    return "text"


@functools.cache
def has_cudf() -> bool:
    return importlib.util.find_spec("cudf") is not None


def read_text_columns(path, *, comment, delimiter, header, cols, engine, skip_first=False):
    """``(src, dst, weights|None, line_of)`` arrays from a delimited text file."""
    src_col, dst_col, weight_col = cols
    id_cols = (src_col, dst_col)
    lay = _text.sniff(
        path, comment=comment, delimiter=delimiter, header=True if skip_first else header, id_cols=id_cols
    )
    if lay.first is None:
        raise GraphFormatError(path, None, "expected edges, but the file has only comments or blank lines")
    names = None if skip_first else lay.header
    s, d = _text.column_index(src_col, names, path), _text.column_index(dst_col, names, path)
    wc = None if weight_col is None else _text.column_index(weight_col, names, path)
    if s == d:
        raise OptionError(f"source and target columns must differ, both are column {s}")
    has_header = lay.header is not None

    def locate() -> None:
        _text.locate_error(
            path,
            comment=comment,
            delimiter=lay.delimiter,
            header=has_header,
            src=s,
            dst=d,
            weight=wc,
            string_ids=lay.string_ids,
        )

    def line_of(row: int):
        return _text.line_of_row(path, comment, row, has_header)

    cols_out = None
    if engine == "cudf":
        from ._gpu_io import read_text_cudf

        cols_out = read_text_cudf(path, lay, s, d, wc, comment, locate)
    elif engine == "pyarrow" and not lay.ragged:
        cols_out = _read_pyarrow(path, lay, s, d, wc, locate)
    if cols_out is None:
        cols_out = _read_pandas(path, lay, s, d, wc, comment, locate)
    return (*cols_out, line_of)


def _read_pyarrow(path, lay, s, d, wc, locate):
    import pyarrow as pa
    import pyarrow.csv as pcsv

    id_type = pa.string() if lay.string_ids else pa.int64()
    types = {f"f{s}": id_type, f"f{d}": id_type}
    if wc is not None:
        types[f"f{wc}"] = pa.float64()
    skip = lay.skip + (1 if lay.header is not None else 0)
    try:
        tbl = pcsv.read_csv(
            path,
            read_options=pcsv.ReadOptions(skip_rows=skip, autogenerate_column_names=True, block_size=1 << 24),
            parse_options=pcsv.ParseOptions(delimiter=lay.delimiter),
            convert_options=pcsv.ConvertOptions(
                include_columns=list(types), column_types=types, strings_can_be_null=False
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, KeyError):
        locate()  # raises GraphFormatError at the first bad line
        return None  # every line is fine: a layout pyarrow cannot read (e.g. comments mid-file)
    cols = [tbl.column(f"f{c}") for c in ((s, d) if wc is None else (s, d, wc))]
    if any(c.null_count for c in cols):
        locate()
        raise GraphFormatError(path, None, "expected a value in every column, found an empty field")
    out = [c.to_numpy() for c in cols]
    return out[0], out[1], (out[2] if wc is not None else None)


def _read_pandas(path, lay, s, d, wc, comment, locate):
    import pandas as pd

    usecols = [s, d] if wc is None else [s, d, wc]
    id_dtype = object if lay.string_ids else "int64"
    dtype = {s: id_dtype, d: id_dtype} | ({wc: "float64"} if wc is not None else {})
    try:
        df = pd.read_csv(
            path,
            sep=r"\s+" if lay.delimiter is None else lay.delimiter,
            comment=comment if comment and len(comment) == 1 else None,
            header=None,
            skiprows=lay.skip + (1 if lay.header is not None else 0),
            usecols=usecols,
            dtype=dtype,
            engine="c",
        )
    except (ValueError, OverflowError, pd.errors.ParserError) as exc:
        locate()
        raise GraphFormatError(path, None, f"could not parse the file: {exc}") from exc
    if df.isna().to_numpy().any():
        locate()
        raise GraphFormatError(path, None, "expected a value in every column, found an empty field")
    if df.shape[0] == 0:
        raise GraphFormatError(path, None, "expected edges, but the file has only comments or blank lines")
    w = df[wc].to_numpy(np.float64) if wc is not None else None
    return df[s].to_numpy(), df[d].to_numpy(), w


EDGE_ENDS = (("src", "dst"), ("source", "target"), ("source", "destination"), ("from", "to"), ("u", "v"))


def _named_ends(names: list[str]) -> tuple[str, str] | None:
    """The columns of ``names`` named as an edge's source and destination (``EDGE_ENDS``, any case),
    wherever they stand; None when there are none."""
    lower = {n.lower(): n for n in names}
    for s, d in EDGE_ENDS:
        if s in lower and d in lower:
            return lower[s], lower[d]
    return None


def parquet_columns(path, src_col, dst_col, weight_col, *, labels: bool = True) -> tuple[list[str], list]:
    """The names and types of the columns to read from the Parquet file ``path``: by position or name
    (the default positions give way to columns named as an edge's ends); ids must be integers (or, with
    ``labels``, strings), weights numbers. GraphFormatError naming the file otherwise."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise GraphFormatError(path, None, f"expected a Parquet file: {exc}") from exc
    names = schema.names

    def name_of(col):
        if isinstance(col, int):
            if not 0 <= col < len(names):
                raise GraphFormatError(
                    path, None, f"expected a column {col}, the file has {len(names)}: {names}"
                )
            return names[col]
        if col not in names:
            raise GraphFormatError(path, None, f"expected a column named {col!r}, the file has {names}")
        return col

    if (src_col, dst_col) == (0, 1):  # the defaults: columns named as an edge's ends are taken by name
        src_col, dst_col = _named_ends(names) or (src_col, dst_col)
    want = [name_of(c) for c in (src_col, dst_col)] + (
        [name_of(weight_col)] if weight_col is not None else []
    )
    types = [schema.field(name).type for name in want]
    ids = "integer or string" if labels else "integer"
    for k, (name, t) in enumerate(zip(want, types, strict=True)):
        text = labels and (pa.types.is_string(t) or pa.types.is_large_string(t))
        if k < 2 and not (pa.types.is_integer(t) or text):
            raise GraphFormatError(path, None, f"expected {ids} vertex ids in {name!r}, got {t}")
        if k == 2 and not (pa.types.is_integer(t) or pa.types.is_floating(t)):
            raise GraphFormatError(path, None, f"expected numeric weights in {name!r}, got {t}")
    return want, types


def _read_parquet(path, src_col, dst_col, weight_col):
    import pyarrow.parquet as pq

    want, _ = parquet_columns(path, src_col, dst_col, weight_col)
    tbl = pq.read_table(path, columns=want)
    if tbl.num_rows == 0:
        raise GraphFormatError(path, None, "expected edges, got a table with no rows")
    out = []
    for k, name in enumerate(want):
        col = tbl.column(name)
        if col.null_count:
            row = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
            raise GraphFormatError(path, None, f"row {row}: expected a value in column {name!r}, got null")
        arr = col.to_numpy()
        out.append(arr.astype(np.float64) if k == 2 else arr)
    return out[0], out[1], (out[2] if weight_col is not None else None), None
