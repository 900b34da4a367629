"""The `graphjobs` command line: a table of sub-commands, one line for each error a user can act on.

Every sub-command is one ``Command`` of ``COMMANDS``: its name and help, the function adding its options,
and either the function building its job from the parsed options (the job is then run and its
``Summary`` printed) or, for ``demo`` and ``cluster``, the command's own action.

Exit status: 0 on success; 1 for an error a user can act on (a ``graphs.errors.UserError``, a file named
on the command line that cannot be opened, a usage error), printed as one line ``graphjobs: error: ...``;
130 when interrupted (Ctrl-C), 143 when terminated (SIGTERM: handled as Ctrl-C is, locks released and
temporaries removed); 2 for anything else, a bug, shown with its traceback.

Output: the result (the summary's lines, or with ``--json`` exactly one JSON document) goes to standard
output; status lines and progress go to standard error.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from graphs.errors import OptionError, UserError

from . import _parser
from .sources import RandomSources, SourceText

FILE_ERRORS = (FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError, PermissionError)


@dataclass(frozen=True)
class Command:
    """One sub-command: ``options(parser)`` adds its options; ``job(args)`` builds the ``Job`` it runs
    (its summary is printed by ``report``), or ``action(args)`` does the whole command and returns the
    exit status."""

    name: str
    help: str
    options: Callable
    job: Callable | None = None
    action: Callable | None = None


def version() -> str:
    """The installed distribution's version, else the one in the source tree's pyproject.toml."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("graphjobs")
    except PackageNotFoundError:
        import tomllib

        pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
        return tomllib.loads(pyproject.read_text())["project"]["version"]


def _execute(job, args):
    """Run ``job`` where the options say: on the scheduler at ``--scheduler``, on a new local cluster
    (``--cluster``), or on Dask's local scheduler; its ``Summary``."""
    from cluster import connect, set_worker_device
    from cluster.serve import tls

    from .job import SchedulerLostError, run

    if args.connect_timeout is not None and not args.scheduler:
        raise OptionError("--connect-timeout applies only with --scheduler")
    # progress on a terminal, or in a log when asked (--progress); never with --quiet or --json
    progress = not (args.quiet or args.json) and (args.progress or sys.stderr.isatty())
    if args.scheduler or args.cluster:
        opts = {"timeout": args.connect_timeout} if args.scheduler else {"device": args.device}
        security = tls(args.tls_ca_file, args.tls_cert, args.tls_key)
        with connect(args.scheduler, security=security, **opts) as client:
            try:
                return run(job, client, progress=progress)
            except SchedulerLostError:  # closing the client logs its failed reconnection: said in one line
                logging.getLogger("distributed.client").setLevel(logging.CRITICAL)
                raise
    set_worker_device(args.device)
    return run(job, progress=progress)


def report(args, summary, seconds: float) -> None:
    """Print ``summary``: one JSON document with ``--json``, else its lines."""
    if args.json:
        print(summary.to_json())
    else:
        print("\n".join(summary.lines(seconds=seconds)))


def _run_job(command: Command, args) -> int:
    job = command.job(args)
    t0 = time.perf_counter()
    summary = _execute(job, args)
    report(args, summary, time.perf_counter() - t0)
    return 0


def _sources_arg(args):
    if args.random is None and args.random_among != "all":
        raise OptionError("--random-among applies only with --random")
    if args.source is not None:  # --source LABEL, repeated
        return SourceText(args.source, origin="--source")
    if args.random is None:
        return SourceText.read(args.sources)
    return RandomSources(args.random, among=args.random_among)


def _number_or_name(text: str):
    try:
        return float(text)
    except ValueError:
        return text


def _pagerank_job(args):
    from .pagerank import pagerank_job

    return pagerank_job(
        args.input,
        alpha=args.alpha,
        tol=args.tol,
        max_iter=args.max_iter,
        directed=not args.undirected,
        read_options={
            "weighted": args.weighted or None,
            "dedupe": args.dedupe or None,
            "src_col": args.src_col,
            "dst_col": args.dst_col,
        },
        reorder=args.order,
        out=args.out,
        workdir=args.workdir,
        partitions=args.partitions,
        overwrite=args.overwrite,
    )


