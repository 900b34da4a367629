"""The jobs write only real rows (positive value) and count the sources that have fewer than k of them."""

from __future__ import annotations

import pandas as pd
import pytest

import graphs
import pipelines
from tests.operators.test_ranked_rows import chain_graph


@pytest.mark.parametrize("job", ["ppr", "topk-ppr", "simrank"])
def test_jobs_write_only_real_rows_and_count_short_sources(job, tmp_path, sync):
    g, _, _ = chain_graph()
    path = tmp_path / "g"
    g.save(path)
    g = graphs.load(path)
    common = dict(out=tmp_path / "o", workdir=tmp_path / "wd", chunk=2)
    if job == "ppr":
        built = pipelines.ppr_job(g, [300, 5, 301], topk=10, **common)
        want, column = {300: 3, 5: 10, 301: 2}, "ppr"
    elif job == "topk-ppr":
        built = pipelines.topk_ppr_job(g, [300, 5, 301], k=10, **common)
        want, column = {300: 3, 5: 10, 301: 2}, "ppr"
    else:
        built = pipelines.simrank_job(g, [300, 5, 301], k=10, epsilon=0.05, samples="practical", **common)
        want, column = None, "simrank"
    summary = pipelines.run(built, progress=False)
    df = pd.read_parquet(tmp_path / "o")
    assert (df[column] > 0).all() and (df.vertex >= 0).all()
    rows = df.groupby("source")["rank"].agg(["max", "size"])
    assert (rows["max"] == rows["size"]).all()  # ranks 1..count, no gap
    if want is not None:
        assert rows["size"].to_dict() == want and summary.sources_short == 2
    else:  # 300 and 301 have no similar vertex (300 has no in-edge; 301's only in-neighbour is 300)
        assert 300 not in rows.index and 301 not in rows.index and summary.sources_short >= 2
    assert summary.compile_seconds >= 0 and summary.to_dict()["sources_short"] == summary.sources_short
    text = "\n".join(summary.lines(seconds=1.0))
    assert f"{summary.sources_short:,} sources have fewer than k rows" in text
