"""The `graphjobs` command line: demo and jobs, one clear line per user error."""

from __future__ import annotations

import sys
import time
import traceback

from graphs import GraphFormatError
from graphs.errors import OptionError
from operators import ConvergenceError

from ._parser import parser
from .job import WorkdirLockedError
from .sources import RandomSources, SourceText

USER_ERRORS = (GraphFormatError, ConvergenceError, OSError, ValueError, KeyError, ImportError, TimeoutError,
               WorkdirLockedError, MemoryError)  # fmt: skip


def _report(args, summary: dict, human) -> int:
    """Print ``summary`` as JSON with --json, else the human-readable lines of ``human()``."""
    if getattr(args, "json", False):
        import json

        print(json.dumps(summary, default=_plain, indent=1))
    else:
        human()
    return 0


def _plain(v):
    return v.item() if hasattr(v, "item") else str(v)


def _stage_time(summary: dict) -> str:
    if summary.get("cached", {}).get("pagerank"):
        return "found in the workdir"  # a re-run: the stage did not run
    return f"{summary['pagerank_seconds']:.3f} s"


def _print_summary(summary: dict, seconds: float) -> None:
    print(
        f"\n{summary['job']}: n={summary['n']:,} vertices, m={summary['m']:,} edges, "
        f"device={summary['device']}, {seconds:.2f} s (PageRank {_stage_time(summary)})"
    )
    print(f"{'rank':>4}  {'vertex':>14}  {'pagerank':>12}")
    for i, (v, score) in enumerate(summary["top"], start=1):
        print(f"{i:>4}  {v!s:>14}  {score:>12.6g}")
    mem = summary.get("memory")
    if mem:
        print(f"memory: estimated {mem['estimate_bytes'] / 2**30:.2f} GiB per {mem['device']} worker, "
              f"{mem['free_bytes'] / 2**30:.2f} GiB free: {mem['partitions']} partition(s)")  # fmt: skip
    print(f"written: {summary['out']}")


def _demo(args) -> int:
    from distributed import Client

    from cluster import make_cluster
    from graphs._device import resolve_device

    from .demo import demo_jobs
    from .job import run

    device = resolve_device(args.device)
    scale = args.scale or (20 if device == "gpu" else 16)
    jobs = demo_jobs(args.jobs.split(","), scale=scale, device=device, out=args.out, workdir=args.workdir)
    with make_cluster(args.workers, device=device) as cluster, Client(cluster) as client:
        for name, title, job in jobs:
            print(f"\n== {title}")
            t0 = time.perf_counter()
            s = run(job, client)
            _DEMO_LINES[name](s, time.perf_counter() - t0)
        print(f"\ndashboard: {cluster.dashboard_link}")
    return 0


def _topk_extra(s: dict) -> str:
    return (
        f", k={s['k']}, {1e3 * s['latency_seconds_mean']:.2f} ms a query from its first round, "
        f"{s['fallback']} Monte-Carlo fallbacks, {s['exact']} exact ({s['without_rounds']} before any round)"
        + (f", {s['refined']} refined at the k-th value" if s.get("refine") else "")
    )


def _ppr_extra(s: dict) -> str:
    return f", method={s['method']}, models of the first: {s['models_first']}"


_DEMO_LINES = {
    "pagerank": _print_summary,
    "topk-ppr": lambda s, t: _batch_lines(s, t, _topk_extra(s)),
    "ppr": lambda s, t: _batch_lines(s, t, _ppr_extra(s)),
    "influence": lambda s, t: _influence_lines(s, t),  # defined below
    "simrank": lambda s, t: _batch_lines(s, t, f", k={s['k']}, epsilon={s['epsilon']:g}"),
}


def _pagerank(args) -> int:
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
        partitions=args.partitions,
    )
    t0 = time.perf_counter()
    summary = _execute(job, args)
    return _report(args, summary, lambda: _print_summary(summary, time.perf_counter() - t0))


def _run_spec(args) -> int:
    from .spec import build_job, load_spec

    job = build_job(load_spec(args.spec), args.spec)
    t0 = time.perf_counter()
    s = _execute(job, args)
    if "first" in s and "queries" in s:
        return _report(args, s, lambda: _batch_lines(s, time.perf_counter() - t0, ""))
    if s.get("job") == "pagerank":
        return _report(args, s, lambda: _print_summary(s, time.perf_counter() - t0))
    if s.get("job") == "influence":
        return _report(args, s, lambda: _influence_lines(s, time.perf_counter() - t0))
    return _report(args, s, lambda: print(f"\n{s.get('job')}: done in {time.perf_counter() - t0:.2f} s; "
                                          f"written: {s.get('out')}"))  # fmt: skip


def _execute(job, args) -> dict:
    from cluster import connect, set_worker_device
    from cluster.serve import tls

    from .job import run

    if args.connect_timeout is not None and not args.scheduler:
        raise OptionError("--connect-timeout applies only with --scheduler")
    if args.scheduler or args.cluster:
        opts = {"timeout": args.connect_timeout} if args.scheduler else {"device": args.device}
        security = tls(args.tls_ca_file, args.tls_cert, args.tls_key)
        with connect(args.scheduler, security=security, **opts) as client:
            return run(job, client, progress=not (args.quiet or args.json))
    set_worker_device(args.device)
    return run(job, progress=not (args.quiet or args.json))


