"""`graphjobs run JOB.yaml`: specs validated up front (file, key, allowed values), --json, exit codes."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest

import pipelines.cli as cli
from pipelines.cli import main
from pipelines.spec import SpecError, build_job, load_spec


def _write(tmp_path, text, name="job.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_pagerank_spec_runs_with_json_summary(tmp_path, capsys):
    spec = _write(
        tmp_path,
        "job: pagerank\ninput: rmat:scale=9,seed=2\nparams: {alpha: 0.9, tol: 1.0e-8}\n"
        "out: pr.parquet\nworkdir: wd\n",
    )
    assert main(["run", str(spec), "--json", "--device", "cpu"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["job"] == "pagerank" and summary["n"] == 512
    assert summary["out"] == str(tmp_path / "pr.parquet")
    assert len(pd.read_parquet(tmp_path / "pr.parquet")) == 512


def test_batch_and_influence_specs(tmp_path, capsys):
    (tmp_path / "ids.txt").write_text("1\n7\n")
    spec = _write(
        tmp_path,
        "job: ppr\ninput: rmat:scale=9,seed=1\nsources: {file: ids.txt}\n"
        "params: {k: 4, method: power}\nout: ppr\nworkdir: wd\n",
    )
    assert main(["run", str(spec), "--device", "cpu", "--quiet"]) == 0
    assert "first source 1" in capsys.readouterr().out
    rows = pd.read_parquet(tmp_path / "ppr")
    assert sorted(rows.source.unique()) == [1, 7] and rows.groupby("source").size().max() == 4  # k: top 4
    (tmp_path / "e.txt").write_text("a 1\n1 b\nb a\n")  # string labels: an unquoted 1 in the list is "1"
    spec = _write(tmp_path, "job: ppr\ninput: e.txt\nsources: [1, b]\nout: p2\nworkdir: wd\n", "l.yaml")
    assert main(["run", str(spec), "--device", "cpu", "--quiet"]) == 0
    assert sorted(pd.read_parquet(tmp_path / "p2").source.unique()) == ["1", "b"]
    spec = _write(tmp_path, "job: ppr\ninput: e.txt\nsources: [a, c]\nout: p3\nworkdir: wd\n", "m.yaml")
    assert main(["run", str(spec), "--device", "cpu", "--quiet"]) == 1
    assert "m.yaml: sources: vertex 'c' is not in the graph" in capsys.readouterr().err
    spec = _write(
        tmp_path,
        "job: influence\ninput: ba:n=300,m=2\nk: 3\nparams: {epsilon: 0.5, n_sim: 100}\n"
        "out: seeds.csv\nworkdir: wd\n",
        "im.yaml",
    )
    assert main(["run", str(spec), "--device", "cpu", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["seeds"]) == 3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("job: pagerank\ninput: x\nouput: y\n", "key 'ouput' is not allowed; allowed keys: job, input"),
        ("job: pagerang\ninput: x\n", "key 'job' is 'pagerang'; allowed values: pagerank, topk-ppr"),
        ("job: ppr\ninput: rmat:8\n", "job 'ppr' needs the key 'sources'"),
        ("job: pagerank\ninput: rmat:8\nk: 3\n", "key 'k' does not apply to job 'pagerank'"),
        ("job: pagerank\ninput: rmat:8\nparams: {alhpa: 0.9}\n", "key 'params.alhpa' is not an option"),
        ("job: ppr\ninput: rmat:8\nsources: {random: -2}\n", "key 'sources' must be a list"),
        ("job: pagerank\ninput: a: b\n", "line 2: not valid YAML"),
        ("- just\n- a list\n", "expected a mapping of keys"),
        # option values are checked as the job is built, not after the graph is loaded
        ("job: pagerank\ninput: rmat:8\nparams: {alpha: high}\n", "alpha must be a real number, got 'high'"),
        ("job: pagerank\ninput: rmat:8\nparams: {alpha: .nan}\n", "alpha must be in [0, 1], got nan"),
        ("job: ppr\ninput: rmat:8\nsources: [1]\nparams: {chunk: 0}\n", "chunk must be an integer >= 1"),
        ("job: ppr\ninput: rmat:8\nsources: [1]\nparams: {k: 5, topk: 5}\n", "'params.k' and 'params.topk'"),
        ("job: influence\ninput: rmat:8\nk: 0\n", "k must be an integer >= 1, got 0"),
    ],
)
def test_spec_errors_name_the_key_and_what_is_allowed(tmp_path, text, message):
    path = _write(tmp_path, text)
    with pytest.raises(SpecError) as err:
        build_job(load_spec(path), path)
    assert str(path) in str(err.value) and message in str(err.value)


def test_exit_codes(tmp_path, capsys, monkeypatch):
    bad = _write(tmp_path, "job: nope\n")
    assert main(["run", str(bad)]) == 1
    assert "allowed values" in capsys.readouterr().err

    def broken(args):
        raise RuntimeError("a bug")

    monkeypatch.setitem(cli.COMMANDS, "run", dataclasses.replace(cli.COMMANDS["run"], job=broken))
    assert main(["run", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "internal error" in err and "Traceback" in err and "RuntimeError: a bug" in err


@pytest.mark.parametrize(
    "command", ["demo", "run", "cluster", "pagerank", "index", "topk-ppr", "ppr", "influence", "simrank"]
)
def test_every_command_has_help_with_examples(command, capsys):
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "examples:" in out and f"graphjobs {command}" in out


def test_json_summary_of_a_job_command(tmp_path, capsys):
    out = str(tmp_path / "p.parquet")
    args = [
        "pagerank",
        "rmat:scale=8,seed=3",
        "--json",
        "--device",
        "cpu",
        "--out",
        out,
        "--workdir",
        str(tmp_path),
    ]
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["n"] == 256 and len(summary["top"]) == 10 and summary["memory"]["partitions"] == 1
