"""Run the benchmarks: python -m benchmarks.run --device cpu|gpu --out FILE.jsonl [--only pagerank,load]."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from benchmarks import (
    influence,
    load,
    pagerank,
    ppr_push,
    scale_out,
    simrank,
    stream_parquet,
    topk_ablation,
    topk_ppr,
    topk_refine,
)
from benchmarks.common import Reporter

ROOT = Path(__file__).resolve().parents[1]


def dataset_dir() -> Path | None:
    for d in (os.environ.get("GRAPHJOBS_DATASETS"), ROOT.parent / "shared" / "datasets", ROOT / ".data"):
        if d and Path(d).is_dir():
            return Path(d)
    return None


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--device", choices=["cpu", "gpu"], required=True)
    ap.add_argument("--out", required=True, help="JSON-lines file to append to")
    ap.add_argument(
        "--only",
        default="pagerank,load",
        help="pagerank,load,topk,topk-refine,topk-large,ppr,ppr-precision,ppr-job,influence,simrank,pagerank-mg,"
        "topk-mg,imm-mg,stream-parquet",
    )
    ap.add_argument("--topk-scales", default="22,24", help="R-MAT scales of the top-k PPR benchmark (GPU)")
    ap.add_argument("--topk-large", default="26:22", help="scale:edge_factor of the topk-large graphs (GPU)")
    ap.add_argument("--large-batch", type=int, default=2000, help="sources of topk-large's batches")
    ap.add_argument("--stream-scales", default="24", help="R-MAT scales of stream-parquet")
    ap.add_argument("--stream-workdir", default=None, help="where stream-parquet writes its dataset")
    ap.add_argument("--ppr-scales", default="22,24", help="R-MAT scales of the push/pull PPR benchmark (GPU)")
    ap.add_argument("--ppr-methods", default="", help="these PPR methods only (comma-separated)")
    ap.add_argument("--ba-degrees", default="2,4,8,16,32", help="r of the n=1e6 BA graphs of IMM (GPU)")
    ap.add_argument("--imm-scales", default="26", help="R-MAT scales of influence-rmat (GPU, IC, eps 0.1)")
    ap.add_argument("--simrank-scales", default="22", help="R-MAT scales of the SimRank benchmark (GPU)")
    ap.add_argument(
        "--simrank-graphs",
        default="soc-Slashdot0902,soc-Epinions1",
        help="SNAP graphs of the SimRank benchmark (empty: none)",
    )
    ap.add_argument("--mg-scales", default="25,26", help="R-MAT scales of the multi-GPU PageRank benchmark")
    ap.add_argument("--mg-gpus", default="1,2,4", help="GPU counts of the multi-GPU benchmarks")
    ap.add_argument("--mg-workdir", default="/tmp/graphjobs-mg", help="index and outputs of topk-mg")
    ap.add_argument("--batch", type=int, default=10_000, help="sources of the top-k batch throughput run")
    ap.add_argument("--scales", default=None, help="R-MAT scales (GPU default 20,22,24,25; CPU 16,18)")
    ap.add_argument("--weighted-scales", default="22,24", help="GPU scales also run with edge weights")
    args = ap.parse_args(argv)
    only = set(args.only.split(","))
    rep = Reporter(args.out, args.device)
    default = "20,22,24,25" if args.device == "gpu" else "16,18"
    scales = [int(s) for s in (args.scales or default).split(",") if s]
    if "load" in only:
        load.run(rep, args.device)
    if "pagerank" in only:
        if args.device == "gpu":
            weighted = {int(s) for s in args.weighted_scales.split(",") if s}
            pagerank.gpu(rep, scales, weighted)
        else:
            pagerank.cpu(rep, dataset_dir(), scales)
    if "topk" in only:
        tscales = [int(s) for s in args.topk_scales.split(",") if s] if args.device == "gpu" else []
        topk_ppr.run(rep, args.device, dataset_dir(), tscales, args.batch)
    if "topk-refine" in only:
        tscales = [int(s) for s in args.topk_scales.split(",") if s] if args.device == "gpu" else []
        topk_refine.run(rep, args.device, dataset_dir(), tscales, args.batch)
    if "topk-large" in only and args.device == "gpu":
        specs = [tuple(int(x) for x in spec.split(":")) for spec in args.topk_large.split(",") if spec]
        topk_ppr.run_large(rep, specs, args.large_batch)
    if "stream-parquet" in only:
        sscales = [int(s) for s in args.stream_scales.split(",") if s]
        stream_parquet.run(rep, args.device, sscales, args.stream_workdir)
    if "topk-ablation" in only:
        tscales = [int(s) for s in args.topk_scales.split(",") if s] if args.device == "gpu" else []
        topk_ablation.run_ablation(rep, args.device, dataset_dir(), tscales)
    if "ppr" in only:
        pscales = [int(s) for s in args.ppr_scales.split(",") if s] if args.device == "gpu" else []
        methods = [m for m in args.ppr_methods.split(",") if m] or None
        ppr_push.run(rep, args.device, dataset_dir(), pscales, methods)
    if "ppr-precision" in only:
        pscales = [int(s) for s in args.ppr_scales.split(",") if s]
        ppr_push.run_precision(rep, args.device, dataset_dir(), [s for s in pscales if s <= 22])
    if "ppr-job" in only and args.device == "gpu":
        path = dataset_dir() / "soc-Epinions1.txt.gz" if dataset_dir() is not None else None
        if path is not None and path.is_file():
            ppr_push.run_job(rep, "soc-Epinions1", str(path))
        ppr_push.run_job(rep, "rmat-22", "rmat:scale=22,seed=0")
    if "influence" in only:
        degrees = [int(s) for s in args.ba_degrees.split(",") if s] if args.device == "gpu" else []
        influence.run(rep, args.device, dataset_dir(), degrees)
    if "influence-rmat" in only and args.device == "gpu":
        influence.run_rmat(rep, [int(s) for s in args.imm_scales.split(",") if s])
    if "simrank" in only:
        sscales = [int(s) for s in args.simrank_scales.split(",") if s] if args.device == "gpu" else []
        names = [g for g in args.simrank_graphs.split(",") if g]
        simrank.run(rep, args.device, dataset_dir(), sscales, names)
    gpus = [int(s) for s in args.mg_gpus.split(",") if s]
    if "pagerank-mg" in only:
        scale_out.pagerank(rep, [int(s) for s in args.mg_scales.split(",") if s], gpus)
    if "imm-mg" in only:
        scale_out.influence(rep, gpus)
    if "topk-mg" in only:
        scale_out.topk(rep, 22, gpus, args.batch, args.mg_workdir)
    rep.summary()


if __name__ == "__main__":
    main()
