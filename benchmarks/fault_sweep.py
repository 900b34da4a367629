"""Corruption sweep (issue 62): flip bytes in every artifact a job writes and classify what the consumer does.

For each artifact kind (a saved graph, the workdir's cached graph, PageRank's cached vector and output, the
kPAR index folder with its manifest, the batch jobs' output folders, influence's CSV) the sweep builds the
artifact once, then for every file in it and every corruption (a byte flipped at the start, in a header, in
the middle, at the end; for JSON, a value edited) copies the artifact, corrupts the copy and runs the step
that reads it again (``graphs.load``, the index query's loading, the resumed job) in a new process. Each
outcome is one of:

``error``      exit 1, one line ``graphjobs: error: ...`` naming the file (or its folder), no traceback;
``correct``    exit 0, the answer identical to the uncorrupted run's;
``recomputed`` exit 0, the same answer, and a warning that something was recomputed;
``unclear``    exit 1 with one line that names neither the file nor its folder;
``crash``      a traceback, exit 2, a signal or a timeout;
``wrong``      exit 0 with an answer that differs (silent wrong answer).

Usage: ``python -m benchmarks.fault_sweep [--out sweep.jsonl] [--only KIND ...] [--quick] [--inprocess]``
(``--inprocess``: the commands run in the sweep's own process, one at a time, with the CLI's exit
statuses: minutes less, but a segfault would end the sweep). It prints a table of counts per artifact kind
and their totals; the exit status is 1 when any crash, wrong answer or unclear error was found.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUTCOMES = ("error", "correct", "recomputed", "unclear", "crash", "wrong")
BAD = ("unclear", "crash", "wrong")
SOURCES = ("0", "7", "42")  # labels of the batch jobs' sources (vertex labels of the R-MAT edge list)


# -- corruptions -----------------------------------------------------------------------------------------


def byte_positions(path: Path) -> dict[str, int]:
    """Fixed positions to flip: start, a header byte, middle, end."""
    size = path.stat().st_size
    header = {".npy": 20, ".parquet": 2}.get(path.suffix, min(8, size - 1))  # npy dict, parquet magic
    return {"start": 0, "header": min(header, size - 1), "middle": size // 2, "end": size - 1}


def flip(path: Path, pos: int) -> None:
    data = bytearray(path.read_bytes())
    data[pos] ^= 0x01 if path.suffix in (".json", ".csv", ".sha256") else 0xFF  # text stays text-like
    path.write_bytes(bytes(data))


def json_edits(doc: dict) -> dict[str, callable]:
    """Value edits of a JSON document: a parameter changed the way a person or a bad tool would."""
    edits = {}

    def setter(key, value):
        def edit(d):
            d[key] = value

        return edit

    if isinstance(doc.get("alpha"), float):
        edits["alpha->0.5"] = setter("alpha", 0.5)
    if isinstance(doc.get("n"), int):
        edits["n+1"] = setter("n", doc["n"] + 1)
    if isinstance(doc.get("directed"), bool):
        edits["directed-flipped"] = setter("directed", not doc["directed"])
    if "checksums" in doc and "epsilon" in doc:  # an index's meta.json: a version before checksums
        edits["version->3"] = setter("version", 3)
    for key in ("graph_token", "token"):
        if isinstance(doc.get(key), str):
            edits[f"{key}-changed"] = setter(key, "0" * len(doc[key]))
            break
    if isinstance(doc.get("graph"), str) and "index" in doc:  # ppr-index.json: another folder
        edits["graph-moved"] = setter("graph", doc["graph"] + "-gone")
    if isinstance(doc.get("summary"), dict):  # a chunk's record or a manifest
        edits["summary-edited"] = setter("summary", {**doc["summary"], "sources": 1})
    if isinstance(doc.get("file"), dict):
        edits["size-edited"] = setter("file", {**doc["file"], "size": doc["file"].get("size", 0) + 1})
    return edits


def corruptions(path: Path, quick: bool) -> list[tuple[str, callable]]:
    """(name, corrupt(path)) pairs for one file."""
    positions = byte_positions(path)
    if quick:
        positions = {k: positions[k] for k in ("middle",)}
    out = [(f"flip-{name}", lambda p, pos=pos: flip(p, pos)) for name, pos in positions.items()]
    if path.suffix == ".json":
        try:
            doc = json.loads(path.read_text())
        except ValueError:
            doc = {}
        for name, edit in list(json_edits(doc).items())[: 2 if quick else 4]:

            def apply(p, edit=edit):
                d = json.loads(p.read_text())
                edit(d)
                p.write_text(json.dumps(d, indent=1))

            out.append((f"edit-{name}", apply))
    return out


# -- consumers: the step that reads an artifact, with the CLI's exit statuses ----------------------------


def _answer_of_arrays(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        if a is None:
            h.update(b"None")
            continue
        a = np.ascontiguousarray(np.asarray(a))
        h.update(repr((a.dtype.str, a.shape)).encode())
        h.update(a.tobytes() if a.dtype != object else repr(a.tolist()).encode())
    return h.hexdigest()


def consume(kind: str, path: str) -> int:
    """Read the artifact at ``path`` as its consumer does; print its answer (a digest) on stdout. Exit
    statuses as the CLI's: 1 and one line for a ``UserError`` or a file error, 2 and a traceback else."""
    from graphs.errors import UserError
    from pipelines.cli import FILE_ERRORS, _file_message

    try:
        print(CONSUMERS[kind](Path(path)))
        return 0
    except UserError as exc:
        print(f"graphjobs: error: {exc}", file=sys.stderr)
        return 1
    except FILE_ERRORS as exc:
        print(f"graphjobs: error: {_file_message(exc)}", file=sys.stderr)
        return 1
    except Exception:
        traceback.print_exc()
        return 2


