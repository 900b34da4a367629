"""`graphjobs demo`: every job of graphjobs on one generated R-MAT graph, on a local cluster.

The jobs share the graph's load stage and the work directory, so the graph is generated once; the
top-k job's PageRank and index stages are built there too (its headline pipeline: load -> CSR ->
PageRank -> IRW index -> query batch). Sizes keep the whole demo to seconds on a laptop (scale 16)
and on one GPU (scale 20): batches of random sources, small k.
"""

from __future__ import annotations

from pathlib import Path

from .influence import influence_job
from .pagerank import pagerank_job
from .ppr import ppr_job
from .simrank import simrank_job
from .sources import RandomSources
from .topk_ppr import topk_ppr_job

DEMO_JOBS = ("pagerank", "topk-ppr", "ppr", "influence", "simrank")

# per job: (sources or seeds on the CPU, on the GPU), k, and what it says before it runs
_SIZES = {
    "pagerank": (None, None),
    "topk-ppr": (1_000, 10_000),
    "ppr": (100, 1_000),
    "influence": (10, 50),
    "simrank": (10, 100),
}
_TITLES = {
    "pagerank": "global PageRank (load -> CSR -> PageRank -> Parquet)",
    "topk-ppr": "top-{k} personalized PageRank, kPAR (load -> CSR -> PageRank -> IRW index -> {n:,} queries)",
    "ppr": "personalized PageRank vectors, push/pull hybrid ({n:,} sources, top {k} kept)",
    "influence": "influence maximization, IMM under IC ({n} seeds)",
    "simrank": "single-source SimRank, ClipSim ({n:,} sources, top {k} kept)",
}


def demo_jobs(names, *, scale: int, device: str, out, workdir=None) -> list[tuple[str, str, object]]:
    """(name, title, Job) for each job of ``names`` (a subset of ``DEMO_JOBS``), in that order.

    The graph is ``rmat:scale=<scale>,seed=0``; outputs go under the folder ``out``.
    """
    unknown = [name for name in names if name not in DEMO_JOBS]
    if unknown:
        raise ValueError(f"--jobs: unknown job {unknown[0]!r}; expected some of {', '.join(DEMO_JOBS)}")
    spec, out, k = f"rmat:scale={scale},seed=0", Path(out), 10
    gpu = device == "gpu"
    jobs = []
    for name in DEMO_JOBS:
        if name not in names:
            continue
        n = _SIZES[name][1 if gpu else 0]
        if name == "pagerank":
            job = pagerank_job(spec, out=str(out / "pagerank.parquet"), workdir=workdir)
        elif name == "topk-ppr":
            job = topk_ppr_job(spec, RandomSources(n), k=k, out=str(out / "topk-ppr"), workdir=workdir,
                               overwrite=True)  # fmt: skip
        elif name == "ppr":
            job = ppr_job(
                spec, RandomSources(n), topk=k, out=str(out / "ppr"), workdir=workdir, overwrite=True
            )
        elif name == "influence":
            job = influence_job(spec, n, out=str(out / "seeds.csv"), n_sim=1_000, workdir=workdir)
        else:  # ClipSim's cost grows as 1 / epsilon^2: 0.5 s a source at 1e-2 on a laptop core, scale 16
            job = simrank_job(spec, RandomSources(n), k=k, out=str(out / "simrank"), workdir=workdir,
                              epsilon=1e-3 if gpu else 1e-2, overwrite=True)  # fmt: skip
        jobs.append((name, _TITLES[name].format(n=n, k=k), job))
    return jobs
