"""The `graphjobs` command line: demo and jobs, one clear line per user error."""

from __future__ import annotations

import argparse
import sys
import time
import traceback

from graphs import GraphFormatError
from operators import ConvergenceError

USER_ERRORS = (GraphFormatError, ConvergenceError, OSError, ValueError, KeyError, ImportError, TimeoutError)

EXAMPLES = {
    "demo": "examples:\n  graphjobs demo\n  graphjobs demo --device cpu --scale 14",
    "pagerank": (
        "examples:\n  graphjobs pagerank soc-Epinions1.txt.gz --out ranks.parquet\n"
        "  graphjobs pagerank edges.csv --undirected --alpha 0.9 --scheduler tcp://10.0.0.5:8786\n"
        "  graphjobs pagerank rmat:scale=20,seed=1 --device gpu"
    ),
}


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="graphjobs", description="Graph-analytics jobs on Dask, on GPUs or CPUs."
    )
    sub = ap.add_subparsers(dest="command", required=True)
    fmt = argparse.RawDescriptionHelpFormatter
    demo = sub.add_parser(
        "demo",
        help="PageRank on a generated R-MAT graph on a local cluster",
        epilog=EXAMPLES["demo"],
        formatter_class=fmt,
    )
    demo.add_argument("--device", choices=["auto", "cpu", "gpu"], default="auto")
    demo.add_argument("--scale", type=int, help="R-MAT scale (default 16 on CPU, 20 on GPU)")
    demo.add_argument("--workers", type=int, help="Dask workers (default: one per GPU, or by core count)")
    demo.add_argument("--workdir", default=None, help="artifact folder (default .graphjobs)")
    pr = sub.add_parser(
        "pagerank",
        help="PageRank of an edge list, written to Parquet",
        epilog=EXAMPLES["pagerank"],
        formatter_class=fmt,
    )
    pr.add_argument("input", help="edge-list file (.txt/.gz/.csv/.tsv/.parquet/.mtx) or a spec like rmat:16")
    pr.add_argument("--undirected", action="store_true", help="store every edge in both directions")
    pr.add_argument("--weighted", action="store_true", help="read edge weights from the third column")
    pr.add_argument("--dedupe", action="store_true", help="drop repeated edges")
    pr.add_argument(
        "--reorder",
        choices=["degree", "in_degree", "out_degree"],
        help="renumber vertices once at load for locality (labels are kept)",
    )
    pr.add_argument("--alpha", type=float, default=0.85, help="probability of following an edge (0.85)")
    pr.add_argument("--tol", type=float, default=1e-6)
    pr.add_argument("--max-iter", type=int, default=100)
    pr.add_argument("--out", default="pagerank.parquet")
    pr.add_argument("--scheduler", help="address of a running Dask scheduler, e.g. tcp://host:8786")
    pr.add_argument(
        "--cluster", action="store_true", help="start a local Dask cluster (dashboard) for the job"
    )
    pr.add_argument(
        "--device", choices=["auto", "cpu", "gpu"], default="auto", help="where to compute locally"
    )
    pr.add_argument("--workdir", default=None)
    pr.add_argument("--quiet", action="store_true", help="no progress bar")
    return ap


def _print_summary(summary: dict, seconds: float) -> None:
    print(
        f"\n{summary['job']}: n={summary['n']:,} vertices, m={summary['m']:,} edges, "
        f"device={summary['device']}, {seconds:.2f} s (PageRank {summary['pagerank_seconds']:.3f} s)"
    )
    print(f"{'rank':>4}  {'vertex':>14}  {'pagerank':>12}")
    for i, (v, score) in enumerate(summary["top"], start=1):
        print(f"{i:>4}  {v!s:>14}  {score:>12.6g}")
    print(f"written: {summary['out']}")


def _demo(args) -> int:
    from distributed import Client

    from cluster import make_cluster
    from graphs._device import resolve_device

    from .job import run
    from .pagerank import pagerank_job

    device = resolve_device(args.device)
    scale = args.scale or (20 if device == "gpu" else 16)
    with make_cluster(args.workers, device=device) as cluster, Client(cluster) as client:
        job = pagerank_job(f"rmat:scale={scale},seed=0", out="demo-pagerank.parquet", workdir=args.workdir)
        t0 = time.perf_counter()
        summary = run(job, client)
        _print_summary(summary, time.perf_counter() - t0)
        print(f"dashboard: {cluster.dashboard_link}")
    return 0


def _pagerank(args) -> int:
    from cluster import connect, set_worker_device

    from .job import run
    from .pagerank import pagerank_job

    job = pagerank_job(
        args.input,
        alpha=args.alpha,
        tol=args.tol,
        max_iter=args.max_iter,
        directed=not args.undirected,
        read_options={"weighted": args.weighted or None, "dedupe": args.dedupe or None},
        reorder=args.reorder,
        out=args.out,
        workdir=args.workdir,
    )
    t0 = time.perf_counter()
    if args.scheduler or args.cluster:
        opts = {} if args.scheduler else {"device": args.device}
        with connect(args.scheduler, **opts) as client:
            summary = run(job, client, progress=not args.quiet)
    else:
        set_worker_device(args.device)
        summary = run(job, progress=not args.quiet)
    _print_summary(summary, time.perf_counter() - t0)
    return 0


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    handler = {"demo": _demo, "pagerank": _pagerank}[args.command]
    try:
        return handler(args)
    except USER_ERRORS as exc:
        msg = str(exc) if not isinstance(exc, KeyError) else str(exc.args[0])
        print(f"graphjobs: error: {msg}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("graphjobs: interrupted", file=sys.stderr)
        return 130
    except Exception:  # a bug, not a user mistake: show everything
        traceback.print_exc()
        print("graphjobs: internal error (please report it with the traceback above)", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
