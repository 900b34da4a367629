"""cuDF ingestion (optional): parse an edge-list file straight into GPU columns.

Used by ``read_edgelist(engine='cudf')``, and by ``engine='auto'`` on the GPU when cuDF is
installed. Error messages come from the same line-level checks as the host readers.
"""

from __future__ import annotations

from .errors import GraphFormatError


def read_text_cudf(path, lay, s, d, wc, comment, locate):
    """``(src, dst, weights|None)`` as CuPy arrays, read by cuDF."""
    import cudf

    usecols = [s, d] if wc is None else [s, d, wc]
    id_dtype = "str" if lay.string_ids else "int64"
    dtype = {s: id_dtype, d: id_dtype} | ({wc: "float64"} if wc is not None else {})
    try:
        df = cudf.read_csv(
            path,
            sep=lay.delimiter or r"\s+",  # cuDF 26 has no delim_whitespace (pandas 3 dropped it too)
            comment=comment if comment and len(comment) == 1 else None,
            header=None,
            skiprows=lay.skip + (1 if lay.header is not None else 0),
            usecols=usecols,
            dtype=dtype,
            compression="infer",
        )
    except Exception as exc:  # cuDF raises RuntimeError/ValueError subclasses for parse errors
        locate()
        raise GraphFormatError(path, None, f"cuDF could not parse the file: {exc}") from exc
    df = df.rename(columns={str(c): c for c in usecols})  # cuDF 26 names the columns "0", "1", ...
    if any(int(df[c].null_count) for c in usecols):
        locate()
        raise GraphFormatError(path, None, "expected a value in every column, found an empty field")
    if len(df) == 0:
        raise GraphFormatError(path, None, "expected edges, but the file has only comments or blank lines")
    if lay.string_ids:  # string labels are renumbered on the host
        return df[s].to_numpy(), df[d].to_numpy(), (df[wc].to_numpy() if wc is not None else None)
    cols = [df[c].values for c in usecols]
    return cols[0], cols[1], (cols[2] if wc is not None else None)
