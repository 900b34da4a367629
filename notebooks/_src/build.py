"""Writes the notebooks from the cell lists below: python notebooks/_src/build.py --execute (run and stored
with their outputs, as the repository keeps them); without --execute, outputs empty."""

from __future__ import annotations

from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parents[1]
SETUP = '''import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import graphjobs as gj

client = gj.connect(n_workers=2, device="cpu", dashboard_address=":0")
print("dashboard:", client.dashboard_link)
work = Path(tempfile.mkdtemp(prefix="graphjobs-nb-"))'''

NOTEBOOKS = {
    "01_quickstart.ipynb": [
        ("md", "# graphjobs quick start\n\nStart a local Dask cluster (GPU workers when a GPU is visible), "
               "load an edge list, run PageRank directly and as a job, then top-k personalized PageRank, "
               "and read the results back with original vertex labels."),
        ("code", SETUP.replace('n_workers=2, device="cpu", ', "n_workers=1, ")),
        ("md", "## Load an edge list\n\nThe SNAP file `wiki-Vote` when the shared datasets are present, "
               "otherwise a generated R-MAT graph written as a SNAP-style text file."),
        ("code", '''candidates = [Path("../../shared/datasets/wiki-Vote.txt.gz"), Path("../shared/datasets/wiki-Vote.txt.gz")]
path = next((p for p in candidates if p.exists()), None)
if path is None:
    g = gj.rmat(12, seed=0, device="cpu")
    src, dst, _ = g.edges()
    path = work / "edges.txt"
    np.savetxt(path, np.column_stack([src, dst]), fmt="%d", delimiter="\\t", header="generated R-MAT")
G = gj.read_edgelist(path)
G'''),
        ("md", "## PageRank, in process\n\n`alpha` is the probability of following an edge, as in NetworkX. "
               "`G.ids` holds the file's label of each vertex."),
        ("code", '''pr = gj.pagerank(G, alpha=0.85)
ranks = pd.DataFrame({"vertex": G.ids, "pagerank": pr})
ranks.sort_values("pagerank", ascending=False).head(10)'''),
        ("md", "## The same as a job on the cluster\n\nThe job's stages are cached in a work directory by "
               "token: running it again skips them. Watch the task stream on the dashboard."),
        ("code", '''job = gj.pagerank_job(path, out=work / "pagerank.parquet", workdir=work / "wd")
summary = gj.run(job, client)
result = pd.read_parquet(summary["out"])
assert np.allclose(result.sort_values("vertex").pagerank.to_numpy(), ranks.sort_values("vertex").pagerank.to_numpy())
summary["top"][:5]'''),
        ("md", "## Top-k personalized PageRank (kPAR)\n\nBuild the index once, then answer queries: the k "
               "vertices a random walk from the source (stopping with probability 0.2 at each step) most "
               "likely ends at."),
        ("code", '''index = gj.build_ppr_index(G, seed=0)
source = ranks.sort_values("pagerank").vertex.iloc[-1]  # the top PageRank vertex
topk = gj.topk_ppr(index, [source], k=20, seed=0)
topk.to_frame().head(10)'''),
        ("md", "## Distribution of PPR scores (log-log)\n\nExact PPR of that source by power iteration: a "
               "few vertices hold most of the mass."),
        ("code", '''exact = np.sort(gj.ppr(G, [source], method="power", tol=1e-10)[0])[::-1]
exact = exact[exact > 0]
fig, ax = plt.subplots(figsize=(6, 4))
ax.loglog(np.arange(1, exact.size + 1), exact, marker=".", linestyle="none")
ax.set_xlabel("rank")
ax.set_ylabel("PPR score")
ax.set_title(f"PPR from {source}")
assert exact[: topk.vertices.shape[1]].sum() > 0
fig'''),
        ("md", "## Precision against exact PPR, and the refinement\n\nThe share of the exact top 20 that "
               "kPAR returned. By default (`refine=True`) the vertices near the k-th estimate are "
               "re-estimated from their in-neighbours' estimates; `refine=False` answers as the paper's "
               "Algorithm 3 does, a little faster and less precisely."),
        ("code", '''from operators.ppr.metrics import precision_at_k

truth = np.asarray(gj.ppr(G, [source], method="power", tol=1e-10))[0]
plain = gj.topk_ppr(index, [source], k=20, seed=0, refine=False)
runs = [("Algorithm 3", plain), ("refined (default)", topk)]
{name: precision_at_k(truth, G.internal_ids(res.vertices[0]), 20) for name, res in runs}'''),
        ("code", "local = client.cluster\nclient.close()\nlocal.close()"),
    ],
    "02_influence_maximization.ipynb": [
        ("md", "# Influence maximization with IMM\n\nSeeds that maximize the expected spread under the "
               "independent cascade (IC) and linear threshold (LT) models, with weighted-cascade "
               "probabilities (1 / in-degree). On a cluster of two or more workers the RR samples are "
               "spread over them; the seeds are the same as on one device."),
        ("code", SETUP),
        ("code", '''G = gj.barabasi_albert(2000, 3, seed=1)
seeds = {}
for model in ("IC", "LT"):
    res = gj.distributed.influence_maximization(G, 50, client, epsilon=0.2, model=model, seed=0)
    seeds[model] = res.seeds
    print(model, "theta", res.theta, "workers", res.workers, "first seeds", res.seeds[:5].tolist())'''),
        ("md", "## Spread against k\n\nThe greedy picks seeds in order; the spread of the first k of them "
               "is estimated by forward Monte Carlo simulation under each model."),
        ("code", '''ks = [1, 2, 5, 10, 20, 30, 40, 50]
spread = {m: [gj.influence_spread(G, seeds[m][:k], model=m, n_sim=500, seed=1) for k in ks] for m in seeds}
fig, ax = plt.subplots(figsize=(6, 4))
for m, values in spread.items():
    ax.plot(ks, values, marker="o", label=m)
ax.set_xlabel("k (seeds)")
ax.set_ylabel("expected spread (vertices)")
ax.legend()
assert all(np.diff(v).min() > -5 for v in spread.values())  # more seeds: no smaller spread (up to noise)
fig'''),
        ("md", "## IC against LT\n\nHow many seeds the two models share, and how each set does under the "
               "other model."),
        ("code", '''shared = len(set(seeds["IC"]) & set(seeds["LT"]))
cross = pd.DataFrame({
    "seeds of": ["IC", "LT"],
    "spread under IC": [gj.influence_spread(G, seeds[m], model="IC", n_sim=500, seed=2) for m in ("IC", "LT")],
    "spread under LT": [gj.influence_spread(G, seeds[m], model="LT", n_sim=500, seed=2) for m in ("IC", "LT")],
})
print("seeds in common:", shared, "of 50")
cross'''),
        ("code", "local = client.cluster\nclient.close()\nlocal.close()"),
    ],
    "03_simrank.ipynb": [
        ("md", "# Single-source SimRank (ClipSim)\n\nThe vertices most similar to a vertex, and how the "
               "error falls with epsilon against the exact SimRank of a small graph."),
        ("code", SETUP.replace('client = gj.connect(n_workers=2, device="cpu", dashboard_address=":0")\n'
                               'print("dashboard:", client.dashboard_link)\n', "")),
        ("code", '''G = gj.barabasi_albert(400, 3, seed=2)
res = gj.simrank_topk(G, [0], k=10, epsilon=1e-2, seed=0)
res.to_frame()'''),
        ("md", "## Accuracy against epsilon\n\nMaximum error over all vertices against the exact iteration "
               "(dense, fine at n = 400), for the guaranteed sample count (`samples='bound'`)."),
        ("code", '''from operators.simrank import _simrank_reference

exact = _simrank_reference(G, c=0.6, tol=1e-12)[0]
eps = [2e-1, 1e-1, 5e-2, 2e-2, 1e-2]
err = [float(np.abs(gj.simrank(G, 0, epsilon=e, seed=1) - exact).max()) for e in eps]
fig, ax = plt.subplots(figsize=(6, 4))
ax.loglog(eps, err, marker="o", label="measured MaxError")
ax.loglog(eps, eps, linestyle="--", color="grey", label="epsilon (the guarantee)")
ax.set_xlabel("epsilon")
ax.set_ylabel("max |s - exact|")
ax.legend()
assert all(e <= x for e, x in zip(err, eps))
fig'''),
    ],
    "04_batch_jobs.ipynb": [
        ("md", "# Batch jobs: 10,000 top-k PPR queries on the cluster\n\nThe job builds (or finds) the "
               "index, then sends chunks of sources to the workers; each writes one Parquet part. "
               "`distributed.progress` shows the chunks finishing; the dashboard shows them too."),
        ("code", SETUP),
        ("code", '''from pipelines import RandomSources  # not (yet) in the graphjobs namespace


def topk_job():
    return gj.topk_ppr_job("rmat:scale=14,seed=0", RandomSources(10_000), k=20, chunk=1000,
                           out=work / "topk", workdir=work / "wd")


summary = gj.run(topk_job(), client)  # in Jupyter: distributed.progress bars, one per stage
print(summary.queries, "queries in", summary.parts, "parts;", summary.without_rounds,
      "sources of small closed reach answered before any round;",
      f"{1e3 * summary.latency_seconds_mean:.2f} ms a query from its first round")'''),
        ("md", "## Read the results back\n\nWith pandas (or cuDF on a GPU machine): one row per (source, "
               "rank) of a vertex the source reaches. A source that reaches fewer than k vertices (in R-MAT, "
               "many have no out-edges) has fewer rows; the summary counts them (`sources_short`)."),
        ("code", '''df = pd.read_parquet(work / "topk")
rows = df.groupby("source").size()
assert df.source.nunique() == 10_000 and rows.max() == 20 and (df.ppr > 0).all()
assert (rows < 20).sum() == summary.sources_short
print(len(df), "rows;", summary.sources_short, "sources reach fewer than 20 vertices")
df.head()'''),
        ("md", "## Resume\n\nA re-run of the same job with the same workdir and output folder finds every "
               "chunk's record in `topk/_chunks/` and skips it. (Had we kept a Dask future of the first "
               "run, e.g. from `client.compute(job.result)`, the scheduler would still hold its result "
               "under the same key and hand it back without running anything: release it first.)"),
        ("code", '''again = gj.run(topk_job(), client, progress=False)
print("chunks found finished:", again.resumed_parts, "of", again.parts)
assert again.resumed_parts == again.parts'''),
        ("code", "local = client.cluster\nclient.close()\nlocal.close()"),
    ],
}