def _index(args) -> int:
    from .ppr_index import index_job

    job = index_job(args.input, out=args.out, alpha=args.alpha, epsilon=args.epsilon,
                    delta_min=args.delta_min, seed=args.seed, directed=not args.undirected,
                    first_step=not args.paper_walks, order=None if args.order == "none" else args.order,
                    )  # fmt: skip
    t0 = time.perf_counter()
    s = _execute(job, args)
    return _report(args, s, lambda: print(
        f"\nindex: n={s['n']:,} vertices, m={s['m']:,} edges, {s['walks']:,} walks, "
        f"{s['irw_pairs']:,} IRW pairs, |H|={s['high']}, delta_min={s['delta_min']:.3g}, "
        f"{time.perf_counter() - t0:.2f} s"
        f"\nwritten: {args.out}"
    ))  # fmt: skip


def _sources_arg(args):
    if args.random is None:
        if args.random_among != "all":
            raise OptionError("--random-among applies only with --random")
        return SourceText.read(args.sources)
    return RandomSources(args.random, among=args.random_among)


def _run_batch(job, args, describe) -> int:
    """Run a batch-of-sources job; print its summary line, the first source's top entries, the output."""
    t0 = time.perf_counter()
    s = _execute(job, args)
    return _report(args, s, lambda: _batch_lines(s, time.perf_counter() - t0, describe(s)))


def _batch_lines(s: dict, seconds: float, extra: str) -> None:
    src, top = s["first"]
    print(
        f"\n{s['job']}: {s['queries']:,} sources, n={s['n']:,}, m={s['m']:,}, device={s['device']}, "
        f"{seconds:.2f} s ({1e3 * s['query_seconds_mean']:.2f} ms per source{extra})"
    )
    shown = ", ".join(f"{v} ({p:.4g})" for v, p in top if p > 0)  # score-0 vertices only fill the k
    print(f"first source {src}: {shown or 'every score is 0'}")
    resumed = f", {s['resumed_parts']} of them finished by an earlier run" if s.get("resumed_parts") else ""
    print(f"written: {s['out']} ({s['parts']} parts{resumed})")


def _topk(args) -> int:
    from .topk_ppr import topk_ppr_job

    job = topk_ppr_job(sources=_sources_arg(args), index=args.index, k=args.k, out=args.out, chunk=args.chunk,
                       seed=args.seed, overwrite=args.overwrite, streams=args.streams,
                       refine=args.refine)  # fmt: skip
    return _run_batch(job, args, _topk_extra)


def _ppr(args) -> int:
    from .ppr import ppr_job

    job = ppr_job(args.input, _sources_arg(args), out=args.out, topk=args.topk, method=args.method,
                  alpha=args.alpha, tol=args.tol, chunk=args.chunk, seed=args.seed, workdir=args.workdir,
                  directed=not args.undirected, overwrite=args.overwrite)  # fmt: skip
    return _run_batch(job, args, _ppr_extra)


def _influence(args) -> int:
    from .influence import influence_job

    try:
        weights = float(args.weights)
    except ValueError:
        weights = args.weights
    read = {"weighted": True} if args.weighted else None
    job = influence_job(args.input, args.k, out=args.out, epsilon=args.epsilon, ell=args.ell,
                        model=args.model, weights=weights, rounds=args.rounds, seed=args.seed,
                        max_rr_sets=args.max_rr_sets, n_sim=args.simulations, workdir=args.workdir,
                        directed=not args.undirected, read_options=read,
                        distributed={"auto": "auto", "on": True, "off": False}[args.distributed])  # fmt: skip
    t0 = time.perf_counter()
    s = _execute(job, args)
    return _report(args, s, lambda: _influence_lines(s, time.perf_counter() - t0))


def _influence_lines(s: dict, seconds: float) -> None:
    mc = s["mc_spread"]
    check = f", simulated {mc['mean']:.1f} +- {mc['stderr']:.1f}" if mc else ""
    print(
        f"\ninfluence: n={s['n']:,}, m={s['m']:,}, device={s['device']}, {seconds:.2f} s "
        f"(IMM {s['seconds']['total']:.3f} s, theta={s['theta']:,} RR samples"
        f"{', capped' if s['theta_capped'] else ''})\nspread: RR estimate {s['spread']:.1f}{check}"
    )
    print("seeds: " + ", ".join(str(v) for v in s["seeds"][:10]) + (" ..." if len(s["seeds"]) > 10 else ""))
    print(f"written: {s['out']}")


def _simrank(args) -> int:
    from .simrank import simrank_job

    if args.source is not None:
        sources = SourceText([args.source], origin="--source")
    else:
        sources = _sources_arg(args)
    try:
        samples = float(args.samples)
    except ValueError:
        samples = args.samples
    job = simrank_job(args.input, sources, k=args.k, out=args.out, c=args.decay, epsilon=args.epsilon,
                      clip=not args.no_clip, samples=samples, seed=args.seed, chunk=args.chunk,
                      workdir=args.workdir, directed=not args.undirected,
                      overwrite=args.overwrite)  # fmt: skip
    return _run_batch(job, args, lambda s: f", k={s['k']}, epsilon={s['epsilon']:g}, samples={s['samples']}")


def _cluster(args) -> int:
    from cluster.serve import serve, tls

    serve(gpus=args.gpus, workers=args.workers, host=args.host, port=args.port, dashboard=args.dashboard,
          security=tls(args.tls_ca_file, args.tls_cert, args.tls_key))  # fmt: skip
    return 0


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    handlers = {"demo": _demo, "run": _run_spec, "cluster": _cluster, "pagerank": _pagerank, "index": _index,
                "topk-ppr": _topk, "ppr": _ppr, "influence": _influence, "simrank": _simrank}  # fmt: skip
    handler = handlers[args.command]
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
