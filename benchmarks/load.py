"""Edge-list loading: read_edgelist on a 5M-edge SNAP-style file vs the pandas + SciPy way."""

from __future__ import annotations

import gzip
import shutil
import tempfile
from pathlib import Path

import numpy as np

import graphs
from benchmarks.common import Reporter, wall


def write_snap_file(folder: Path, scale: int = 18, edge_factor: int = 20) -> tuple[Path, int]:
    g = graphs.rmat(scale, edge_factor=edge_factor, seed=1, device="cpu")
    src, dst, _ = g.edges()
    labels = np.random.default_rng(0).permutation(g.n).astype(np.int64) * 7 + 1000  # SNAP-like sparse ids
    path = folder / "edges.txt"
    with open(path, "w") as f:
        f.write(f"# generated R-MAT scale {scale}\n# Nodes: {g.n} Edges: {g.m}\n# FromNodeId\tToNodeId\n")
        np.savetxt(f, np.column_stack([labels[src], labels[dst]]), fmt="%d", delimiter="\t")
    with open(path, "rb") as fi, gzip.open(folder / "edges.txt.gz", "wb", compresslevel=1) as fo:
        shutil.copyfileobj(fi, fo)
    return path, g.m


def _pandas_scipy(path):
    import pandas as pd
    import scipy.sparse as sp

    df = pd.read_csv(path, sep="\t", comment="#", header=None)
    labels, inv = np.unique(df.to_numpy().ravel(), return_inverse=True)
    inv = inv.reshape(-1, 2)
    return sp.csr_array((np.ones(len(inv)), (inv[:, 0], inv[:, 1])), shape=(labels.size, labels.size))


def run(rep: Reporter, device: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path, m = write_snap_file(Path(tmp))
        for p in (path, path.with_suffix(".txt.gz")):
            t, _ = wall(lambda p=p: graphs.read_edgelist(p, device=device), repeats=3)
            t_base, _ = wall(lambda p=p: _pandas_scipy(p), repeats=3, warmup=0)
            rep.emit(
                bench="load",
                graph=p.name,
                impl=f"read_edgelist ({device})",
                m=m,
                median=t,
                unit="s",
                baseline={"impl": "pandas.read_csv+np.unique+scipy csr", "median": t_base},
                speedup=t_base / t,
            )
