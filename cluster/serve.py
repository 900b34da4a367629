"""``graphjobs cluster``: a long-running local cluster that jobs submit to with ``--scheduler``."""

from __future__ import annotations

import signal
import sys
import threading


def tls(ca_file: str | None, cert: str | None, key: str | None):
    """A ``distributed.security.Security`` requiring TLS with one certificate for every role, or None."""
    given = [x is not None for x in (ca_file, cert, key)]
    if not any(given):
        return None
    if not all(given):
        from graphs.errors import OptionError

        raise OptionError("TLS needs all of --tls-ca-file, --tls-cert and --tls-key")
    from distributed.security import Security

    roles = {
        f"tls_{r}_{part}": v
        for r in ("client", "scheduler", "worker")
        for part, v in (("cert", cert), ("key", key))
    }
    return Security(tls_ca_file=ca_file, require_encryption=True, **roles)


def serve(
    *, gpus: int | None, workers: int | None, host: str, port: int, dashboard: str, security=None, until=None
) -> None:
    """Start ``make_cluster`` (GPU workers when ``gpus`` > 0), print where to reach it, run until
    SIGINT or SIGTERM (or until ``until()`` is true, polled every 0.2 s), then close it.

    The handlers are installed explicitly: a process started in the background by a shell (or under
    nohup) inherits SIGINT as ignored, and Python then never raises KeyboardInterrupt.
    """
    from .local import make_cluster

    device = "auto" if gpus is None else ("gpu" if gpus > 0 else "cpu")
    count = gpus if gpus else workers
    with make_cluster(
        count, device=device, host=host, scheduler_port=port, dashboard_address=dashboard, security=security
    ) as cluster:
        print(f"graphjobs: scheduler at {cluster.scheduler_address}", file=sys.stderr, flush=True)
        addr = cluster.scheduler_address
        workers = len(cluster.workers)
        print(
            f"graphjobs: {workers} workers; submit jobs with --scheduler {addr}", file=sys.stderr, flush=True
        )
        stop = threading.Event()
        in_main = threading.current_thread() is threading.main_thread()  # handlers can be set only there
        signals = (signal.SIGINT, signal.SIGTERM) if in_main else ()
        kept = {s: signal.signal(s, lambda *_: stop.set()) for s in signals}
        try:
            while not stop.is_set() and (until is None or not until()):
                stop.wait(0.2)
        finally:
            for sig, handler in kept.items():
                signal.signal(sig, handler)
        print("graphjobs: cluster stopped", file=sys.stderr, flush=True)
