"""Time the binned PageRank iteration's two passes (fill, sum) apart, for variants of their kernels.

    python3 -m benchmarks.tune_binned --scales 24 --variants base,unroll2,unroll4,nolocate,noatomic

Each variant runs 40 float32 iterations of ``pagerank_gpu(method='binned')`` on the R-MAT graph as
generated; every launch of the fill and the sum kernel is timed by its own pair of CUDA events, and the
median per pass is printed with the bytes the pass moves over that time. Variants:

- ``base``: the kernels as they are (``TUNING``);
- ``unrollK``: the fill loads K vectors a thread before it writes (``TUNING['fill_unroll']``);
- ``fixed``: the sum adds into its rows in 64-bit fixed point (``TUNING['sum_fixed']``);
- ``chunkB``: fill chunks of 2**B sources (a layout of its own);
- ``nolocate``, ``noatomic`` (diagnostics, wrong ranks): the sum reads a stretch of its own in order
  instead of locating each vector's segment (scale 24 and up: it reads the layout's first 2**24
  vectors), or adds into its rows without atomics; what each costs is the difference to ``base``.

The ranks of every variant that is not a diagnostic are compared with ``base``'s (L1).
"""

from __future__ import annotations

import argparse
import json

import numpy as np

import graphs


class _Timed:
    """A compiled kernel whose launches are each timed by a pair of CUDA events into ``log``."""

    def __init__(self, kernel, log: list):
        object.__setattr__(self, "_k", kernel)
        object.__setattr__(self, "_log", log)

    def __setattr__(self, name, value):
        setattr(self._k, name, value)

    def __call__(self, grid, block, args, shared_mem=0):
        import cupy as cp

        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        self._k(grid, block, args, shared_mem=shared_mem)
        end.record()
        self._log.append((start, end))


class _TimedSource:
    """Stands for a module's ``Kernel``: ``get`` returns the kernel timed, from ``source`` if given."""

    def __init__(self, kernel, log: list, replace: tuple = ()):
        from operators._gpu.registry import Kernel

        source = kernel.source
        for old, new in replace:
            if old not in source:
                raise ValueError(f"diagnostic text not found in the kernel source: {old!r}")
            source = source.replace(old, new)
        self.kernel = (
            kernel
            if not replace
            else Kernel(
                source,
                kernel.names,
                defines=kernel.defines,
                spill_budget=kernel.spill_budget,
                label=kernel.label + "-diag",
            )
        )
        self.log = log

    def get(self, name, **defines):
        return _Timed(self.kernel.get(name, **defines), self.log)


DIAGNOSTICS = {
    # each item reads a stretch of its own, in order (the layout's first 2**24 vectors: scale 24 and up)
    "nolocate": (
        (
            "const long long v = locate(g);",
            "const long long v = ((long long)blockIdx.x * 32768 + (g - item_lo[blockIdx.x])) & 0xffffffLL;",
        ),
    ),
    "noatomic": (("atomicAdd(&ys[(d)], (x))", "(ys[(d)] += (x))"),),
    "fixednoatomic": (("old = atomicAdd(&ys[d], lo);", "old = ys[d]; ys[d] = old + lo;"),),
}


def _elapsed(start, end) -> float:
    import cupy as cp

    end.synchronize()
    return cp.cuda.get_elapsed_time(start, end)


def _median_ms(log: list) -> float:
    return float(np.median([_elapsed(s, e) for s, e in log])) if log else float("nan")


def run_variant(g, name: str, iterations: int):
    """``(x, fill ms, sum ms)`` of the variant ``name`` (medians over the timed iterations)."""
    from benchmarks.pagerank import inverse_out_weight
    from operators.pagerank import binned as pb
    from operators.pagerank.binned import gpu as bg
    from operators.pagerank.gpu import pagerank_gpu

    saved = (bg.FILL, bg.SUM, dict(pb.TUNING), dict(pb.TUNING[4]))
    fill_log, sum_log = [], []
    try:
        if name.startswith("unroll"):
            pb.TUNING["fill_unroll"] = int(name[6:])
        elif name in ("fixed", "fixednoatomic"):
            pb.TUNING["sum_fixed"] = True
        elif name.startswith("chunk"):
            pb.TUNING[4] = {**pb.TUNING[4], "chunk_bits": int(name[5:])}
        elif name != "base" and name not in DIAGNOSTICS:
            raise ValueError(f"unknown variant {name!r}")
        bg.FILL = _TimedSource(saved[0], fill_log)
        bg.SUM = _TimedSource(saved[1], sum_log, DIAGNOSTICS.get(name, ()))
        inv = inverse_out_weight(g, False)
        x = None
        for _ in range(2):  # the first run compiles and builds the layout
            fill_log.clear()
            sum_log.clear()
            x, *_ = pagerank_gpu(
                g,
                method="binned",
                alpha=0.85,
                x0=None,
                p=None,
                dw=None,
                inv_out=inv,
                weighted=False,
                max_iter=iterations,
                threshold=-1.0,
                dtype=np.float32,
            )
        import cupy as cp

        cp.cuda.Device().synchronize()
        return x, _median_ms(fill_log), _median_ms(sum_log)
    finally:
        bg.FILL, bg.SUM = saved[0], saved[1]
        pb.TUNING.clear()
        pb.TUNING.update(saved[2])
        pb.TUNING[4] = saved[3]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scales", default="24")
    ap.add_argument("--variants", default="base,unroll2,unroll4,nolocate,noatomic")
    ap.add_argument("--iterations", type=int, default=40)
    ap.add_argument("--out", help="JSON lines, one per variant")
    args = ap.parse_args()
    import cupy as cp

    from benchmarks.common import copy_rate

    rate = copy_rate()
    print(f"device-to-device copy: {rate / 1e12:.2f} TB/s")
    rows = []
    for scale in (int(s) for s in args.scales.split(",")):
        g = graphs.rmat(scale, device="gpu")
        ref = None
        for name in args.variants.split(","):
            x, t_fill, t_sum = run_variant(g, name, args.iterations)
            x = cp.asnumpy(x).astype(np.float64)
            ref = x if name == "base" else ref
            l1 = float(np.abs(x - ref).sum()) if ref is not None and name not in DIAGNOSTICS else None
            moved = 6 * g.m  # each pass: a 2-byte offset and a 4-byte value an edge (padding aside)
            row = {
                "graph": f"rmat-{scale}",
                "n": g.n,
                "m": g.m,
                "variant": name,
                "fill_ms": t_fill,
                "sum_ms": t_sum,
                "step_ms": t_fill + t_sum,
                "fill_of_copy_rate": moved / (t_fill / 1e3) / rate,
                "sum_of_copy_rate": moved / (t_sum / 1e3) / rate,
                "l1_to_base": l1,
                "copy_rate_bytes_per_s": rate,
            }
            rows.append(row)
            print(
                f"rmat-{scale} {name:<9} fill {t_fill:.3f} ms ({row['fill_of_copy_rate']:.0%}), "
                f"sum {t_sum:.3f} ms ({row['sum_of_copy_rate']:.0%}), both {t_fill + t_sum:.3f}"
                + (f", L1 to base {l1:.1e}" if l1 is not None else "")
            )
        del g
    if args.out:
        with open(args.out, "a") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
