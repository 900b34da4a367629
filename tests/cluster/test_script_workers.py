"""A user's script that imports graphjobs at its top and starts a CPU cluster: each spawned worker imports
the script again (and Numba with it) before its nanny sets the environment; the first compilation on the
workers must still work (a cold Numba cache)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.conftest import child_env

SCRIPT = """
import graphjobs as gj

if __name__ == "__main__":
    with open("edges.txt", "w") as f:
        f.write("\\n".join(f"{u} {(u * 7 + 3) % 50}" for u in range(50)))
    with gj.connect(n_workers=2, device="cpu", dashboard_address=":0") as client:
        s = gj.run(gj.pagerank_job("edges.txt", out="ranks.parquet"), client, progress=False)
        print("vertices", s.n)
"""


def test_a_script_importing_graphjobs_at_its_top_runs_a_job_on_cold_workers(tmp_path):
    (tmp_path / "job.py").write_text(textwrap.dedent(SCRIPT))
    env = child_env(NUMBA_CACHE_DIR=str(tmp_path / "numba-cache"))
    env.pop("NUMBA_NUM_THREADS", None)
    run = [sys.executable, "job.py"]
    out = subprocess.run(run, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "vertices 50" in out.stdout
