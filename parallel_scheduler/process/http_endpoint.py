"""The small HTTP endpoint of ``/metrics`` (Prometheus text) and ``/healthz``: a threading WSGI
server in a daemon thread, as ``prometheus_client.start_http_server`` runs one, with an app that
answers ``/healthz`` itself when given a health check and the metrics on every other path.

``/healthz`` answers ``200 ok`` when the check finds nothing, else ``503`` with one line per
problem (a check that raises is a problem too): what a Kubernetes liveness probe reads.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

__all__ = ["HealthCheck", "metrics_app", "serve"]

#: What ``/healthz`` asks: one line per problem, none when healthy.
HealthCheck = Callable[[], list[str]]
WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """No line per request on stderr (a scrape every few seconds would flood it)."""


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


def _health_answer(check: HealthCheck) -> tuple[str, bytes]:
    try:
        problems = check()
    except Exception as exc:  # the check itself failing is no sign of health
        problems = [f"the health check failed: {type(exc).__name__}: {exc}"]
    if not problems:
        return "200 OK", b"ok\n"
    return "503 Service Unavailable", "".join(f"{line}\n" for line in problems).encode()


def metrics_app(
    registry: CollectorRegistry, health: Callable[[], HealthCheck | None] | None = None
) -> WSGIApp:
    """The metrics of ``registry`` on every path, and ``/healthz`` answered by the check
    ``health()`` returns (read per request, so it can be set after the server starts; ``None``:
    ``/healthz`` is not answered apart)."""
    metrics = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        check = health() if health is not None else None
        if environ.get("PATH_INFO") == "/healthz" and check is not None:
            status, body = _health_answer(check)
            headers = [
                ("Content-Type", "text/plain; charset=utf-8"),
                ("Content-Length", str(len(body))),
                ("Cache-Control", "no-store"),
            ]
            start_response(status, headers)
            return [body]
        answer: Iterable[bytes] = metrics(environ, start_response)
        return answer

    return app


def serve(app: WSGIApp, host: str, port: int) -> tuple[WSGIServer, threading.Thread]:
    """Serve ``app`` on ``host:port`` (``0``: a free port) from a daemon thread; raises
    ``OSError`` when the address cannot be bound."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    server_class = type("EndpointServer", (_ThreadingServer,), {"address_family": family})
    server: WSGIServer = make_server(host, port, app, server_class, handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True)
    thread.start()
    return server, thread
