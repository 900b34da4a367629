"""Runs the code blocks of one Markdown page in order, in the current folder: ``python run_blocks.py
BLOCKS.json`` (written by tests/test_readme.py). Python blocks run in one namespace named ``__main__``,
compiled under the page's name with the page's line numbers; shell blocks run in bash with ``graphjobs``
and ``python`` being this interpreter's ``-m pipelines`` and itself; a block marked ``file`` is saved
under its name for later blocks to read."""

from __future__ import annotations

import builtins
import json
import subprocess
import sys
import time
from pathlib import Path

SHELL = """\
graphjobs() { "$GRAPHJOBS_PYTHON" -m pipelines "$@"; }
python() { "$GRAPHJOBS_PYTHON" "$@"; }
set -euxo pipefail
"""


def main(blocks: list[dict]) -> None:
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    for block in blocks:
        print(f"--- {block['where']} ({block['lang']})", file=sys.stderr, flush=True)
        start = time.perf_counter()
        if block["file"]:
            Path(block["file"]).write_text(block["code"])
        elif block["lang"] == "python":
            code = "\n" * block["line"] + block["code"]  # line numbers as in the page
            exec(compile(code, block["page"], "exec"), namespace)
        else:
            subprocess.run(["bash", "-c", SHELL + block["code"]], check=True)
        print(f"--- {block['where']}: {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)


if __name__ == "__main__":  # the worker processes of a cluster that a block starts import this file again
    main(json.loads(Path(sys.argv[1]).read_text()))