def _spec_job(args):
    from .spec import build_job, load_spec

    return build_job(load_spec(args.spec), args.spec)


def _index_job(args):
    from .ppr_index import index_job

    return index_job(
        args.input,
        out=args.out,
        alpha=args.alpha,
        epsilon=args.epsilon,
        delta_min=args.delta_min,
        seed=args.seed,
        directed=not args.undirected,
        first_step=not args.paper_walks,
        order=None if args.order == "none" else args.order,
    )


def _topk_job(args):
    from .topk_ppr import topk_ppr_job

    return topk_ppr_job(
        sources=_sources_arg(args),
        index=args.index,
        k=args.k,
        out=args.out,
        chunk=args.chunk,
        seed=args.seed,
        overwrite=args.overwrite,
        streams=args.streams,
        refine=args.refine,
    )


def _ppr_job(args):
    from .ppr import ppr_job

    return ppr_job(
        args.input,
        _sources_arg(args),
        out=args.out,
        topk=args.k,
        method=args.method,
        alpha=args.alpha,
        tol=args.tol,
        chunk=args.chunk,
        seed=args.seed,
        workdir=args.workdir,
        directed=not args.undirected,
        overwrite=args.overwrite,
    )


def _influence_job(args):
    from .influence import influence_job

    return influence_job(
        args.input,
        args.k,
        out=args.out,
        epsilon=args.epsilon,
        ell=args.ell,
        model=args.model,
        weights=_number_or_name(args.weights),
        rounds=args.rounds,
        seed=args.seed,
        max_rr_sets=args.max_rr_sets,
        n_sim=args.simulations,
        spread_rtol=args.spread_rtol or None,
        workdir=args.workdir,
        directed=not args.undirected,
        read_options={"weighted": True} if args.weighted else None,
        distributed={"auto": "auto", "on": True, "off": False}[args.distributed],
        overwrite=args.overwrite,
    )


def _simrank_job(args):
    from .simrank import simrank_job

    return simrank_job(
        args.input,
        _sources_arg(args),
        k=args.k,
        out=args.out,
        c=args.decay,
        epsilon=args.epsilon,
        clip=not args.no_clip,
        samples=_number_or_name(args.samples),
        seed=args.seed,
        chunk=args.chunk,
        workdir=args.workdir,
        directed=not args.undirected,
        overwrite=args.overwrite,
    )


def _demo(args) -> int:
    """Every demo job on one local cluster, each job's lines printed as it finishes."""
    from distributed import Client

    from cluster import make_cluster
    from graphs._device import resolve_device

    from .demo import demo_jobs
    from .job import run
    from .summary import DemoRun, DemoSummary

    device = resolve_device(args.device)
    scale = args.scale or (20 if device == "gpu" else 16)
    jobs = demo_jobs(args.jobs.split(","), scale=scale, device=device, out=args.out, workdir=args.workdir)
    demo = DemoSummary()
    with make_cluster(args.workers, device=device) as cluster, Client(cluster) as client:
        print(f"dashboard (while the demo runs): {cluster.dashboard_link}", flush=True)
        for name, title, job in jobs:
            print(f"\n== {title}", flush=True)
            t0 = time.perf_counter()
            summary = run(job, client)
            done = DemoRun(name=name, title=title, summary=summary, seconds=time.perf_counter() - t0)
            demo.runs.append(done)
            print("\n".join(done.summary.lines(seconds=done.seconds)), flush=True)
        if args.keep:  # a link that works as long as it is printed
            demo.dashboard = cluster.dashboard_link
            print(f"\ndashboard: {demo.dashboard} (kept up until Ctrl-C)", flush=True)
            try:
                while True:
                    time.sleep(1)
            except KeyboardInterrupt as exc:
                if isinstance(exc, Terminated):  # SIGTERM: interrupted, as any job
                    raise
                print("stopping the cluster", flush=True)
    if not args.keep:
        print("\nthe cluster has stopped: graphjobs demo --keep keeps its dashboard up", flush=True)
    return 0


