"""MkDocs hook: the performance page shows the current tables of benchmarks/RESULTS.md (kept in one place),
and links to README.md from the pages resolve to the home page."""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "RESULTS.md"
MARK = "<!-- current tables of benchmarks/RESULTS.md -->"


def current_tables() -> str:
    """The '## Current figures' section of RESULTS.md, its headings one level down."""
    text = RESULTS.read_text()
    start = text.index("## Current figures")
    end = text.index("\n## ", start + 1)
    body = text[start:end].split("\n", 1)[1]
    return body.replace("](results/", "](../benchmarks/results/")


def on_page_markdown(markdown: str, page, config, files) -> str:
    if MARK in markdown:
        markdown = markdown.replace(MARK, current_tables())
    outside = {"](../README.md)": "](index.md)", "](../benchmarks/RESULTS.md)": "](performance.md)"}
    for link, page in outside.items():
        markdown = markdown.replace(link, page)
    return markdown