def _graph_answer(folder: Path) -> str:
    import graphs

    g = graphs.load(folder)
    ids = g.ids if g.has_labels else None
    return f"{g.n} {g.m} {g.directed} {g.weighted} {g.token} " + _answer_of_arrays(
        g.indptr, g.indices, g.weights, ids
    )


def _index_answer(folder: Path) -> str:
    """What the top-k PPR query job reads from an index folder: its manifest, graph, sources, index."""
    import dask

    from pipelines import _state
    from pipelines.ppr_index import read_manifest
    from pipelines.sources import RandomSources
    from pipelines.topk_ppr import topk_ppr_job

    job = topk_ppr_job(index=folder, sources=RandomSources(5), k=10, out=folder.parent / "q")
    handle = job.stages["load"]
    (ids,) = dask.compute(job.stages["sources"], scheduler="sync")
    g = handle.get("cpu")
    idx = _state.ppr_index(read_manifest(folder)["index"], g)
    p = idx.params
    params = (handle.n, handle.m, handle.directed, p.n, p.m, p.alpha, p.epsilon, p.delta_min, p.first_step)
    arrays = [idx.arrays[k] for k in sorted(idx.arrays)]
    return f"{params} {idx.seed} {g.token} " + _answer_of_arrays(ids, idx.perm, g.indptr, g.indices, *arrays)


CONSUMERS = {"graph": _graph_answer, "index": _index_answer}


# -- scenarios ---------------------------------------------------------------------------------------------


@dataclass
class Scenario:
    """An artifact kind: the command that builds it, the command that consumes it, how to read its
    answer, and which files (relative to the trial folder) to corrupt."""

    kind: str
    build: list[list[str]]  # commands run once, in the base folder
    consume: list[str]  # run in each trial's copy
    answer: str  # 'stdout', or a path (a Parquet file or folder, a CSV) relative to the trial folder
    files: list[str] = field(default_factory=list)  # globs relative to the base folder
    skip: tuple[str, ...] = ()  # globs not to corrupt
    slow: bool = False  # a consumer that recomputes for long: fewer positions
    shared: bool = False  # its consumers share a folder outside the trial's (one job at a time there)


