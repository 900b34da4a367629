"""Output folders of batch jobs: one Parquet part per chunk, a record per finished chunk, a manifest.

A chunk writes ``part-NNNNN.parquet`` atomically (a hidden temporary file, then a rename), then its record
``_chunks/part-NNNNN.json`` holding the chunk's token, the part's size and SHA-256, the chunk's summary
and its own checksum. A re-run finds the record with the same token and skips the chunk (resume) if the
record and the part are still what was written; a damaged part or record, or a chunk killed before its
record exists, is recomputed and overwrites its own part, so rows are never duplicated or lost. The summary
task writes ``_manifest.json`` and removes parts and temporaries that are not this job's. Parquet readers
ignore names starting with ``_`` or ``.``, so ``pandas.read_parquet(out)`` sees exactly the job's rows.
"""

from __future__ import annotations

import glob
import json
import os
import sys
import threading
from pathlib import Path

from graphs.errors import IntegrityError
from graphs.store import file_sha256, meta_checksum, owner_tag, read_json, remove_stale

MANIFEST = "_manifest.json"
CHUNKS = "_chunks"


# Set when a job run on the local scheduler is interrupted (Ctrl-C, SIGTERM): its tasks still running on
# the scheduler's threads then rename nothing into place, so nothing lands after the job's locks are
# released and its "interrupted" line is printed (``job._run`` sets and clears it).
INTERRUPTED = threading.Event()


def task_cancelled() -> bool:
    """Whether the task running on this thread belongs to an interrupted job: on Dask's local scheduler,
    ``INTERRUPTED``; on a distributed worker, the worker's state of the task (cancelled once its client
    cancels it or goes away; a local read, no message)."""
    if INTERRUPTED.is_set():
        return True
    if "distributed" not in sys.modules:  # no worker in this process
        return False
    from distributed import get_worker

    try:
        worker = get_worker()
    except ValueError:  # not on a worker's task thread
        return False
    key = worker.get_current_task()
    if key is None:
        return False
    state = worker.state.tasks.get(key)
    return state is None or state.state in ("cancelled", "released", "forgotten")


class WriteInterrupted(RuntimeError):
    """A write of a task of an interrupted job, dropped instead of renamed into place."""


class TaskInterrupted(RuntimeError):
    """Raised at an operator's progress report in a task of an interrupted job (``_progress.in_task``)."""


