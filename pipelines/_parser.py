"""The `graphjobs` argument parser: one sub-command per job, with examples in each --help."""

from __future__ import annotations

import argparse
import sys

from operators.options import (
    PPR_METHODS,
    IMMOptions,
    IndexOptions,
    PageRankOptions,
    PPROptions,
    SimRankOptions,
    TopkOptions,
)

from .demo import DEMO_JOBS

EXAMPLES = {
    "demo": (
        "examples:\n  graphjobs demo\n  graphjobs demo --device cpu --scale 14\n"
        "  graphjobs demo --jobs pagerank,topk-ppr --out demo"
    ),
    "run": (
        "examples:\n  graphjobs run job.yaml\n"
        "  graphjobs run job.yaml --scheduler tcp://10.0.0.5:8786 --json\n\n"
        "job.yaml:\n  job: topk-ppr\n  input: soc-Epinions1.txt.gz\n  sources: {random: 1000}\n"
        "  params: {k: 50}\n  out: topk"
    ),
    "cluster": (
        "examples:\n  graphjobs cluster --gpus 2\n"
        "  graphjobs cluster --gpus 0 --workers 4 --port 0\n"
        "  graphjobs cluster --host 0.0.0.0 --tls-ca-file ca.pem --tls-cert node.pem --tls-key node.key"
    ),
    "pagerank": (
        "examples:\n  graphjobs pagerank soc-Epinions1.txt.gz --out ranks.parquet\n"
        "  graphjobs pagerank edges.csv --undirected --alpha 0.9 --scheduler tcp://10.0.0.5:8786\n"
        "  graphjobs pagerank rmat:scale=20,seed=1 --order degree --device gpu"
    ),
    "index": (
        "examples:\n  graphjobs index soc-Epinions1.txt.gz --out epinions-index\n"
        "  graphjobs index rmat:22 --out r22"
    ),
    "topk-ppr": (
        "examples:\n  graphjobs topk-ppr --index epinions-index --random 10000 -k 100 --out topk\n"
        "  graphjobs topk-ppr --index r22 --sources ids.txt -k 1000 --out topk --scheduler tcp://10.0.0.5:8786"
    ),
    "simrank": (
        "examples:\n  graphjobs simrank ca-GrQc.txt.gz --source 3466 -k 100 --epsilon 1e-2\n"
        "  graphjobs simrank soc-Slashdot0902.txt.gz --sources ids.txt -k 100 --epsilon 1e-4 "
        "--samples practical"
    ),
    "influence": (
        "examples:\n  graphjobs influence soc-Epinions1.txt.gz -k 50 --epsilon 0.05 --model IC --weights wc "
        "--out seeds.csv\n  graphjobs influence ba:n=100000,m=8 -k 20 --model LT --rounds 3 --device gpu"
    ),
    "ppr": (
        "examples:\n  graphjobs ppr soc-Epinions1.txt.gz --random 1000 -k 50 --out ppr\n"
        "  graphjobs ppr soc-Epinions1.txt.gz --source 0 --source 17 -k 10\n"
        "  graphjobs ppr rmat:22 --sources ids.txt --method push --tol 1e-7 --device gpu"
    ),
}


