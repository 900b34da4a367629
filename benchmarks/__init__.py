"""Benchmarks: ``python -m benchmarks.run --device cpu|gpu --out FILE.jsonl``.

One JSON line per measurement, each beside its baseline measured in the same run.
"""
