"""The `graphjobs` argument parser: one sub-command per job, with examples in each --help."""

from __future__ import annotations

import argparse

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
        "  graphjobs pagerank rmat:scale=20,seed=1 --device gpu"
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
        "examples:\n  graphjobs ppr soc-Epinions1.txt.gz --random 1000 --topk 50 --out ppr\n"
        "  graphjobs ppr rmat:22 --sources ids.txt --method push --tol 1e-7 --device gpu"
    ),
}


def _sources_options(p, *, single: bool = False):
    which = p.add_mutually_exclusive_group(required=True)
    if single:
        which.add_argument("--source", help="one source label")
    which.add_argument("--sources", help="text file with one source label per line (- for standard input)")
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
    p.add_argument("--json", action="store_true", help="print the job's summary as JSON (no progress bar)")
    _tls_options(p)


def _tls_options(p) -> None:
    p.add_argument("--tls-ca-file", help="TLS: certificate authority file (with --tls-cert, --tls-key)")
    p.add_argument("--tls-cert", help="TLS: certificate file")
    p.add_argument("--tls-key", help="TLS: private key file")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="graphjobs", description="Graph-analytics jobs on Dask, on GPUs or CPUs."
    )
    sub = ap.add_subparsers(dest="command", required=True)
    fmt = argparse.RawDescriptionHelpFormatter

    def command(name: str, help: str):
        return sub.add_parser(name, help=help, epilog=EXAMPLES[name], formatter_class=fmt)

    demo = command("demo", "every job on a generated R-MAT graph on a local cluster")
    demo.add_argument("--device", choices=["auto", "cpu", "gpu"], default="auto")
    demo.add_argument("--scale", type=int, help="R-MAT scale (default 16 on CPU, 20 on GPU)")
    demo.add_argument("--workers", type=int, help="Dask workers (default: one per GPU, or by core count)")
    demo.add_argument("--workdir", default=None, help="artifact folder (default .graphjobs)")
    demo.add_argument("--out", default="graphjobs-demo", help="folder of the jobs' outputs (graphjobs-demo)")
    demo.add_argument(
        "--jobs", default=",".join(DEMO_JOBS), help=f"comma-separated, of {','.join(DEMO_JOBS)}"
    )
    rn = command("run", "run the job a YAML spec describes")
    rn.add_argument("spec", help="YAML file: job, input, sources or k, params, out, workdir")
    _run_options(rn)
    cl = command("cluster", "start a local Dask cluster for jobs to submit to (until Ctrl-C)")
    cl.add_argument("--gpus", type=int, help="GPU workers (default: one per visible GPU; 0 for CPU workers)")
    cl.add_argument("--workers", type=int, help="CPU workers (default by core count)")
    cl.add_argument("--host", default="127.0.0.1", help="scheduler interface (127.0.0.1: this machine only)")
    cl.add_argument("--port", type=int, default=8786, help="scheduler port (8786; 0 picks a free one)")
    cl.add_argument("--dashboard", default="127.0.0.1:8787", help="dashboard address (127.0.0.1:8787)")
    _tls_options(cl)
    pr = command("pagerank", "PageRank of an edge list, written to Parquet")
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
    pr.add_argument("--partitions", type=_partitions, default="auto",
                    help="split the graph over N workers (auto: if a worker is too small)")  # fmt: skip
    pr.add_argument("--out", default="pagerank.parquet")
    pr.add_argument("--workdir", default=None)
    _run_options(pr)
    ix = command("index", "build the kPAR top-k PPR index of a graph")
    ix.add_argument("input", help="edge-list file or a spec like rmat:16")
    ix.add_argument("--out", required=True, help="folder for the graph, its PageRank and the index")
    ix.add_argument("--undirected", action="store_true", help="store every edge in both directions")
    ix.add_argument("--alpha", type=float, default=0.8, help="probability of following an edge (0.8)")
    ix.add_argument("--epsilon", type=float, default=0.5, help="relative error guarantee (0.5)")
    ix.add_argument(
        "--delta-min",
        default=None,
        help="smallest PPR value served: a number or K/n (16/n); 2/n buys precision",
    )
    ix.add_argument("--seed", type=int, default=0)
    ix.add_argument("--paper-walks", action="store_true",
                    help="the paper's index walks (default: walks that take their first step)")  # fmt: skip
    ix.add_argument("--order", choices=["auto", "degree", "out_degree", "in_degree", "none"], default="auto",
                    help="index graph order, hubs first (auto: degree from 2^22 vertices)")  # fmt: skip
    _run_options(ix)
    tk = command("topk-ppr", "top-k personalized PageRank of many sources")
    tk.add_argument("--index", required=True, help="folder written by `graphjobs index`")
    _sources_options(tk)
    tk.add_argument("-k", type=int, default=100, help="vertices per source (100)")
    tk.add_argument(
        "--out", default="topk-ppr", help="folder of Parquet partitions (source, rank, vertex, ppr)"
    )
    _batch_options(tk, chunk=1000)
    tk.add_argument(
        "--streams", type=int, default=None,
        help="sources a GPU worker answers at once within a chunk (default: the operator's choice)",
    )  # fmt: skip
    tk.add_argument("--refine", action=argparse.BooleanOptionalAction, default=True,
                    help="re-estimate the vertices near the k-th estimate from their in-neighbours' "
                         "(default; higher precision for 7-45%% more time a query)")  # fmt: skip
    pp = command("ppr", "personalized PageRank (push/pull hybrid) of many sources, top entries to Parquet")
    pp.add_argument("input", help="edge-list file or a spec like rmat:16")
    _sources_options(pp)
    pp.add_argument("--topk", type=int, default=100, help="entries kept per source (100)")
    methods = ["auto", "hybrid", "push", "pull", "power", "montecarlo"]
    pp.add_argument("--method", choices=methods, default="auto")
    pp.add_argument("--alpha", type=float, default=0.8, help="probability of following an edge (0.8)")
    pp.add_argument("--tol", type=float, default=1e-6, help="residue threshold r_max (1e-6)")
    pp.add_argument("--undirected", action="store_true", help="store every edge in both directions")
    pp.add_argument("--out", default="ppr", help="folder of Parquet partitions (source, rank, vertex, ppr)")
    pp.add_argument("--workdir", default=None)
    _batch_options(pp, chunk=100)
    im = command("influence", "influence maximization (IMM, IC or LT): k seeds to CSV")
    im.add_argument("input", help="edge-list file or a spec like ba:n=10000,m=4")
    im.add_argument("-k", type=int, default=50, help="seeds (per round), 50")
    im.add_argument("--epsilon", type=float, default=0.1, help="approximation slack (0.1)")
    im.add_argument("--ell", type=float, default=1.0, help="failure probability n^-ell (1)")
    im.add_argument("--model", type=str.upper, choices=["IC", "LT"], default="IC")
    im.add_argument("--weights", default="wc", help="wc, trivalency, graph, or a probability (wc)")
    im.add_argument("--rounds", type=int, default=1, help="multi-round IM: k seeds in each round (1)")
    im.add_argument("--max-rr-sets", type=int, default=None, help="cap on RR samples (voids the guarantee)")
    im.add_argument("--simulations", type=int, default=10_000, help="Monte Carlo runs checking the spread")
    im.add_argument("--undirected", action="store_true", help="store every edge in both directions")
    im.add_argument("--weighted", action="store_true", help="read edge weights (for --weights graph)")
    im.add_argument("--out", default="seeds.csv", help="CSV of the seeds (rank, vertex, round, gain)")
    im.add_argument("--workdir", default=None)
    im.add_argument("--seed", type=int, default=0)
    im.add_argument("--distributed", choices=["auto", "on", "off"], default="auto",
                    help="spread the RR samples over the workers (auto: with 2 or more)")  # fmt: skip
    _run_options(im)
    sr = command("simrank", "single-source SimRank (ClipSim) of many sources, top-k to Parquet")
    sr.add_argument("input", help="edge-list file or a spec like rmat:16")
    _sources_options(sr, single=True)
    sr.add_argument("-k", type=int, default=100, help="similar vertices kept per source (100)")
    sr.add_argument("--epsilon", type=float, default=1e-3, help="additive error target (1e-3)")
    sr.add_argument("-c", "--decay", type=float, default=0.6, help="SimRank decay factor c (0.6)")
    sr.add_argument(
        "--samples", default="bound", help="bound (proven R), practical (the published codes' R) or a number"
    )
    sr.add_argument("--no-clip", action="store_true", help="ExactSim's allocation instead of ClipSim's")
    sr.add_argument("--undirected", action="store_true", help="store every edge in both directions")
    sr.add_argument(
        "--out", default="simrank", help="folder of Parquet partitions (source, rank, vertex, simrank)"
    )
    sr.add_argument("--workdir", default=None)
    _batch_options(sr, chunk=10)
    return ap


def _partitions(text: str):
    return text if text == "auto" else int(text)
