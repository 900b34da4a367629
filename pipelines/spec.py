"""Job spec files: ``graphjobs run JOB.yaml`` builds a job from YAML, validated before anything runs.

A spec names the job, its input, its options and its outputs, e.g.::

    job: topk-ppr            # pagerank | topk-ppr | ppr | influence | simrank
    input: soc-Epinions1.txt.gz
    sources: {random: 1000}  # or {random: 1000, among: out}, labels, {file: ids.txt}; batch jobs only
    params: {k: 50, epsilon: 0.5}
    out: topk
    workdir: .graphjobs

``influence`` takes ``k`` instead of ``sources``. Relative paths are relative to the spec's folder.
Every error names the file, the key and what is allowed.
"""

from __future__ import annotations

import inspect
from pathlib import Path

from graphs import GraphFormatError
from graphs.errors import OptionError

JOBS = {  # job -> (module, builder, required keys besides job/input)
    "pagerank": ("pagerank", "pagerank_job", ()),
    "topk-ppr": ("topk_ppr", "topk_ppr_job", ("sources",)),
    "ppr": ("ppr", "ppr_job", ("sources",)),
    "influence": ("influence", "influence_job", ("k",)),
    "simrank": ("simrank", "simrank_job", ("sources",)),
}
KEYS = ("job", "input", "sources", "k", "params", "out", "workdir")
# ``params.k`` is the number of top entries in every job that has one, as ``-k`` is on the command line;
# the ppr job's builder names it ``topk`` (which a spec may use too)
PARAM_NAMES = {"ppr": {"k": "topk"}}


class SpecError(OptionError):
    """A job spec that cannot be run: the message names the file, the key and what is allowed."""


def load_spec(path) -> dict:
    """Parse ``path`` (YAML); SpecError with the line for a syntax error or a non-mapping document."""
    import yaml

    path = Path(path)
    try:
        spec = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 1}" if mark is not None else ""
        raise SpecError(f"{path}{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(spec, dict):
        raise SpecError(f"{path}: expected a mapping of keys ({', '.join(KEYS)}), got {type(spec).__name__}")
    return spec


def build_job(spec: dict, path="JOB.yaml"):
    """The ``pipelines`` Job a (parsed) spec describes; SpecError for anything not allowed."""
    import importlib

    base = Path(path).resolve().parent
    unknown = sorted(set(spec) - set(KEYS))
    if unknown:
        raise SpecError(f"{path}: key {unknown[0]!r} is not allowed; allowed keys: {', '.join(KEYS)}")
    name = spec.get("job")
    if name not in JOBS:
        raise SpecError(f"{path}: key 'job' is {name!r}; allowed values: {', '.join(JOBS)}")
    module, builder, required = JOBS[name]
    params = spec.get("params") or {}
    if not isinstance(params, dict):
        raise SpecError(f"{path}: key 'params' must be a mapping of option: value")
    for short, full in PARAM_NAMES.get(name, {}).items():
        if short in params and full in params:
            raise SpecError(f"{path}: keys 'params.{short}' and 'params.{full}' name one option; give one")
        if short in params:
            params = {(full if key == short else key): value for key, value in params.items()}
    from_index = name == "topk-ppr" and "index" in params
    for key in ((), ("input",))[not from_index] + required:
        if key not in spec:
            raise SpecError(f"{path}: job {name!r} needs the key {key!r}")
    for key in {"sources", "k"} - set(required):
        if key in spec:
            raise SpecError(f"{path}: key {key!r} does not apply to job {name!r}")
    fn = getattr(importlib.import_module(f"pipelines.{module}"), builder)
    allowed = [p.name for p in inspect.signature(fn).parameters.values() if p.kind is p.KEYWORD_ONLY]
    allowed = [a for a in allowed if a not in ("out", "workdir")]
    allowed += [short for short, full in PARAM_NAMES.get(name, {}).items() if full in allowed]
    for key in params:
        if key not in allowed:
            raise SpecError(
                f"{path}: key 'params.{key}' is not an option of job {name!r}; allowed: {', '.join(allowed)}"
            )
    kw = dict(params)
    for key in ("out", "workdir"):
        if spec.get(key) is not None:
            kw[key] = str(base / spec[key])
    if from_index:
        kw["index"] = str(base / params["index"])
    source = _input(spec["input"], base) if "input" in spec else None
    args = (source,)
    if name == "influence":
        args += (spec["k"],)
    if name in ("topk-ppr", "ppr", "simrank"):
        args += (_sources(spec["sources"], base, path),)
    try:  # the job checks its options as it is built
        return fn(*args, **kw)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, (SpecError, GraphFormatError)):
            raise
        raise SpecError(f"{path}: {exc}") from exc


def _input(value, base: Path):
    if isinstance(value, list):
        return [str(base / v) for v in value]
    text = str(value)
    return str(base / text) if (base / text).exists() else text  # a file here, else a generator spec


def _sources(value, base: Path, path):
    from .sources import RandomSources, SourceText

    if isinstance(value, list) and value:  # typed by the graph's labels, as a file's lines: [1, a] works
        return SourceText([str(v) for v in value], origin=f"{path}: sources")
    if isinstance(value, dict) and "random" in value and set(value) <= {"random", "among"}:
        try:
            return RandomSources(value["random"], among=value.get("among", "all"))
        except (ValueError, TypeError):
            pass  # the SpecError below names the forms allowed
    if isinstance(value, dict) and list(value) == ["file"]:
        return SourceText.read(str(base / value["file"]))
    raise SpecError(
        f"{path}: key 'sources' must be a list of labels, {{random: N}}, {{random: N, among: "
        f"out}} (or in) or {{file: PATH}}, got {value!r}"
    )
