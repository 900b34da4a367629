"""Benchmark report: python -m benchmarks.report FILE.jsonl [FILE ...] --out DIR.

Writes ``DIR/report.md`` (every measurement beside its same-run baseline) and PNG plots where the data
has them (the last row of each measurement when files repeat one): ``speedup.png`` (speed-up over the
baseline per graph and implementation), ``latency_vs_k.png`` (top-k PPR query latency against k) and
``scaling.png`` (multi-GPU runs against one GPU, with the ideal) and ``peer.png`` (speed-up over
cuGraph measured in the same run, where the rows carry it).
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from pathlib import Path

SIZE, DPI = (8.0, 5.0), 100  # every plot: 800 x 500 pixels


def latest(rows: list[dict]) -> list[dict]:
    """One row per (bench, graph, layout, implementation, device, gpus, exchange): the last one read."""
    keys = ("bench", "graph", "layout", "impl", "device", "gpus", "exchange")
    keep = {}
    for r in rows:
        keep[tuple(str(r.get(k)) for k in keys)] = r
    return list(keep.values())


def load(paths) -> list[dict]:
    rows = []
    for path in paths:
        for i, line in enumerate(Path(path).read_text().splitlines(), start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}, line {i}: not a JSON object ({exc.msg})") from None
    return rows


def _num(v, digits=4) -> str:
    return "" if v is None else (f"{v:.{digits}g}" if isinstance(v, float | int) else str(v))


def markdown(rows: list[dict]) -> str:
    head = (
        "bench",
        "graph",
        "implementation",
        "median",
        "unit",
        "baseline",
        "baseline median",
        "speed-up",
        "device",
    )
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        base = r.get("baseline") or {}
        graph = r.get("graph", "") + (f" ({r['layout']})" if r.get("layout") else "")
        cells = [
            r.get("bench"),
            graph,
            r.get("impl", ""),
            _num(r.get("median")),
            r.get("unit", ""),
            base.get("impl", ""),
            _num(base.get("median")),
            _num(r.get("speedup"), 3),
            r.get("device_name", r.get("device", "")),
        ]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def _figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt, plt.subplots(figsize=SIZE, dpi=DPI)


def plot_speedup(rows, path) -> bool:
    data = [
        (f"{r.get('graph', '')} {r.get('impl', '')}"[:60], r["speedup"])
        for r in rows
        if isinstance(r.get("speedup"), float | int) and r["speedup"] > 0
    ]
    return _bars(data[-40:], path, "speed-up over the same-run baseline (log)")  # the newest forty


def _bars(data, path, xlabel: str) -> bool:
    """Horizontal log-scale bars of (label, speed-up), green from 1 up; False when there is nothing."""
    if not data:
        return False
    plt, (fig, ax) = _figure()
    ax.barh(
        range(len(data)), [s for _, s in data], color=["tab:green" if s >= 1 else "tab:red" for _, s in data]
    )
    ax.set_yticks(range(len(data)), [label for label, _ in data], fontsize=5)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return True


def peer_speedups(rows) -> list[tuple[str, float]]:
    """(label, speed-up over cuGraph) of the rows measured beside it: ``speedup_vs_peer``, or a
    baseline that is cuGraph."""
    out = []
    for r in rows:
        base = (r.get("baseline") or {}).get("impl", "")
        s = r.get("speedup_vs_peer", r.get("speedup") if "cugraph" in base else None)
        if isinstance(s, float | int) and s > 0:
            layout = f" ({r['layout']})" if r.get("layout") else ""
            out.append((f"{r.get('graph', '')}{layout} {r.get('impl', '')}"[:60], float(s)))
    return out


def plot_peer(rows, path) -> bool:
    return _bars(peer_speedups(rows)[-40:], path, "speed-up over cuGraph in the same run (log)")


def _k(r):
    if r.get("k") is not None:
        return int(r["k"])
    found = re.search(r"\bk=(\d+)", str(r.get("impl", "")))
    return int(found.group(1)) if found else None


def latency_series(rows) -> dict:
    """{(graph, device): {k: median ms}} of our top-k queries (kPAR rows; a peer's rows have their own
    plot), later rows winning: one point per k, from the newest run that measured it."""
    series = defaultdict(dict)
    for r in rows:
        ours = str(r.get("impl", "")).startswith("kpar")
        if r.get("bench") == "topk-ppr" and r.get("unit") == "ms" and ours and (k := _k(r)) is not None:
            series[(r.get("graph"), r.get("device", ""))][k] = float(r["median"])
    return series


def plot_latency_vs_k(rows, path) -> bool:
    series = latency_series(rows)
    if not series:
        return False
    plt, (fig, ax) = _figure()
    for (graph, device), pts in sorted(series.items()):
        ks = sorted(pts)
        ax.plot(ks, [pts[k] for k in ks], marker="o", label=f"{graph} ({device})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    return _save(plt, fig, ax, path, "k", "query latency, ms (median)")


def scaling_series(rows) -> dict:
    """{(bench, graph, exchange): {gpus: (median, unit)}}, later rows winning; the exchange of a binned
    PageRank series reads e.g. "halo, binned". Multi-GPU PageRank rows from before the exchange (or the
    method) was recorded used broadcasts (and pull); one GPU exchanges nothing, so a series without a
    1-GPU point takes that of another exchange with the same method on the same graph."""
    series = defaultdict(dict)
    method_of = {}
    for r in rows:
        if r.get("gpus") and isinstance(r.get("median"), float | int):
            mg = r.get("bench") == "pagerank-mg"
            exchange = r.get("exchange") or ("broadcast" if mg else "")
            method = r.get("method") or ("pull" if mg else "")
            key = (
                r.get("bench"),
                r.get("graph"),
                exchange if method in ("pull", "") else f"{exchange}, {method}",
            )
            method_of[key] = method
            series[key][int(r["gpus"])] = (r["median"], r.get("unit", ""))
    for key, pts in series.items():
        ones = [
            v[1] for k, v in series.items() if k[:2] == key[:2] and method_of[k] == method_of[key] and 1 in v
        ]
        if 1 not in pts and ones:
            pts[1] = ones[0]
    return {k: v for k, v in series.items() if 1 in v and len(v) > 1}


def plot_scaling(rows, path) -> bool:
    series = scaling_series(rows)
    if not series:
        return False
    plt, (fig, ax) = _figure()
    top = 1
    for (bench, graph, exchange), pts in sorted(series.items()):
        one, unit = pts[1]
        faster_is_higher = "/s" in unit
        gpus = sorted(pts)
        gain = [(pts[g][0] / one) if faster_is_higher else (one / pts[g][0]) for g in gpus]
        ax.plot(gpus, gain, marker="o", label=f"{bench} {graph} {exchange}".strip())
        top = max(top, *gpus)
    ax.plot([1, top], [1, top], linestyle="--", color="grey", label="ideal")
    return _save(plt, fig, ax, path, "GPUs", "speed-up over 1 GPU")


def _save(plt, fig, ax, path, xlabel: str, ylabel: str) -> bool:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.report", description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", help="JSON-lines files written by benchmarks.run")
    ap.add_argument("--out", default="benchmarks/report", help="folder for report.md and the PNG plots")
    args = ap.parse_args(argv)
    rows = load(args.files)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    plots = (
        ("speedup.png", plot_speedup),
        ("latency_vs_k.png", plot_latency_vs_k),
        ("scaling.png", plot_scaling),
        ("peer.png", plot_peer),
    )
    made = [name for name, fn in plots if fn(latest(rows), out / name)]
    sources = ", ".join(f"`{Path(f).name}`" for f in args.files)
    text = f"# Benchmark report\n\n{len(rows)} measurements from {sources}.\n\n"
    text += "".join(f"![{m}]({m})\n\n" for m in made) + markdown(rows)
    (out / "report.md").write_text(text)
    print(f"wrote {out / 'report.md'} and {', '.join(made) or 'no plots'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
