"""graphjobs as a NetworkX backend on an R-MAT graph: ``nx.pagerank(G, backend="graphjobs")`` on the CPU
and the GPU beside NetworkX's own ``pagerank`` (SciPy) and nx-cugraph, in one run.

    python -m benchmarks.nx_backend --out FILE.jsonl [--scale 19] [--edge-factor 22] [--seed 0]

The graph is ``graphs.rmat(scale, edge_factor, seed)`` without parallel edges (NetworkX's DiGraph keeps
one edge a pair; 10,825,147 edges among 524,288 nodes at the defaults), made into a ``networkx.DiGraph``
with nodes 0..n-1 (timed on its own: NetworkX's cost, paid before any backend runs). Every PageRank runs
with ``tol = 1e-6 / n`` (an L1 change below 1e-6: NetworkX's default ``n * tol`` rule holds after the
first iteration on a million nodes) and ``max_iter=200``. The first call of a backend converts the graph
(NetworkX keeps the conversion in ``G.__networkx_cache__``; it is cleared before each backend's first
call), the second finds it; on the GPU the first call also moves the graph there and compiles the
kernels. Each JSON line: graph, n, m, method, seconds, l1_error (against the exact PageRank: float64
power iteration to an L1 change below 1e-12, ``operators.pagerank`` on the CPU as in
``benchmarks/ppr_push.py``), device, and NetworkX's seconds in the same run as ``baseline``. Rows for
the GPU and nx-cugraph say when they are absent.

Where graphjobs is not installed (a copy of the tree on ``PYTHONPATH``), the backend's entry points are
written to a temporary ``.dist-info`` before NetworkX is imported, so that NetworkX finds it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import tomllib
from importlib import invalidate_caches
from importlib.metadata import entry_points
from pathlib import Path

import numpy as np

from benchmarks.common import commit, device_name

ROOT = Path(__file__).resolve().parents[1]
MAX_ITER = 200
ORACLE_CHANGE = 1e-12  # the exact PageRank's last L1 change: error at most alpha / (1 - alpha) times it


def register(site: Path) -> Path:
    """Write a ``graphjobs`` distribution's metadata with pyproject's NetworkX entry points into
    ``site`` (a folder on ``sys.path``); returns the ``.dist-info`` folder."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    info = Path(site) / "graphjobs_nx_entry_points-0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: graphjobs-nx-entry-points\nVersion: 0\n")
    lines = []
    for group in ("networkx.backends", "networkx.backend_info"):
        lines.append(f"[{group}]")
        lines += [f"{name} = {target}" for name, target in project["entry-points"][group].items()]
        lines.append("")
    (info / "entry_points.txt").write_text("\n".join(lines))
    return info


def ensure_registered() -> None:
    """Make NetworkX find the graphjobs backend: its entry points, written to a temporary folder on
    ``sys.path`` where graphjobs is not installed. Must run before NetworkX is imported."""
    if any(ep.name == "graphjobs" for ep in entry_points(group="networkx.backends")):
        return
    if "networkx" in sys.modules:
        raise RuntimeError("graphjobs is not installed and NetworkX was imported before its entry points")
    site = Path(tempfile.mkdtemp(prefix="graphjobs-nx-"))
    register(site)
    sys.path.append(str(site))
    invalidate_caches()