def cli(*args) -> list[str]:
    return [sys.executable, "-m", "pipelines", *args, "--quiet"]


def py(*args) -> list[str]:
    return [sys.executable, "-m", "benchmarks.fault_sweep", *args]


def scenarios(e: str) -> list[Scenario]:
    """The artifact kinds, built from the edge file ``e`` (one absolute path: the jobs' tokens hold it)."""
    src = [x for s in SOURCES for x in ("--source", s)]
    ppr = cli("ppr", e, *src, "-k", "10", "--workdir", "w", "--out", "p")
    shared = str(Path(e).parent / "idx")  # the query job's token holds its index's path: one for all trials
    topk = cli("topk-ppr", "--index", shared, *src, "-k", "10", "--out", "q")
    simrank = cli("simrank", e, *src, "-k", "10", "--epsilon", "0.1", "--workdir", "w", "--out", "s")
    influence = cli("influence", e, "-k", "3", "--epsilon", "0.5", "--simulations", "0", "--workdir", "w")
    influence += ["--out", "seeds.csv"]
    pagerank = cli("pagerank", e, "--workdir", "w", "--out", "ranks.parquet")
    index = cli("index", e, "--out", "idx")
    return [
        Scenario(
            "graph (graphs.save)", [py("--save-graph", "g")], py("--consume", "graph", "g"), "stdout", ["g/*"]
        ),
        Scenario("workdir graph (ppr)", [ppr], ppr, "p", ["w/graph-*/*"]),
        Scenario(
            "pagerank", [pagerank], pagerank, "ranks.parquet", ["w/pagerank-*", "ranks.parquet"], slow=True
        ),
        Scenario(
            "ppr-index (query)",
            [index],
            py("--consume", "index", "idx"),
            "stdout",
            ["idx/ppr-index.json", "idx/ppr-index-*/*", "idx/graph-*/*"],
        ),
        Scenario(
            "ppr-index (rebuild)",
            [index],
            [*index[:-1], "--quiet"],
            "idx/ppr-index.json",
            [
                "idx/ppr-index.json",
                "idx/ppr-index-*/meta.json",
                "idx/ppr-index-*/ip1.npy",
                "idx/pagerank-*",
                "idx/graph-*/meta.json",
                "idx/graph-*/indices.npy",
            ],
            slow=True,
        ),
        Scenario("ppr output", [ppr], ppr, "p", ["p/*", "p/_chunks/*"]),
        Scenario(
            "topk-ppr output",
            [cli("index", e, "--out", shared), topk],
            topk,
            "q",
            ["q/*", "q/_chunks/*"],
            slow=True,
            shared=True,
        ),
        Scenario("simrank output", [simrank], simrank, "s", ["s/*", "s/_chunks/*"], slow=True),
        Scenario("influence output", [influence], influence, "seeds.csv", ["seeds.csv"], slow=True),
    ]


# -- running -----------------------------------------------------------------------------------------------


def env() -> dict:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)  # keep what is there
    return {**os.environ, "PYTHONPATH": path, "GRAPHJOBS_WORKDIR": "w", "PYTHONHASHSEED": "0"}


def run(cmd: list[str], cwd: Path, timeout: float) -> tuple[int | None, str, str]:
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env(), capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as exc:
        return None, exc.stdout or "", exc.stderr or ""


def run_inprocess(cmd: list[str], cwd: Path, timeout: float) -> tuple[int | None, str, str]:
    """``run`` in this process (for a bounded test): ``pipelines.cli.main`` or ``consume``, in ``cwd``,
    its output captured; the per-process caches of graphs and indexes emptied first."""
    import io

    from pipelines import _state
    from pipelines.cli import main as cli_main

    _state.clear()
    out, err, here = io.StringIO(), io.StringIO(), os.getcwd()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        os.chdir(cwd)
        try:
            code = (cli_main if cmd[2] == "pipelines" else main)(cmd[3:])  # python -m MODULE ARGS
        except Exception:  # what a process would print before dying
            traceback.print_exc()
            code = 2
        finally:
            os.chdir(here)
    return code, out.getvalue(), err.getvalue()