def _cluster(args) -> int:
    from cluster.serve import serve, tls

    serve(
        gpus=args.gpus,
        workers=args.workers,
        host=args.host,
        port=args.port,
        dashboard=args.dashboard,
        security=tls(args.tls_ca_file, args.tls_cert, args.tls_key),
    )
    return 0


COMMANDS = {
    c.name: c
    for c in (
        Command(
            "demo",
            "every job on a generated R-MAT graph on a local cluster",
            _parser.demo_options,
            action=_demo,
        ),
        Command("run", "run the job a YAML spec describes", _parser.run_options, job=_spec_job),
        Command(
            "cluster",
            "start a local Dask cluster for jobs to submit to (until Ctrl-C)",
            _parser.cluster_options,
            action=_cluster,
        ),
        Command(
            "pagerank",
            "PageRank of an edge list, written to Parquet",
            _parser.pagerank_options,
            job=_pagerank_job,
        ),
        Command("index", "build the kPAR top-k PPR index of a graph", _parser.index_options, job=_index_job),
        Command(
            "topk-ppr", "top-k personalized PageRank of many sources", _parser.topk_ppr_options, job=_topk_job
        ),
        Command(
            "ppr",
            "personalized PageRank (push/pull hybrid) of many sources, top entries to Parquet",
            _parser.ppr_options,
            job=_ppr_job,
        ),
        Command(
            "influence",
            "influence maximization (IMM, IC or LT): k seeds to CSV",
            _parser.influence_options,
            job=_influence_job,
        ),
        Command(
            "simrank",
            "single-source SimRank (ClipSim) of many sources, top-k to Parquet",
            _parser.simrank_options,
            job=_simrank_job,
        ),
    )
}


def parser():
    """The ``graphjobs`` argument parser, one sub-command per entry of ``COMMANDS``."""
    return _parser.parser(COMMANDS.values(), version=version())


def _file_message(exc: OSError) -> str:
    """One line naming the file: ``PATH: reason``."""
    if exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {exc.strerror}"
    return str(exc)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread as Ctrl-C's KeyboardInterrupt is, so that it unwinds the same
    way: locks released, temporaries removed, one line, exit status 128 + SIGTERM."""


def _terminate(signum, frame):
    raise Terminated()


def main(argv=None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); the exit status."""
    args = parser().parse_args(argv)
    command = COMMANDS[args.command]
    main_thread = threading.current_thread() is threading.main_thread()
    # Ctrl-C raises KeyboardInterrupt even where the process started with SIGINT ignored (as a shell's
    # background jobs do), and SIGTERM unwinds the same way
    before = {}
    if main_thread:
        before = {
            signal.SIGTERM: signal.signal(signal.SIGTERM, _terminate),
            signal.SIGINT: signal.signal(signal.SIGINT, signal.default_int_handler),
        }
    try:
        return _main(command, args)
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def _main(command: Command, args) -> int:
    try:
        return command.action(args) if command.action is not None else _run_job(command, args)
    except UserError as exc:
        return _error(str(exc))
    except FILE_ERRORS as exc:  # a file named on the command line (or in a spec) that cannot be opened
        return _error(_file_message(exc))
    except KeyboardInterrupt as exc:
        print("graphjobs: interrupted", file=sys.stderr)
        return 128 + signal.SIGTERM if isinstance(exc, Terminated) else 130
    except Exception:  # a bug, not a user mistake: show everything
        traceback.print_exc()
        print("graphjobs: internal error (please report it with the traceback above)", file=sys.stderr)
        return 2


def _error(message: str) -> int:
    print(f"graphjobs: error: {message}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