def write_atomic(path, write) -> None:
    """``write(tmp)`` to a hidden temporary file beside ``path``, then rename it: readers never see half.
    Temporaries of ``path`` left by processes that were killed while writing it are removed. Once the
    job is interrupted (``task_cancelled``) the temporary is removed instead (``WriteInterrupted``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    prefix = f".{path.name}."

    def owner(name: str):  # .NAME.HOST-PID.partial (.NAME.PID.partial before owners were named)
        tag = name[len(prefix) : -len(".partial")]
        return None if tag.isdigit() else tag

    remove_stale(path.parent, f"{glob.escape(prefix)}*.partial", owner)
    tmp = path.parent / f"{prefix}{owner_tag()}.partial"
    try:
        write(str(tmp))
        if task_cancelled():
            raise WriteInterrupted(f"{path}: not written, the job was interrupted")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def warn(message: str) -> None:
    """One line ``graphjobs: warning: ...`` on standard error (of the process running the task)."""
    print(f"graphjobs: warning: {message}", file=sys.stderr, flush=True)


def save_npy(path, x) -> None:
    """``np.save`` of ``x`` to ``path`` through ``write_atomic``, then its SHA-256 to ``path.sha256``
    (``sha256sum`` format) for ``reusable_npy``."""
    import numpy as np

    def write(tmp):
        with open(tmp, "wb") as f:  # a file object: np.save would append .npy to the temporary's name
            np.save(f, x)

    path = Path(path)
    write_atomic(path, write)
    line = f"{file_sha256(path)}  {path.name}\n"
    write_atomic(_digest_file(path), lambda tmp: Path(tmp).write_text(line))


def _digest_file(path: Path) -> Path:
    return path.with_name(f"{path.name}.sha256")


def reusable_npy(path) -> bool:
    """Whether ``path``, written by ``save_npy`` in an earlier run, may be reused: it matches the SHA-256
    recorded with it. A damaged one is reported (``warn``); one saved before digests were recorded is
    recomputed too."""
    path = Path(path)
    if not path.is_file():
        return False
    try:
        digest = _digest_file(path).read_text().split()[0]
    except (OSError, IndexError):
        return False
    if file_sha256(path) == digest:
        return True
    warn(f"{path}: checksum mismatch: the cached result changed or is damaged; computing it again")
    return False


def _record(part: Path) -> Path:
    return part.parent / CHUNKS / f"{part.stem}.json"


def finished(part, token: str) -> tuple[dict | None, str | None]:
    """``(summary, None)`` when chunk ``part`` was finished by a chunk with ``token`` and the part is still
    the file it wrote (its size and SHA-256, recorded then); ``(None, why)`` when it was but the part
    changed since (truncated, damaged, removed); ``(None, None)`` when it was not (or its record predates
    the checksums): either way the chunk runs again."""
    part, rec = Path(part), _record(Path(part))
    try:
        record = json.loads(rec.read_text())
    except (OSError, ValueError):
        return None, None
    if not isinstance(record, dict) or record.get("token") != token or "file" not in record:
        return None, None
    if record.get("checksum", meta_checksum(record)) != meta_checksum(record):
        return None, f"{rec}: checksum mismatch"  # records written before checksums have none to check
    damage = file_damage(part, record["file"])
    return (None, damage) if damage is not None else (record["summary"], None)


def file_record(path) -> dict:
    """What ``file_damage`` checks a file against later: its size and SHA-256."""
    return {"size": os.path.getsize(path), "sha256": file_sha256(Path(path))}


def file_damage(path, record: dict) -> str | None:
    """Why ``path`` is not the file ``record`` (``file_record``) describes, or None when it is."""
    try:
        size = os.path.getsize(path)
    except OSError:
        return f"{path}: missing"
    if size != record["size"]:
        return f"{path}: expected {record['size']} bytes, found {size}"
    if file_sha256(Path(path)) != record["sha256"]:
        return f"{path}: checksum mismatch"
    return None


def mark_finished(part, token: str, job_token: str, summary: dict) -> None:
    record = {"token": token, "job_token": job_token, "file": file_record(part), "summary": summary}
    record = json.loads(json.dumps(record, default=_plain))  # as read back: its checksum over those values
    text = json.dumps({**record, "checksum": meta_checksum(record)})
    write_atomic(_record(Path(part)), lambda tmp: Path(tmp).write_text(text))


def _plain(v):
    return v.item() if hasattr(v, "item") else str(v)


def check_reusable(out, job: str, token: str, overwrite: bool) -> None:
    """Refuse (before anything runs) an ``out`` folder holding another job's results, unless ``overwrite``."""
    out = Path(out)
    if overwrite or not out.exists():
        return
    if not out.is_dir():
        raise NotADirectoryError(f"{out}: exists and is not a folder (expected the job's output folder)")
    manifest = out / MANIFEST
    theirs = None
    if manifest.is_file():
        fields = read_json(manifest, "the job's manifest (--overwrite replaces the folder)")
        if "checksum" in fields and meta_checksum(fields) != fields["checksum"]:  # none before checksums
            raise IntegrityError(
                manifest,
                None,
                "expected the job's manifest as written, but its checksum differs "
                "(damaged or edited): --overwrite replaces the folder",
            )
        theirs = fields.get("token")
    else:
        tokens = {read_json(p, "a chunk's record").get("job_token") for p in (out / CHUNKS).glob("*.json")}
        theirs = next(iter(tokens - {token}), token) if tokens else None
        if theirs is None and any(out.glob("part-*.parquet")):
            theirs = "unknown"
    if theirs not in (None, token):
        raise FileExistsError(
            f"{out}: holds the results of another {job} job or other data (token {theirs}); choose another "
            "output folder, or pass overwrite=True (--overwrite) to replace them"
        )


