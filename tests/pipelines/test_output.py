"""Output files of jobs (``pipelines._output``): atomic writes and their temporaries."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import numpy as np

from pipelines._output import save_npy


def test_temporaries_of_killed_writers_are_removed_by_the_next_write(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    dead = int(gone.stdout)  # a process of this host that no longer runs
    host = socket.gethostname()
    names = {
        "dead": f".ranks.npy.{host}-{dead}.partial",
        "before owners": f".ranks.npy.{dead}.partial",
        "live": f".ranks.npy.{host}-{os.getpid()}.partial.x",  # not one of ranks.npy's: another name
        "mine": f".ranks.npy.{host}-{os.getppid()}.partial",  # a live process: may be writing it
        "other host": f".ranks.npy.elsewhere-{dead}.partial",
        "other file": f".other.npy.{host}-{dead}.partial",
    }
    for name in names.values():
        (tmp_path / name).write_bytes(b"half")
    save_npy(tmp_path / "ranks.npy", np.arange(5.0))
    np.testing.assert_array_equal(np.load(tmp_path / "ranks.npy"), np.arange(5.0))
    left = {p.name for p in tmp_path.iterdir()}
    assert left == {
        "ranks.npy",
        "ranks.npy.sha256",
        *(names[k] for k in ("live", "mine", "other host", "other file")),
    }


def test_a_broken_manifest_is_one_line_naming_it(tmp_path, capsys):
    from pipelines.cli import main

    args = ["ppr", "rmat:8", "--random", "5", "--out", str(tmp_path / "o"), "--workdir", str(tmp_path / "wd")]
    assert main([*args, "--quiet"]) == 0
    (tmp_path / "o" / "_manifest.json").write_text("{\n")  # cut short
    assert main([*args, "--quiet"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1
        and f"{tmp_path / 'o' / '_manifest.json'}, line 2: expected the job's manifest" in err[0]
    )
    assert main([*args, "--quiet", "--overwrite"]) == 0
