"""The influence-maximization job: seeds in CSV equal the operator's, spread checked by simulation."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import graphs
import pipelines
from operators import influence_maximization
from pipelines.cli import main


def test_job_writes_the_operators_seeds(tmp_path, sync):
    job = pipelines.influence_job(
        "ba:n=2000,m=3,seed=4",
        6,
        epsilon=0.2,
        model="LT",
        seed=3,
        out=tmp_path / "s.csv",
        workdir=tmp_path,
        n_sim=5000,
    )
    summary = pipelines.run(job, progress=False)
    ref = influence_maximization(graphs.barabasi_albert(2000, 3, seed=4), 6, epsilon=0.2, model="LT", seed=3)
    df = pd.read_csv(tmp_path / "s.csv")
    assert list(df.columns) == ["rank", "vertex", "round", "gain"]
    assert df.vertex.tolist() == ref.seeds.tolist() and df["rank"].tolist() == list(range(1, 7))
    np.testing.assert_allclose(df.gain.sum(), ref.spread)
    mc = summary["mc_spread"]
    assert abs(mc["mean"] - ref.spread) <= 0.2 * ref.spread and summary["theta"] == ref.theta


def test_an_output_path_holding_anything_else_is_refused(tmp_path, sync):
    edges = tmp_path / "edges.csv"
    edges.write_text("0,1\n1,2\n2,0\n")
    with pytest.raises(FileExistsError, match="not the output of a graphjobs influence job"):
        pipelines.influence_job(edges, 1, out=edges, workdir=tmp_path)  # its own input
    assert edges.read_text() == "0,1\n1,2\n2,0\n"
    seeds = tmp_path / "s.csv"
    for _ in range(2):  # the job's own earlier result is replaced
        job = pipelines.influence_job(edges, 1, out=seeds, workdir=tmp_path, n_sim=10)
        pipelines.run(job, progress=False)
        assert len(pd.read_csv(seeds)) == 1
    with pytest.raises(FileExistsError, match=r"s.csv: holds the result of another influence job"):
        pipelines.influence_job(edges, 2, out=seeds, workdir=tmp_path)  # other options: refused
    job = pipelines.influence_job(edges, 2, out=seeds, workdir=tmp_path, n_sim=10, overwrite=True)
    pipelines.run(job, progress=False)
    assert len(pd.read_csv(seeds)) == 2
    (tmp_path / ".s.csv.graphjobs.json").unlink()  # a result whose job is unknown (an older graphjobs)
    with pytest.raises(FileExistsError, match=r"another influence job \(token unknown\)"):
        pipelines.influence_job(edges, 2, out=seeds, workdir=tmp_path)
    with pytest.raises(NotADirectoryError, match="is a file, not a folder"):
        pipelines.influence_job(edges, 1, out=edges / "s.csv", workdir=tmp_path)


def test_cli_exit_codes(tmp_path, capsys):
    out = tmp_path / "seeds.csv"
    args = ["influence", "ba:n=1000,m=2", "-k", "4", "--rounds", "2", "--epsilon", "0.3", "--out", str(out)]
    opts = ["--workdir", str(tmp_path), "--quiet", "--device", "cpu", "--simulations", "500"]
    assert main([*args, *opts]) == 0
    assert "spread: RR estimate" in capsys.readouterr().out
    df = pd.read_csv(out)
    assert np.array_equal(np.bincount(df["round"]), [4, 4])
    bad = [
        "influence",
        "ba:n=100,m=2",
        "--model",
        "LT",
        "--weights",
        "0.6",
        "--undirected",
        "--quiet",
        "--device",
        "cpu",
        "--workdir",
        str(tmp_path),
        "--out",
        str(tmp_path / "x.csv"),
    ]
    assert main(bad) == 1
    assert "sum to at most 1" in capsys.readouterr().err
    other = [*args[:3], "5", *args[4:]]  # -k 5: another job's seeds in --out, refused unless --overwrite
    assert main([*other, *opts]) == 1
    assert "holds the result of another influence job" in capsys.readouterr().err
    assert main([*other, *opts, "--overwrite"]) == 0 and len(pd.read_csv(out)) == 10


def test_on_a_real_local_cluster(tmp_path):
    from distributed import Client

    from cluster import make_cluster

    with make_cluster(2, device="cpu", dashboard_address=":0") as cl, Client(cl) as client:
        job = pipelines.influence_job(
            "ba:n=1500,m=2", 3, epsilon=0.3, out=tmp_path / "s.csv", workdir=tmp_path, n_sim=1000
        )
        summary = pipelines.run(job, client, progress=False)
    mc = summary["mc_spread"]  # 1000 runs at most, fewer once the standard error is 1% of the mean
    assert len(summary["seeds"]) == 3 and (mc["n_sim"] == 1000 or mc["stderr"] <= 0.01 * mc["mean"])
    assert summary["workers"] == 2  # 'auto' spreads the samples over both workers
    assert pd.read_csv(tmp_path / "s.csv").vertex.tolist() == summary["seeds"]
    one = influence_maximization(graphs.barabasi_albert(1500, 2), 3, epsilon=0.3)
    assert summary["seeds"] == one.seeds.tolist() and summary["rr_sets"] == one.rr_sets


def test_cli_spread_check_runs_all_simulations_with_rtol_0_and_fewer_by_default(tmp_path, capsys):
    opts = ["--workdir", str(tmp_path), "--quiet", "--device", "cpu", "--simulations", "3200"]
    base = ["influence", "ba:n=2000,m=3", "-k", "5", "--epsilon", "0.3", *opts]
    assert main([*base, "--out", str(tmp_path / "a.csv"), "--spread-rtol", "0"]) == 0
    assert "(3,200 runs)" in capsys.readouterr().out
    assert main([*base, "--out", str(tmp_path / "b.csv"), "--json"]) == 0  # the default: 1% of the mean
    mc = json.loads(capsys.readouterr().out)["mc_spread"]
    assert mc["n_sim"] < 3200 and mc["stderr"] <= 0.01 * mc["mean"]
    assert main([*base, "--out", str(tmp_path / "c.csv"), "--spread-rtol", "0.001", "--json"]) == 0
    finer = json.loads(capsys.readouterr().out)["mc_spread"]
    assert finer["n_sim"] > mc["n_sim"]
    assert finer["stderr"] <= 0.001 * finer["mean"] or finer["n_sim"] == 3200


def test_the_spread_checks_settings_name_its_task_and_the_summary(tmp_path):
    """Two jobs that differ only in their Monte Carlo check share the IMM task, not the check: on a
    long-lived cluster the second must not get the first's spread back under the same key."""

    def make(**kw):
        return pipelines.influence_job("ba:n=300,m=2", 3, out=tmp_path / "s.csv", workdir=tmp_path, **kw)

    a, b, c = make(n_sim=100), make(n_sim=200), make(n_sim=100, spread_rtol=None)
    assert a.stages["imm"].key == b.stages["imm"].key == c.stages["imm"].key
    assert len({j.stages["spread"].key for j in (a, b, c)}) == 3
    assert len({j.stages["summary"].key for j in (a, b, c)}) == 3
    assert make(n_sim=100).stages["spread"].key == a.stages["spread"].key
