"""``dashboard``: serve the web dashboard (``parallel_scheduler.dashboard``) with waitress.

It binds 127.0.0.1 unless told otherwise and prints the URL it serves. Credentials can come from
``PARALLEL_SCHEDULER_DASHBOARD_BASIC_AUTH`` (``USER:PASSWORD``) or
``PARALLEL_SCHEDULER_DASHBOARD_TOKEN`` instead of the command line, where other users of the
machine could read them in the process list. Binding another address without auth is allowed
(a private network, a proxy that authenticates) but warned about.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from collections.abc import Callable
from typing import Any

from parallel_scheduler.cli.opening import open_client
from parallel_scheduler.errors import ConfigurationError
from storage_adapters.extras import require_driver

__all__ = ["BASIC_AUTH_ENV", "TOKEN_ENV", "add_commands"]

BASIC_AUTH_ENV = "PARALLEL_SCHEDULER_DASHBOARD_BASIC_AUTH"
TOKEN_ENV = "PARALLEL_SCHEDULER_DASHBOARD_TOKEN"


def add_commands(commands: Any) -> None:
    board = commands.add_parser("dashboard", help="serve the web dashboard")
    board.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    board.add_argument("--port", type=_port, default=8080, help="port (default 8080; 0: any)")
    board.add_argument(
        "--read-only", action="store_true", help="hide every action and refuse every POST"
    )
    auth = board.add_mutually_exclusive_group()
    auth.add_argument(
        "--basic-auth",
        metavar="USER:PASSWORD",
        help=f"require HTTP basic auth (or {BASIC_AUTH_ENV})",
    )
    auth.add_argument("--token", help=f"require a bearer token (or {TOKEN_ENV})")
    board.add_argument("--threads", type=_threads, default=8, help="server threads (default 8)")
    board.set_defaults(handler=cmd_dashboard)


def _int_between(name: str, low: int, high: int) -> Callable[[str], int]:
    """A parser of ``--<name>``: an integer from ``low`` to ``high``, refused by name otherwise."""

    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} {raw!r} is not a number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"{name} must be between {low} and {high}, not {value}"
            )
        return value

    return parse


_port = _int_between("port", 0, 65535)
_threads = _int_between("threads", 1, 256)


def _auth(ns: argparse.Namespace) -> Any:
    from parallel_scheduler.dashboard import TokenAuth, parse_basic_auth

    basic = ns.basic_auth or (None if ns.token else os.environ.get(BASIC_AUTH_ENV))
    token = ns.token or (None if ns.basic_auth else os.environ.get(TOKEN_ENV))
    if basic and token:
        raise ConfigurationError(
            f"both basic auth and a token are set ({BASIC_AUTH_ENV}, {TOKEN_ENV}): choose one"
        )
    if basic:
        return parse_basic_auth(basic)
    return TokenAuth(token) if token else None


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def cmd_dashboard(ns: argparse.Namespace) -> int:
    require_driver("flask", "the web dashboard")
    require_driver("waitress", "parallel-scheduler dashboard")
    from waitress import create_server

    from parallel_scheduler.dashboard import create_app

    auth = _auth(ns)
    if auth is None and not _loopback(ns.host):
        print(
            f"parallel-scheduler: warning: serving {ns.host} without --basic-auth or --token: "
            "anyone who can reach it can act on your jobs",
            file=sys.stderr,
        )
    with open_client(ns, read_only=True) as client:
        app = create_app(client, read_only=ns.read_only, auth=auth)
        try:
            server = create_server(app, host=ns.host, port=ns.port, threads=ns.threads)
        except OSError as exc:
            raise ConfigurationError(f"cannot listen on {ns.host}:{ns.port}: {exc}") from None
        host = f"[{ns.host}]" if ":" in ns.host else ns.host
        mode = " (read-only)" if ns.read_only else ""
        print(f"dashboard: http://{host}:{server.effective_port}/{mode}", flush=True)
        try:
            server.run()
        finally:
            server.close()
    return 0