SEEDS_HEADER = "rank,vertex,round,gain"  # the influence job's CSV


def check_result_file(out, job: str) -> dict | None:
    """Refuse a single-file ``out`` (PageRank's Parquet, influence's CSV) that exists but was not written
    by a ``job`` job, e.g. the job's own input, or whose folder is a file; an earlier result is replaced.
    Returns None when ``out`` does not exist, else the earlier result's Parquet schema metadata (read
    once here; empty for a CSV)."""
    out = Path(out)
    folder = next((p for p in out.parents if p.exists()), None)
    if folder is not None and not folder.is_dir():
        raise NotADirectoryError(f"{out}: {folder} is a file, not a folder")
    if not out.exists():
        return None
    if out.is_dir():
        raise IsADirectoryError(f"{out}: is a folder; expected the path of the {job} result file")
    meta = _result_metadata(out, job)
    if meta is None:
        raise FileExistsError(
            f"{out}: exists and is not the output of a graphjobs {job} job (an input?); choose another "
            "output path, or remove the file"
        )
    return meta


def check_result_token(out, job: str, token: str, overwrite: bool) -> None:
    """``check_result_file``, and refuse (unless ``overwrite``) a result file ``out`` written by another
    ``job`` job (another token): the rule of the batch jobs' output folders (``check_reusable``)."""
    meta = check_result_file(out, job)
    if overwrite or meta is None or meta.get(b"graphjobs.token") == token.encode():
        return
    theirs = meta.get(b"graphjobs.token", b"unknown").decode()
    raise FileExistsError(
        f"{out}: holds the result of another {job} job (token {theirs}); choose another output path, "
        "or pass overwrite=True (--overwrite) to replace it"
    )


def result_sidecar(path) -> Path:
    """The hidden JSON beside a CSV result (influence's seeds) that holds its job's token."""
    path = Path(path)
    return path.parent / f".{path.name}.graphjobs.json"


def write_csv_result(path, job: str, token: str, write) -> None:
    """``write(tmp)`` a CSV result atomically, its token first (``result_sidecar``)."""
    text = json.dumps({"job": job, "token": token})
    write_atomic(result_sidecar(path), lambda tmp: Path(tmp).write_text(text))
    write_atomic(path, write)


def _result_metadata(path: Path, job: str) -> dict | None:
    """The file's schema metadata when a ``job`` job wrote it (for the influence CSV its token, from
    ``result_sidecar``, or {} when that is missing), else None."""
    if job == "influence":
        with open(path, errors="replace") as f:
            if f.readline().rstrip("\r\n") != SEEDS_HEADER:
                return None
        try:
            side = json.loads(result_sidecar(path).read_text())
        except (OSError, ValueError):
            return {}
        token = side.get("token") if isinstance(side, dict) and side.get("job") == job else None
        return {b"graphjobs.token": str(token).encode()} if token else {}
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        meta = pq.read_schema(path).metadata or {}
    except (pa.ArrowInvalid, OSError):
        return None
    return meta if meta.get(b"graphjobs.job") == job.encode() else None


def finish(out, job: str, token: str, parts: list[str], summary: dict) -> None:
    """Remove parts and temporaries that are not in ``parts``, then write the manifest."""
    out = Path(out)
    keep = {Path(p).name for p in parts}
    for f in [*out.glob("part-*.parquet"), *out.glob(".*.partial")]:
        if f.name not in keep:
            f.unlink(missing_ok=True)
            _record(f).unlink(missing_ok=True)
    fields = json.loads(
        json.dumps({"job": job, "token": token, "parts": sorted(keep), "summary": summary}, default=_plain)
    )
    text = json.dumps({**fields, "checksum": meta_checksum(fields)}, indent=1)
    write_atomic(out / MANIFEST, lambda tmp: Path(tmp).write_text(text))