def answer_of(folder: Path, answer: str, stdout: str, runner=run) -> str:
    if answer == "stdout":
        return stdout.strip()
    path = folder / answer
    if answer.endswith(".json"):  # the index rebuilt: what a query reads from it
        code, out, err = runner(py("--consume", "index", str(path.parent)), folder, 120)
        return out.strip() if code == 0 else f"exit {code}: {err.strip()[-300:]}"
    if not path.exists():
        return "missing"
    if path.suffix == ".csv":
        return path.read_text()
    import pyarrow.parquet as pq

    files = [path] if path.is_file() else sorted(path.glob("part-*.parquet"))
    try:
        tables = [pq.read_table(f).to_pandas() for f in files]
    except Exception as exc:  # an output left damaged: an answer that differs
        return f"unreadable: {type(exc).__name__}"
    if not tables:
        return "empty"
    import pandas as pd

    frame = pd.concat(tables, ignore_index=True)
    frame = frame.sort_values(list(frame.columns[:2])).reset_index(drop=True)
    return hashlib.sha256(frame.to_csv(index=False).encode()).hexdigest()


def classify(code, stderr: str, same: bool, names: list[str]) -> str:
    lines = [x for x in stderr.strip().splitlines() if x.strip()]
    if code is None or code not in (0, 1) or "Traceback" in stderr:
        return "crash"
    if code == 1:
        errors = [x for x in lines if x.startswith("graphjobs: error:")]
        if len(errors) != 1:
            return "crash"
        return "error" if any(n in errors[0] for n in names) else "unclear"
    if not same:
        return "wrong"
    return "recomputed" if any("warning" in x for x in lines) else "correct"


def edge_file(path: Path, scale: int, seed: int) -> None:
    import graphs

    g = graphs.rmat(scale, seed=seed)
    dst = np.repeat(np.arange(g.n), np.diff(np.asarray(g.indptr)))
    np.savetxt(path, np.c_[np.asarray(g.indices), dst], fmt="%d")


def sweep(args, runner=run, select=None, root=None) -> list[dict]:
    """Build every chosen artifact, corrupt each of its files in each way, classify each consumer's run.
    ``select(kind, file, corruption)`` keeps a subset of the trials; ``runner`` runs a command (a new
    process, or ``run_inprocess``); ``root`` is the folder to work in (default: a new temporary one)."""
    base_root = Path(root) if root is not None else Path(tempfile.mkdtemp(prefix="fault-sweep-"))
    edges = base_root / "e.txt"
    edge_file(edges, args.scale, args.seed)
    rows, jobs = [], []
    chosen = [
        s for s in scenarios(str(edges)) if not args.only or any(s.kind.startswith(o) for o in args.only)
    ]
    for s in chosen:
        base = base_root / s.kind.replace(" ", "_").replace("(", "").replace(")", "").replace(".", "-")
        base.mkdir()
        for cmd in s.build:
            code, out, err = runner(cmd, base, args.timeout)
            if code != 0:
                raise SystemExit(f"{s.kind}: building failed ({' '.join(cmd)}):\n{err}")
        files = sorted({f for g in s.files for f in base.glob(g) if f.is_file()})
        files = [f for f in files if not any(f.match(x) for x in s.skip)]
        # the uncorrupted run's answer: the consumer run once on an intact copy
        good = base_root / f"{base.name}-good"
        shutil.copytree(base, good, copy_function=_copy)
        code, out, err = runner(s.consume, good, args.timeout)
        if code != 0:
            raise SystemExit(f"{s.kind}: the consumer fails on an intact artifact:\n{err}")
        expected = answer_of(good, s.answer, out, runner)
        for f in files:
            rel = f.relative_to(base)
            for name, corrupt in corruptions(f, args.quick or (s.slow and not args.full)):
                if select is None or select(s.kind, rel, name):
                    jobs.append((s, base, rel, name, corrupt, expected))
    print(f"{len(jobs)} trials over {len(chosen)} artifact kinds", file=sys.stderr)

    locks = {s.kind: threading.Lock() for s in chosen}

    def trial(job) -> dict:
        s, base, rel, name, corrupt, expected = job
        folder = Path(tempfile.mkdtemp(prefix="trial-", dir=base_root))
        shutil.rmtree(folder)
        shutil.copytree(base, folder, copy_function=_copy)
        corrupt(folder / rel)
        t0 = time.perf_counter()
        with locks[s.kind] if s.shared else contextlib.nullcontext():  # the index folder is its workdir
            code, out, err = runner(s.consume, folder, args.timeout)
        seconds = time.perf_counter() - t0
        same = code == 0 and answer_of(folder, s.answer, out, runner) == expected
        names = [rel.name, *([str(folder / rel.parent)] if rel.parent.name else [])]  # it, or its folder
        outcome = classify(code, err, same, names)
        message = err.strip().splitlines()[-1][:300] if err.strip() else ""
        row = dict(
            kind=s.kind,
            file=str(rel),
            corruption=name,
            outcome=outcome,
            exit=code,
            seconds=round(seconds, 2),
            message=message,
        )
        if outcome in BAD:
            row["stderr"] = err[-2000:]
        shutil.rmtree(folder, ignore_errors=True)
        return row

    with ThreadPoolExecutor(args.jobs if runner is run else 1) as pool:
        for row in pool.map(trial, jobs):
            rows.append(row)
            if row["outcome"] in BAD or args.verbose:
                print(
                    f"  {row['outcome']:10} {row['kind']}: {row['file']} {row['corruption']}: "
                    f"{row['message'][:200]}",
                    file=sys.stderr,
                )
    if not args.keep and root is None:
        shutil.rmtree(base_root, ignore_errors=True)
    return rows


