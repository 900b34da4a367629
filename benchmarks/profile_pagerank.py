"""Drive a few PageRank iterations for Nsight Compute:

ncu -k regex:gj_pagerank --launch-skip 4 --launch-count 1 python3 -m benchmarks.profile_pagerank --scale 22
"""

from __future__ import annotations

import argparse

import numpy as np

import graphs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=int, default=22)
    ap.add_argument("--layout", choices=["original", "degree"], default="degree")
    ap.add_argument("--method", choices=["pull", "push"], default="pull")
    ap.add_argument("--iters", type=int, default=8)
    args = ap.parse_args()
    import cupy as cp

    from operators.pagerank.gpu import pagerank_gpu

    g = graphs.rmat(args.scale, device="gpu")
    if args.layout == "degree":
        g = graphs.reorder(g)
    out = g.out_degree().get().astype(np.float64)
    inv = np.divide(1.0, out, out=np.zeros(g.n), where=out > 0)
    g.transpose()
    cp.cuda.Device().synchronize()
    pagerank_gpu(
        g,
        method=args.method,
        alpha=0.85,
        x0=np.full(g.n, 1.0 / g.n),
        p=None,
        dw=None,
        inv_out=inv,
        weighted=False,
        max_iter=args.iters,
        threshold=-1.0,
        dtype=np.float32,
    )
    cp.cuda.Device().synchronize()
    print(f"n={g.n} m={g.m} layout={args.layout} method={args.method}")


if __name__ == "__main__":
    main()
