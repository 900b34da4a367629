"""Results as pandas DataFrames with original labels: the shared shapes behind ``as_frame=True`` and the
result types' ``to_frame()``.

Per-vertex values (``pagerank``, ``simrank``): columns ``vertex`` and the value's name, as cuGraph
returns them. Dense rows of several sources (``ppr``): ``source``, ``vertex`` and the value, one row per
(source, vertex). Rankings (``ppr(topk=)``, ``topk_ppr``, ``simrank_topk``): ``source``, ``rank`` (from
1), ``vertex`` and the value, the real rows only (``operators._ranked``).
"""

from __future__ import annotations

import numpy as np

from graphs import CSRGraph, vertex_frame
from graphs._device import to_host
from operators._ranked import long_rows


def per_vertex_frame(G: CSRGraph, values, name: str):
    """Columns ``vertex`` (labels) and ``name``: one row per vertex, in the graph's order."""
    return vertex_frame(G, to_host(values), name)


def dense_rows_frame(G: CSRGraph, sources, rows, name: str):
    """Columns ``source``, ``vertex`` and ``name``: row i of ``rows`` (source i's values over every
    vertex), vertex by vertex, source after source."""
    import pandas as pd

    rows = to_host(rows)
    count = len(sources)
    return pd.DataFrame(
        {
            "source": np.repeat(np.asarray(sources), G.n),
            "vertex": np.tile(G.ids, count),
            name: rows.reshape(-1),
        }
    )


def ranked_frame(sources, vertices, values, counts, name: str):
    """Columns ``source``, ``rank``, ``vertex`` and ``name``: each source's real rows, ranked from 1."""
    import pandas as pd

    source, rank, vertex, value = long_rows(sources, vertices, values, counts)
    return pd.DataFrame({"source": source, "rank": rank, "vertex": vertex, name: value})


def ranked_dict(sources, vertices, values, counts) -> dict:
    """``{source: {vertex: value}}`` of the real rows, in decreasing value (NetworkX's nested shape, as
    ``networkx.simrank_similarity(G)`` returns)."""
    out = {}
    for i, s in enumerate(np.asarray(sources).tolist()):
        c = int(counts[i])
        row = zip(np.asarray(vertices[i, :c]).tolist(), np.asarray(values[i, :c]).tolist(), strict=True)
        out[s] = dict(row)
    return out