def _copy(src, dst):
    return shutil.copy2(src, dst)  # copies (not links): a trial corrupts its own files only


def table(rows: list[dict]) -> str:
    kinds = list(dict.fromkeys(r["kind"] for r in rows))
    counts = {k: Counter(r["outcome"] for r in rows if r["kind"] == k) for k in kinds}
    width = max(len(k) for k in [*kinds, "total"])
    head = f"{'artifact':{width}} {'trials':>6} " + " ".join(f"{o:>10}" for o in OUTCOMES)
    lines = [head, "-" * len(head)]
    for k in kinds:
        c = counts[k]
        lines.append(f"{k:{width}} {sum(c.values()):>6} " + " ".join(f"{c[o]:>10}" for o in OUTCOMES))
    total = Counter(r["outcome"] for r in rows)
    lines.append("-" * len(head))
    lines.append(f"{'total':{width}} {len(rows):>6} " + " ".join(f"{total[o]:>10}" for o in OUTCOMES))
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write one JSON line per trial here")
    ap.add_argument("--only", nargs="*", help="artifact kinds whose name starts with one of these")
    ap.add_argument("--scale", type=int, default=10, help="R-MAT scale of the graph (10)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=max(1, min(4, os.cpu_count() or 1)))
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--quick", action="store_true", help="one flip per file (and two JSON edits)")
    ap.add_argument("--full", action="store_true", help="every position also for slow consumers")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folders")
    ap.add_argument(
        "--inprocess",
        action="store_true",
        help="run the commands in this process (faster)",
    )
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--consume", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    ap.add_argument("--save-graph", metavar="PATH", help=argparse.SUPPRESS)
    return ap


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if args.consume:
        return consume(*args.consume)
    if args.save_graph:
        import graphs

        graphs.rmat(args.scale, seed=args.seed).save(args.save_graph)
        return 0
    t0 = time.perf_counter()
    rows = sweep(args, runner=run_inprocess if args.inprocess else run)
    if args.out:
        Path(args.out).write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(table(rows))
    print(f"{time.perf_counter() - t0:.0f} s")
    return int(any(r["outcome"] in BAD for r in rows))


if __name__ == "__main__":
    sys.exit(main())
