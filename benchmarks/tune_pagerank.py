"""Compare pull-kernel configurations (block size, shared-memory hot cache) on R-MAT graphs.

    python3 -m benchmarks.tune_pagerank --scales 22,24 --configs 1024:24576,1024:16384:8,256:0
(threads:hot[:cluster]; with a cluster, hot is each block's slice of the cached range)
Each configuration's ranks are checked against the first one's; the times come from CUDA events.
"""

from __future__ import annotations

import argparse

import numpy as np

import graphs
from benchmarks.pagerank import cusparse_baseline, gpu_iteration_seconds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scales", default="22,24")
    ap.add_argument("--configs", default="1024:24576,1024:12288,512:12288,1024:0,256:0")
    ap.add_argument("--layouts", default="degree,original", help="degree, in_degree, out_degree, original")
    ap.add_argument(
        "--diag",
        choices=["none", "nogather"],
        default="none",
        help="nogather: replace each gather by a dependent no-op (diagnostic, wrong ranks)",
    )
    args = ap.parse_args()
    import cupy as cp
    import cupyx.scipy.sparse as cps

    from operators._gpu.registry import Kernel
    from operators.pagerank import gpu as pg
    from operators.pagerank import pull as _pagerank_pull

    if args.diag == "nogather":  # keeps the index loads, drops the gathered value
        pull = _pagerank_pull.PULL
        _pagerank_pull.PULL = Kernel(
            pull.source.replace(
                "return (double)(u < (IDX)hot ? hot_c[u] : __ldg(&c_old[u]));", "return (double)u * 1e-30;"
            ),
            pull.names,
            defines=pull.defines,
            label="pagerank-pull-nogather",
        )
    configs = [(*(int(x) for x in c.split(":")), 1)[:3] for c in args.configs.split(",")]
    _pagerank_pull.TUNING["max_hot_bytes"] = 4 * max(hot for _, hot, _ in configs)
    for scale in (int(s) for s in args.scales.split(",")):
        base = graphs.rmat(scale, device="gpu")
        for layout in args.layouts.split(","):
            g = base if layout == "original" else graphs.reorder(base, by=layout)
            t_spmv, t_power, _ = cusparse_baseline(cp, cps, g, False)
            print(f"rmat-{scale} {layout:<12} cuSPARSE {t_spmv * 1e3:.3f} ms, step {t_power * 1e3:.3f}")
            ref = None
            for threads, hot, cluster in configs:
                _pagerank_pull.TUNING.update(threads=threads, hot=hot, cluster=cluster)
                x = pagerank_x(pg, g)
                ref = x if ref is None else ref
                per, setup = gpu_iteration_seconds(g, method="pull", weighted=False)
                print(
                    f"rmat-{scale} {layout:<12} {threads}:{hot}:{cluster:<3} {per * 1e3:8.3f} ms/iter "
                    f"setup {setup * 1e3:7.1f} ms  L1 diff vs first {np.abs(x - ref).sum():.1e}",
                    flush=True,
                )
        del base
        cp.get_default_memory_pool().free_all_blocks()


def pagerank_x(pg, g):
    from operators.pagerank import inverse_out_weight

    x, *_ = pg.pagerank_gpu(
        g,
        method="pull",
        alpha=0.85,
        x0=None,
        p=None,
        dw=None,
        inv_out=inverse_out_weight(g, False),
        weighted=False,
        max_iter=12,
        threshold=-1.0,
        dtype=np.float32,
    )
    return x.get()


if __name__ == "__main__":
    main()
