"""``exporter``: serve the storage-side metrics (``process/storage_metrics.py``) on their own, for
those who run no dashboard: ``/metrics`` in Prometheus text, until SIGINT or SIGTERM.

What it serves comes from storage, so it outlives every scheduler process it reports on: jobs
per state, due now, lag, the scheduler instances alive and dead, each live one's last passes,
the due jobs per queue, the pauses in force and the health judgement, plus its own process
figures and build info.
``/healthz`` answers ``ok`` while it serves (a liveness probe of the exporter itself; the store's
health is the ``healthy`` and ``health_problems`` figures). It binds 127.0.0.1 unless ``--host``
says otherwise (the figures name the jobs' tasks' queues and the instances' hosts: expose them only
where Prometheus needs them).
"""

from __future__ import annotations

import argparse
import signal
import threading
from types import FrameType
from typing import Any

from parallel_scheduler.cli.opening import open_client
from parallel_scheduler.cli.options import add_max_lag
from parallel_scheduler.errors import ConfigurationError
from parallel_scheduler.process.http_endpoint import metrics_app, serve
from parallel_scheduler.process.storage_metrics import storage_registry

__all__ = ["add_commands"]


def _port(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"port {raw!r} is not a number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be between 0 and 65535, not {value}")
    return value


def add_commands(commands: Any) -> None:
    exporter = commands.add_parser(
        "exporter", help="serve storage-side Prometheus metrics (no dashboard needed)"
    )
    exporter.add_argument("--port", type=_port, required=True, help="port (0: any free one)")
    exporter.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    add_max_lag(exporter, "the lag the health figures allow (default: the lag_alert setting)")
    exporter.set_defaults(handler=cmd_exporter)


def _serving() -> list[str]:
    """The exporter's own liveness: it answers, so nothing is wrong with it."""
    return []


def cmd_exporter(ns: argparse.Namespace) -> int:
    stopping = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    previous = {number: signal.signal(number, stop) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        with open_client(ns, read_only=True) as client:
            registry = storage_registry(client, max_lag=ns.max_lag)
            try:
                # /healthz: the exporter itself answers (the store's health is in the figures)
                app = metrics_app(registry, health=lambda: _serving)
                server, thread = serve(app, ns.host, ns.port)
            except OSError as exc:
                raise ConfigurationError(f"cannot listen on {ns.host}:{ns.port}: {exc}") from None
            host = f"[{ns.host}]" if ":" in ns.host else ns.host
            print(f"exporter: http://{host}:{server.server_port}/metrics", flush=True)
            try:
                while not stopping.wait(0.5):  # short waits: the signal handlers run
                    pass
            finally:
                server.shutdown()
                server.server_close()
                thread.join(timeout=5)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    return 0
