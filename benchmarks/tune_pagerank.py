"""Compare pull-kernel configurations (block size, shared-memory hot cache) on R-MAT graphs.

    python3 -m benchmarks.tune_pagerank --scales 22,24 --configs 1024:24576,1024:12288,512:12288,256:0
Each configuration's ranks are checked against the first one's before its time counts.
"""

from __future__ import annotations

import argparse

import numpy as np

import graphs
from benchmarks.common import gpu_time
from benchmarks.pagerank import _iteration_seconds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scales", default="22,24")
    ap.add_argument("--configs", default="1024:24576,1024:12288,512:12288,1024:0,256:0")
    args = ap.parse_args()
    import cupy as cp
    import cupyx.scipy.sparse as cps

    from operators import _pagerank_gpu as pg

    configs = [tuple(int(x) for x in c.split(":")) for c in args.configs.split(",")]
    for scale in (int(s) for s in args.scales.split(",")):
        base = graphs.rmat(scale, device="gpu")
        for layout, g in (("degree-order", graphs.reorder(base)), ("original", base)):
            out = g.out_degree().get().astype(np.float64)
            inv = np.divide(1.0, out, out=np.zeros(g.n), where=out > 0)
            T = g.transpose()
            data = cp.asarray(inv, dtype=cp.float32)[T.indices]
            A = cps.csr_matrix((data, T.indices, T.indptr.astype(cp.int32)), shape=(g.n, g.n))
            xv = cp.full(g.n, 1.0 / g.n, dtype=cp.float32)
            t_spmv, _ = gpu_time(lambda A=A, xv=xv: A @ xv)
            print(f"rmat-{scale} {layout:<12} cuSPARSE SpMV {t_spmv * 1e3:8.3f} ms", flush=True)
            del A, data
            ref = None
            for threads, hot in configs:
                pg.TUNING.update(threads=threads, hot=hot)

                def run_k(k, g=g, inv=inv):
                    x, _, _ = pg.pagerank_gpu(
                        g,
                        method="pull",
                        alpha=0.85,
                        x0=np.full(g.n, 1.0 / g.n),
                        p=None,
                        dw=None,
                        inv_out=inv,
                        weighted=False,
                        max_iter=k,
                        threshold=-1.0,
                        dtype=np.float32,
                    )
                    cp.cuda.Device().synchronize()
                    return x

                x = run_k(12).get()
                ref = x if ref is None else ref
                diff = float(np.abs(x - ref).sum())
                per, setup = _iteration_seconds(run_k)
                print(
                    f"rmat-{scale} {layout:<12} threads={threads:<5} hot={hot:<6} {per * 1e3:8.3f} ms/iter "
                    f"setup {setup * 1e3:7.1f} ms  L1 diff vs first {diff:.1e}",
                    flush=True,
                )
        del base
        cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