def notebook(cells):
    """The notebook of ``cells`` (kind, text), without outputs, with stable cell ids."""
    nb = nbformat.v4.new_notebook()
    new = {"md": nbformat.v4.new_markdown_cell, "code": nbformat.v4.new_code_cell}
    nb.cells = [new.get(kind, nbformat.v4.new_code_cell)(t) for kind, t in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i}"  # stable ids: rebuilding changes nothing that was not edited
    return nb


def execute(nb, timeout: int = 600):
    """Run ``nb`` top to bottom in a Jupyter kernel on the CPU, outputs kept (plots as inline images)."""
    import os

    from nbclient import NotebookClient

    os.environ.pop("MPLBACKEND", None)  # the kernel's inline backend: the plots are stored in the cells
    NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}).execute()
    return nb


def main(argv=None) -> None:
    """Write the notebooks; with ``--execute`` run each and store it with its outputs (what the
    repository keeps, so that they read on a web page)."""
    import sys

    run = "--execute" in (sys.argv[1:] if argv is None else argv)
    for name, cells in NOTEBOOKS.items():
        nb = notebook(cells)
        if run:
            print(f"running {name}", flush=True)
            execute(nb)
        nbformat.write(nb, HERE / name, version=4)


if __name__ == "__main__":
    main()
