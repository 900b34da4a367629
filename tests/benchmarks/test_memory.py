"""benchmarks.memory at a tiny scale on the CPU: a row per job, each job run in its own process to the
end (exit 0), with the estimate its summary states (on the host here) and the growth of its process's
resident set as its peak."""

from __future__ import annotations

import json

from benchmarks import memory


def test_every_job_runs_and_states_what_it_estimates(tmp_path):
    out = tmp_path / "memory.jsonl"
    jobs = "index,ppr"
    memory.main(["--device", "cpu", "--scales", "8", "--jobs", jobs, "--out", str(out)])
    rows = {r["job"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert list(rows) == ["index", "ppr"]
    for job, row in rows.items():
        assert row["exit"] == 0 and row["error"] is None and row["n"] == 256, (job, row)
        assert row["peak_gib"] > 0 and row["pool_gib"] is None and row["device"] == "cpu"
    # the index states its walks' estimate on the host too
    parts = {"graph", "renumbered copy", "omega and beta", "walks", "a chunk's work"}
    assert rows["index"]["estimate_gib"] > 0 and set(rows["index"]["parts"]) == parts
    # a CPU chunk of PowerPush solves: the graph, their workspaces and the top rows
    assert rows["ppr"]["estimate_gib"] > 0
    assert set(rows["ppr"]["parts"]) == {"graph", "the solves' workspaces", "top rows"}