class _Former(argparse.Action):
    """A former spelling of an option, still accepted: it sets the option's value and warns on standard
    error that ``instead`` is the spelling to use."""

    def __init__(self, option_strings, dest, *, instead: str, **kw):
        self.instead = instead
        kw.setdefault("help", f"deprecated spelling of {instead} (still accepted)")
        super().__init__(option_strings, dest, default=argparse.SUPPRESS, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"graphjobs: warning: {option_string} is deprecated; use {self.instead}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_former(p, flag: str, *, dest: str, instead: str, **kw) -> None:
    """Accept ``flag``, a former spelling of the option ``instead`` (stored in ``dest``), with a warning."""
    p.add_argument(flag, action=_Former, dest=dest, instead=instead, **kw)


def add_option(p, options, name: str, *flags, **kw) -> None:
    """Add ``flags`` (default: ``--name``) for the field ``name`` of the options class ``options``, with
    its default and its help text, the default shown; ``kw`` goes to ``add_argument`` (type, choices)."""
    default = getattr(options, name)
    shown = f"{default:g}".replace("e-0", "e-") if isinstance(default, float) else str(default)
    flags = flags or ("--" + name.replace("_", "-"),)
    p.add_argument(*flags, default=default, help=f"{options.help(name)} ({shown})", **kw)


def _sources_options(p):
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--source", action="append", metavar="LABEL", help="a source label (repeat for more sources)"
    )
    which.add_argument(
        "--sources", metavar="FILE", help="text file with one source label per line (- for standard input)"
    )
    which.add_argument("--random", type=int, metavar="N", help="N distinct random sources")
    among = "draw --random sources among all vertices, or those with out- / in-edges"
    p.add_argument("--random-among", choices=["all", "out", "in"], default="all", help=among)


def _batch_options(p, *, chunk: int) -> None:
    p.add_argument("--chunk", type=int, default=chunk, help="sources per task")
    p.add_argument("--overwrite", action="store_true", help="replace another job's results in --out")
    p.add_argument("--seed", type=int, default=0)
    _run_options(p)


def _run_options(p) -> None:
    p.add_argument("--scheduler", help="address of a running Dask scheduler, e.g. tcp://host:8786")
    p.add_argument(
        "--connect-timeout",
        type=float,
        metavar="SECONDS",
        help="with --scheduler: how long to wait for it to answer (default: dask's, 30 s)",
    )
    p.add_argument(
        "--cluster", action="store_true", help="start a local Dask cluster (dashboard) for the job"
    )
    p.add_argument(
        "--device", choices=["auto", "cpu", "gpu"], default="auto", help="where to compute locally"
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--progress",
        action="store_true",
        help="progress also where standard error is not a terminal (a log: a line every 10 s)",
    )
    p.add_argument("--json", action="store_true", help="print the job's summary as JSON (no progress bar)")
    _tls_options(p)


def _tls_options(p) -> None:
    p.add_argument("--tls-ca-file", help="TLS: certificate authority file (with --tls-cert, --tls-key)")
    p.add_argument("--tls-cert", help="TLS: certificate file")
    p.add_argument("--tls-key", help="TLS: private key file")


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors (unknown option, bad choice, missing argument) exit with
    status 1, like every other error a user can act on, after the usage line and a one-line message.
    Options are never abbreviated: ``--source`` is ``--source``, never a prefix of ``--sources``."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {message}\n")


