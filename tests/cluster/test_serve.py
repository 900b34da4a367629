"""`graphjobs cluster`: a long-running local cluster, localhost by default, TLS when given certificates."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from distributed import Client

from cluster import connect, make_cluster, worker_device
from cluster.serve import tls
from pipelines.cli import main
from tests.conftest import child_env

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_bind_to_localhost():
    with make_cluster(1, device="cpu") as cluster:
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
        assert "127.0.0.1" in cluster.dashboard_link


def _ignore_sigint():  # as a shell does for a command started in the background, or nohup scripts
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize("stop", ["SIGINT", "SIGINT from the background", "SIGTERM"])
def test_cluster_command_serves_jobs_until_interrupted(tmp_path, stop):
    cmd = [
        sys.executable,
        "-m",
        "pipelines",
        "cluster",
        "--gpus",
        "0",
        "--workers",
        "1",
        "--port",
        "0",
        "--dashboard",
        "127.0.0.1:0",
    ]
    env = child_env()
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=_ignore_sigint if "background" in stop else None,
    )
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if "submit jobs with --scheduler" in line:
                break
        address = lines[-1].rsplit(" ", 1)[-1].strip()
        assert address.startswith("tcp://127.0.0.1:"), lines
        out = str(tmp_path / "p.parquet")
        args = [
            "pagerank",
            "rmat:scale=8,seed=1",
            "--scheduler",
            address,
            "--out",
            out,
            "--workdir",
            str(tmp_path),
            "--quiet",
        ]
        assert main(args) == 0
        assert (tmp_path / "p.parquet").is_file()
    finally:
        proc.send_signal(getattr(signal, stop.split()[0]))
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "cluster stopped" in out


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl to make a test certificate")
def test_tls_cluster(tmp_path):
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            key,
            "-out",
            cert,
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
        ],
        check=True,
        capture_output=True,
    )
    security = tls(str(cert), str(cert), str(key))
    with make_cluster(1, device="cpu", dashboard_address=":0", security=security) as cluster:
        assert cluster.scheduler_address.startswith("tls://127.0.0.1:")
        with connect(cluster.scheduler_address, security=security) as client:
            assert client.submit(worker_device).result() == "cpu"
        with Client(cluster.scheduler_address, security=security) as client:
            assert client.submit(sum, [1, 2]).result() == 3
    with pytest.raises(ValueError, match="all of"):
        tls(str(cert), None, None)
