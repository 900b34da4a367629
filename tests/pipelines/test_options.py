"""Every job checks its options when it is built: a typo fails at once, not after the graph is loaded
and an index built."""

from __future__ import annotations

import pytest

import pipelines

SRC = "rmat:scale=7,seed=1"
BAD = {  # name: (job, positional arguments after the graph, the bad option, the message)
    "pagerank alpha": ("pagerank_job", (), {"alpha": 2}, r"alpha must be in \[0, 1\]"),
    "pagerank method": ("pagerank_job", (), {"method": "x"}, "method must be one of"),
    "ppr topk": ("ppr_job", ([1],), {"topk": 0}, "topk must be an integer >= 1"),
    "ppr tol": ("ppr_job", ([1],), {"tol": 0}, "tol must be a positive number"),
    "ppr chunk": ("ppr_job", ([1],), {"chunk": 0}, "chunk must be an integer >= 1"),
    "index epsilon": ("index_job", (), {"epsilon": 0}, "epsilon must be a positive number"),
    "topk k": ("topk_ppr_job", ([1],), {"k": 2.5}, "k must be an integer >= 1, got 2.5"),
    "topk chunk": ("topk_ppr_job", ([1],), {"chunk": -1}, "chunk must be an integer >= 1"),
    "topk streams": ("topk_ppr_job", ([1],), {"streams": 0}, "streams must be an integer >= 1"),
    "simrank c": ("simrank_job", ([1],), {"c": 2}, r"c must be in \(0, 1\)"),
    "influence model": ("influence_job", (2,), {"model": "x"}, "model must be one of"),
    "influence n_sim": ("influence_job", (2,), {"n_sim": -1}, "n_sim must be an integer >= 0"),
    "influence spread_rtol": (
        "influence_job",
        (2,),
        {"spread_rtol": 1.5},
        r"spread_rtol must be in \(0, 1\)",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_options_are_checked_when_the_job_is_built(name, tmp_path):
    job, args, bad, message = BAD[name]
    where = {"out": str(tmp_path / "out")}
    if job != "index_job":
        where["workdir"] = str(tmp_path / "work")
    with pytest.raises(ValueError, match=message):
        getattr(pipelines, job)(SRC, *args, **bad, **where)
    assert not (tmp_path / "out").exists() and not (tmp_path / "work").exists()  # nothing was written