def parser(commands, *, version: str) -> argparse.ArgumentParser:
    """The ``graphjobs`` parser: ``--version``, then one sub-command per entry of ``commands`` (objects
    with ``name``, ``help`` and ``options``, a function adding the command's options to its parser)."""
    ap = Parser(prog="graphjobs", description="Graph-analytics jobs on Dask, on GPUs or CPUs.")
    ap.add_argument("--version", action="version", version=f"graphjobs {version}")
    sub = ap.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in commands:
        p = sub.add_parser(
            command.name,
            help=command.help,
            epilog=EXAMPLES[command.name],
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        command.options(p)
    return ap


def demo_options(p) -> None:
    """Options of `graphjobs demo`: every job on a generated R-MAT graph on a local cluster."""
    p.add_argument("--device", choices=["auto", "cpu", "gpu"], default="auto")
    p.add_argument("--scale", type=int, help="R-MAT scale (default 16 on CPU, 20 on GPU)")
    p.add_argument("--workers", type=int, help="Dask workers (default: one per GPU, or by core count)")
    p.add_argument("--workdir", default=None, help="artifact folder (default .graphjobs)")
    p.add_argument("--out", default="graphjobs-demo", help="folder of the jobs' outputs (graphjobs-demo)")
    p.add_argument("--jobs", default=",".join(DEMO_JOBS), help=f"comma-separated, of {','.join(DEMO_JOBS)}")
    keep = "keep the cluster and its dashboard up after the jobs, until Ctrl-C"
    p.add_argument("--keep", action="store_true", help=keep)


def run_options(p) -> None:
    """Options of `graphjobs run`: run the job a YAML spec describes."""
    p.add_argument("spec", help="YAML file: job, input, sources or k, params, out, workdir")
    _run_options(p)


def cluster_options(p) -> None:
    """Options of `graphjobs cluster`: start a local Dask cluster for jobs to submit to (until Ctrl-C)."""
    p.add_argument("--gpus", type=int, help="GPU workers (default: one per visible GPU; 0 for CPU workers)")
    p.add_argument("--workers", type=int, help="CPU workers (default by core count)")
    p.add_argument("--host", default="127.0.0.1", help="scheduler interface (127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8786, help="scheduler port (8786; 0 picks a free one)")
    p.add_argument("--dashboard", default="127.0.0.1:8787", help="dashboard address (127.0.0.1:8787)")
    _tls_options(p)


def _column(text: str):
    return int(text) if text.isdigit() else text


def pagerank_options(p) -> None:
    """Options of `graphjobs pagerank`: PageRank of an edge list, written to Parquet."""
    p.add_argument("input", help="edge-list file (.txt/.gz/.csv/.tsv/.parquet/.mtx) or a spec like rmat:16")
    p.add_argument("--undirected", action="store_true", help="store every edge in both directions")
    p.add_argument("--weighted", action="store_true", help="read edge weights from the third column")
    p.add_argument("--dedupe", action="store_true", help="drop repeated edges")
    p.add_argument("--src-col", type=_column, help="source column: a name or a 0-based position")
    p.add_argument("--dst-col", type=_column, help="destination column: a name or a 0-based position")
    orders = ["degree", "in_degree", "out_degree"]
    p.add_argument(
        "--order", choices=orders, help="renumber vertices once at load for locality (labels are kept)"
    )
    add_former(p, "--reorder", dest="order", instead="--order", choices=orders)
    add_option(p, PageRankOptions, "alpha", type=float)
    add_option(p, PageRankOptions, "tol", type=float)
    add_option(p, PageRankOptions, "max_iter", type=int)
    p.add_argument(
        "--partitions",
        type=_partitions,
        default="auto",
        help="split the graph over N workers (auto: if a worker is too small)",
    )
    p.add_argument("--out", default="pagerank.parquet")
    p.add_argument("--overwrite", action="store_true", help="replace another PageRank job's result in --out")
    p.add_argument("--workdir", default=None)
    _run_options(p)


def index_options(p) -> None:
    """Options of `graphjobs index`: build the kPAR top-k PPR index of a graph."""
    p.add_argument("input", help="edge-list file or a spec like rmat:16")
    p.add_argument("--out", required=True, help="folder for the graph, its PageRank and the index")
    p.add_argument("--undirected", action="store_true", help="store every edge in both directions")
    add_option(p, IndexOptions, "alpha", type=float)
    add_option(p, IndexOptions, "epsilon", type=float)
    p.add_argument(
        "--delta-min",
        default=None,
        help="smallest PPR value served: a number or K/n (16/n); 2/n buys precision",
    )
    add_option(p, IndexOptions, "seed", type=int)
    p.add_argument(
        "--paper-walks",
        action="store_true",
        help="the paper's index walks (default: walks that take their first step)",
    )
    p.add_argument(
        "--order",
        choices=["auto", "degree", "out_degree", "in_degree", "none"],
        default="auto",
        help="index graph order, hubs first (auto: degree from 2^22 vertices)",
    )
    _run_options(p)


def topk_ppr_options(p) -> None:
    """Options of `graphjobs topk-ppr`: top-k personalized PageRank of many sources."""
    p.add_argument("--index", required=True, help="folder written by `graphjobs index`")
    _sources_options(p)
    add_option(p, TopkOptions, "k", "-k", "--k", type=int)
    p.add_argument(
        "--out", default="topk-ppr", help="folder of Parquet partitions (source, rank, vertex, ppr)"
    )
    _batch_options(p, chunk=1000)
    p.add_argument(
        "--streams",
        type=int,
        default=None,
        help="sources a GPU worker answers at once within a chunk (default: the operator's choice)",
    )
    refine = f"{TopkOptions.help('refine')} (default; higher precision for 7-45%% more time a query)"
    p.add_argument("--refine", action=argparse.BooleanOptionalAction, default=TopkOptions.refine, help=refine)


def ppr_options(p) -> None:
    """Options of `graphjobs ppr`: personalized PageRank of many sources, top entries to Parquet."""
    p.add_argument("input", help="edge-list file or a spec like rmat:16")
    _sources_options(p)
    p.add_argument("-k", "--k", type=int, default=100, help="entries kept per source (100)")
    add_former(p, "--topk", dest="k", instead="-k", type=int, metavar="K")
    add_option(p, PPROptions, "method", choices=list(PPR_METHODS))
    add_option(p, PPROptions, "alpha", type=float)
    add_option(p, PPROptions, "tol", type=float)
    p.add_argument("--undirected", action="store_true", help="store every edge in both directions")
    p.add_argument("--out", default="ppr", help="folder of Parquet partitions (source, rank, vertex, ppr)")
    p.add_argument("--workdir", default=None)
    _batch_options(p, chunk=100)


def influence_options(p) -> None:
    """Options of `graphjobs influence`: influence maximization (IMM, IC or LT): k seeds to CSV."""
    p.add_argument("input", help="edge-list file or a spec like ba:n=10000,m=4")
    p.add_argument("-k", "--k", type=int, default=50, help="seeds (per round), 50")
    add_option(p, IMMOptions, "epsilon", type=float)
    add_option(p, IMMOptions, "ell", type=float)
    add_option(p, IMMOptions, "model", type=str.upper, choices=["IC", "LT"])
    add_option(p, IMMOptions, "weights")
    add_option(p, IMMOptions, "rounds", type=int)
    add_option(p, IMMOptions, "max_rr_sets", type=int)
    p.add_argument("--simulations", type=int, default=10_000, help="at most so many Monte Carlo runs (10000)")
    stop = "stop the Monte Carlo runs once the spread's standard error is this fraction of it (0.01; 0: all)"
    p.add_argument("--spread-rtol", type=float, default=0.01, help=stop)
    p.add_argument("--undirected", action="store_true", help="store every edge in both directions")
    p.add_argument("--weighted", action="store_true", help="read edge weights (for --weights graph)")
    p.add_argument("--out", default="seeds.csv", help="CSV of the seeds (rank, vertex, round, gain)")
    p.add_argument("--overwrite", action="store_true", help="replace another influence job's seeds in --out")
    p.add_argument("--workdir", default=None)
    add_option(p, IMMOptions, "seed", type=int)
    p.add_argument(
        "--distributed",
        choices=["auto", "on", "off"],
        default="auto",
        help="spread the RR samples over the workers (auto: with 2 or more)",
    )
    _run_options(p)


def simrank_options(p) -> None:
    """Options of `graphjobs simrank`: single-source SimRank (ClipSim) of many sources, top-k to Parquet."""
    p.add_argument("input", help="edge-list file or a spec like rmat:16")
    _sources_options(p)
    add_option(p, SimRankOptions, "k", "-k", "--k", type=int)
    add_option(p, SimRankOptions, "epsilon", type=float)
    add_option(p, SimRankOptions, "c", "-c", "--decay", type=float)
    add_option(p, SimRankOptions, "samples")
    p.add_argument("--no-clip", action="store_true", help="ExactSim's allocation instead of ClipSim's")
    p.add_argument("--undirected", action="store_true", help="store every edge in both directions")
    p.add_argument(
        "--out", default="simrank", help="folder of Parquet partitions (source, rank, vertex, simrank)"
    )
    p.add_argument("--workdir", default=None)
    _batch_options(p, chunk=10)


def _partitions(text: str):
    return text if text == "auto" else int(text)