class Rows:
    """JSON lines of one run (with the commit and the machine) and a table printed as they come."""

    def __init__(self, path: str, **context):
        self.path = path
        self.context = {"bench": "nx_backend", "commit": commit(), **context}
        self.baseline: float | None = None

    def emit(self, method: str, seconds: float | None, device: str, l1_error: float | None = None, **extra):
        record = {**self.context, "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "method": method}
        record.update(seconds=seconds, l1_error=l1_error, device=device, **extra)
        if seconds is not None and self.baseline is not None and method != "networkx.pagerank":
            record["baseline"] = {"method": "networkx.pagerank", "seconds": self.baseline}
            record["speedup"] = self.baseline / seconds
        with open(self.path, "a") as f:
            f.write(json.dumps(record, default=float) + "\n")
        line = f"{method:<34} {device:<4} "
        line += "    absent" if seconds is None else f"{seconds:>9.3f} s"
        if l1_error is not None:
            line += f"   L1 error {l1_error:.2e}"
        if "speedup" in record:
            line += f"   {record['speedup']:.1f}x networkx.pagerank"
        if extra.get("note"):
            line += f"   ({extra['note']})"
        print(line, flush=True)


def timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="JSON-lines file to append to")
    ap.add_argument("--scale", type=int, default=19, help="R-MAT scale: 2**scale nodes (default 19)")
    ap.add_argument("--edge-factor", type=int, default=22, help="generated edges per node (default 22)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    ensure_registered()

    import networkx as nx

    from graphs import gpu_available, rmat
    from graphs._device import to_host
    from operators import pagerank

    g = rmat(args.scale, args.edge_factor, seed=args.seed, device="cpu", dedupe=True)
    n, m = g.n, g.m
    name = f"rmat-{args.scale}x{args.edge_factor}"
    gpu = gpu_available()
    rows = Rows(args.out, graph=name, n=n, m=m, device_name=device_name("gpu" if gpu else "cpu"))
    print(f"{name}: {n:,} nodes, {m:,} edges without parallel ones (seed {args.seed})", flush=True)
    tol = 1e-6 / n
    exact = to_host(pagerank(g, tol=ORACLE_CHANGE / n, max_iter=2000, dtype=np.float64))

    def l1(ranks: dict) -> float:
        return float(np.abs(np.fromiter((ranks[v] for v in range(n)), np.float64, n) - exact).sum())

    src, dst, _ = g.edges()
    del g

    def build(src, dst):
        G = nx.DiGraph()
        G.add_nodes_from(range(n))
        G.add_edges_from(zip(src.tolist(), dst.tolist(), strict=True))
        return G

    G, seconds = timed(build, src, dst)
    del src, dst
    rows.emit("networkx.DiGraph build", seconds, "cpu", note="NetworkX's cost, before any backend")
    kwargs = dict(tol=tol, max_iter=MAX_ITER)
    ranks, seconds = timed(lambda: nx.pagerank(G, backend="networkx", **kwargs))
    rows.baseline = seconds
    rows.emit("networkx.pagerank", seconds, "cpu", l1(ranks), tol=tol)

    with nx.config(cache_converted_graphs=True, warnings_to_ignore={"cache"}):
        for device in ("cpu", "gpu"):
            method = f"graphjobs {device}"
            if device == "gpu" and not gpu:
                rows.emit(method, None, device, note="no GPU: CuPy sees no CUDA device or is not installed")
                continue
            G.__networkx_cache__.clear()
            with nx.config.backends.graphjobs(device=device):
                for call in ("first call (converts)", "second call (cached)"):
                    ranks, seconds = timed(lambda: nx.pagerank(G, backend="graphjobs", **kwargs))
                    rows.emit(f"{method}, {call}", seconds, device, l1(ranks), tol=tol)
        G.__networkx_cache__.clear()
        if "cugraph" not in nx.utils.backends.backends:
            rows.emit("nx-cugraph", None, "gpu", note="nx-cugraph is not installed")
        else:
            try:
                for call in ("first call (converts)", "second call (cached)"):
                    ranks, seconds = timed(lambda: nx.pagerank(G, backend="cugraph", **kwargs))
                    rows.emit(f"nx-cugraph, {call}", seconds, "gpu", l1(ranks), tol=tol)
            except Exception as exc:  # installed but not usable here (its libraries, no GPU)
                rows.emit("nx-cugraph", None, "gpu", note=f"failed: {type(exc).__name__}: {exc}"[:300])


if __name__ == "__main__":
    main()
