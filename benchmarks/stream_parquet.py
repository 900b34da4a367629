"""An R-MAT graph generated on the device, written as a Parquet edge dataset, and read back streamed
(``graphs.stream.read_parquet_dataset``): the seconds of each step, the dataset's bytes on disk, the
host's peak resident memory while reading, and whether the graph read back equals the generated one
(row pointer and column indices, exactly). The baseline is the generation itself (the same graph from
its seed, on the same device)."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import graphs
from benchmarks.common import Reporter, peak_resident_bytes
from graphs._build import expand_rows
from graphs._device import array_module, to_host
from graphs.stream import read_parquet_dataset

FILE_ROWS = 1 << 28  # edges a file
GROUP_ROWS = 1 << 24  # edges a row group


def _sync(device: str) -> None:
    if device == "gpu":
        import cupy as cp

        cp.cuda.Device().synchronize()


def write_dataset(g, folder: Path) -> int:
    """``g``'s edges (int32 ``src``, ``dst``) as Parquet files of ``FILE_ROWS`` in ``folder``, copied
    from the device a row group at a time; returns their bytes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = expand_rows(g.indptr, g.m)
    schema = pa.schema([("src", pa.int32()), ("dst", pa.int32())])
    for f, first in enumerate(range(0, g.m, FILE_ROWS)):
        with pq.ParquetWriter(folder / f"part-{f:05d}.parquet", schema, compression="snappy") as w:
            last = min(first + FILE_ROWS, g.m)
            for s in range(first, last, GROUP_ROWS):
                e = min(s + GROUP_ROWS, last)
                src, dst = to_host(rows[s:e]), to_host(g.indices[s:e])
                w.write_table(pa.table({"src": src, "dst": dst}, schema=schema), row_group_size=GROUP_ROWS)
    del rows
    return sum(p.stat().st_size for p in folder.iterdir())


def _rss_gib() -> float:
    return peak_resident_bytes() / 2**30


def run(rep: Reporter, device: str, scales, workdir: str | None = None) -> None:
    graphs.rmat(16, seed=0, device=device)  # compile the generator's kernels before anything is timed
    for scale in scales:
        t0 = time.perf_counter()
        g = graphs.rmat(scale, seed=0, device=device)
        xp = array_module(g.indptr)
        _sync(device)
        generate = time.perf_counter() - t0
        folder = Path(tempfile.mkdtemp(prefix=f"rmat{scale}-", dir=workdir))
        try:
            t0 = time.perf_counter()
            disk = write_dataset(g, folder)
            write = time.perf_counter() - t0
            before = _rss_gib()
            t0 = time.perf_counter()
            h = read_parquet_dataset(folder, n=g.n, device=device)
            _sync(device)
            read = time.perf_counter() - t0
            peak = _rss_gib()
            equal = bool(xp.array_equal(h.indptr, g.indptr)) and bool(xp.array_equal(h.indices, g.indices))
            del h
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        rep.emit(
            bench="stream-parquet",
            impl=f"read_parquet_dataset -> {device}",
            graph=f"rmat-{scale}",
            n=g.n,
            m=g.m,
            median=read,
            unit="s",
            write_s=write,
            disk_gib=disk / 2**30,
            files=-(-g.m // FILE_ROWS),
            host_peak_gib=peak,
            host_peak_before_read_gib=before,
            edge_list_gib=16 * g.m / 2**30,
            equal=equal,
            speedup=generate / read,
            baseline={"impl": f"rmat generated on the {device} (same graph)", "median": generate},
        )
        del g
        if device == "gpu":
            xp.get_default_memory_pool().free_all_blocks()
