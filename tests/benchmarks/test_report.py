"""benchmarks.report: a Markdown table and PNG plots (800 x 500) from JSON lines."""

from __future__ import annotations

import json
import struct

import pytest

pytest.importorskip("matplotlib")

from benchmarks.report import latency_series, main, peer_speedups, scaling_series

ROWS = [
    {
        "bench": "pagerank",
        "graph": "rmat-22",
        "impl": "graphjobs-pull f32",
        "median": 0.41,
        "unit": "ms/iter",
        "baseline": {"impl": "cusparse-spmv", "median": 0.63},
        "speedup": 1.54,
        "device_name": "H100",
    },
    {"bench": "topk-ppr", "graph": "g1", "impl": "kpar k=10 gpu", "median": 2.0, "unit": "ms"},
    {"bench": "topk-ppr", "graph": "g1", "impl": "kpar k=100 gpu", "median": 4.0, "unit": "ms"},
    {"bench": "pagerank-mg", "graph": "rmat-25", "gpus": 1, "median": 3.9, "unit": "ms/iter"},
    {"bench": "pagerank-mg", "graph": "rmat-25", "gpus": 2, "median": 2.7, "unit": "ms/iter"},
    {"bench": "topk-mg", "graph": "rmat-22", "gpus": 1, "median": 114.0, "unit": "queries/s"},
    {"bench": "topk-mg", "graph": "rmat-22", "gpus": 2, "median": 236.0, "unit": "queries/s"},
    {
        "bench": "pagerank",
        "graph": "rmat-24",
        "layout": "original",
        "impl": "graphjobs-pull f32",
        "median": 4.2,
        "unit": "ms/iter",
        "peer": {"impl": "cugraph", "median": 2.7},
        "speedup_vs_peer": 0.64,
    },
    {
        "bench": "pagerank",
        "graph": "rmat-24",
        "layout": "degree-order",
        "impl": "graphjobs-pull f32",
        "median": 2.0,
        "unit": "ms/iter",
        "peer": {"impl": "cugraph", "median": 2.7},
        "speedup_vs_peer": 1.35,
    },
    {
        "bench": "topk-vs-peer",
        "graph": "g1",
        "impl": "kpar k=10 gpu",
        "median": 2.0,
        "unit": "ms",
        "baseline": {"impl": "cugraph 26.10 ppr + top-k", "median": 20.0},
        "speedup": 10.0,
    },
]


def _png_size(path):
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def test_report_writes_table_and_plots(tmp_path, capsys):
    src = tmp_path / "bench.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n")
    assert main([str(src), "--out", str(tmp_path / "rep")]) == 0
    text = (tmp_path / "rep" / "report.md").read_text()
    assert (
        "| pagerank | rmat-22 | graphjobs-pull f32 | 0.41 | ms/iter | cusparse-spmv | 0.63 | 1.54 | H100 |"
        in text
    )
    assert "| pagerank | rmat-24 (degree-order) | graphjobs-pull f32 | 2 | ms/iter |" in text
    for name in ("speedup.png", "latency_vs_k.png", "scaling.png", "peer.png"):
        path = tmp_path / "rep" / name
        assert path.stat().st_size > 1000 and _png_size(path) == (800, 500)
        assert f"![{name}]({name})" in text


def test_peer_speedups_keep_both_layouts():
    got = dict(peer_speedups(ROWS))
    assert got == {
        "rmat-24 (original) graphjobs-pull f32": 0.64,
        "rmat-24 (degree-order) graphjobs-pull f32": 1.35,
        "g1 kpar k=10 gpu": 10.0,
    }


def test_report_without_plot_data_and_bad_lines(tmp_path):
    src = tmp_path / "b.jsonl"
    src.write_text(json.dumps({"bench": "load", "median": 1.0, "unit": "s"}) + "\n")
    assert main([str(src), "--out", str(tmp_path / "r")]) == 0
    assert not list((tmp_path / "r").glob("*.png"))
    src.write_text('{"bench": "x"}\nnot json\n')
    with pytest.raises(ValueError, match=r"b\.jsonl, line 2"):
        main([str(src), "--out", str(tmp_path / "r")])


def test_scaling_series_share_the_one_gpu_point():
    def row(gpus, median, **extra):
        return {"bench": "pagerank-mg", "graph": "g", "gpus": gpus, "median": median, "unit": "ms", **extra}

    rows = [
        row(1, 4.0),  # from before the exchange was recorded (broadcasts)
        row(2, 3.0),
        row(2, 2.6, exchange="broadcast"),  # a later run wins
        row(2, 2.4, exchange="halo"),
        row(1, 1.5, exchange="broadcast", method="binned"),
        row(2, 1.0, exchange="halo", method="binned"),  # takes the binned 1-GPU point
        {"bench": "topk-mg", "graph": "g", "gpus": 2, "median": 9.0, "unit": "queries/s"},  # no 1-GPU point
    ]
    assert scaling_series(rows) == {
        ("pagerank-mg", "g", "broadcast"): {1: (4.0, "ms"), 2: (2.6, "ms")},
        ("pagerank-mg", "g", "halo"): {1: (4.0, "ms"), 2: (2.4, "ms")},
        ("pagerank-mg", "g", "halo, binned"): {1: (1.5, "ms"), 2: (1.0, "ms")},
    }


def test_latency_series_takes_our_newest_rows():
    """One point per graph and k: the newest kPAR row; a peer's rows (cuGraph, same bench) are left out."""
    row = dict(bench="topk-ppr", graph="g1", unit="ms", device="gpu")
    rows = [
        {**row, "impl": "kpar k=10 gpu", "median": 2.0},
        {**row, "impl": "cugraph ppr + top-k", "k": 10, "median": 50.0},
        {**row, "impl": "kpar k=10 gpu", "median": 1.5},
        {**row, "impl": "kpar k=1000 gpu", "median": 3.0},
        {**row, "bench": "topk-batch", "impl": "kpar k=10 gpu", "median": 900.0, "unit": "queries/s"},
    ]
    assert latency_series(rows) == {("g1", "gpu"): {10: 1.5, 1000: 3.0}}
