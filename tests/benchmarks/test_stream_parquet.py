"""The streamed-Parquet benchmark at a tiny scale: several files and row groups, read back equal."""

import json

from benchmarks import stream_parquet
from benchmarks.common import Reporter


def test_the_dataset_written_in_files_and_groups_reads_back_equal(tmp_path, monkeypatch):
    monkeypatch.setattr(stream_parquet, "FILE_ROWS", 5000)
    monkeypatch.setattr(stream_parquet, "GROUP_ROWS", 700)
    out = tmp_path / "out.jsonl"
    stream_parquet.run(Reporter(str(out), "cpu"), "cpu", [11], str(tmp_path))
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["equal"] is True and row["m"] == 16 * 2**11 and row["files"] == 7
    assert row["disk_gib"] > 0 and row["median"] > 0 and row["baseline"]["median"] > 0
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]  # the dataset is removed
