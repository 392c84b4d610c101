"""What the deploy examples' tests share: where the examples are, the real command-line parser,
and the names the product really reads (settings' environment variables, the dashboard's
credentials), so an example cannot name an option, a command or a variable that does not exist."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from parallel_scheduler.cli import build_parser
from parallel_scheduler.cli.dashboard import BASIC_AUTH_ENV, TOKEN_ENV
from parallel_scheduler.process.service import STOP_GRACE
from parallel_scheduler.settings import SETTING_KINDS, Settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "examples" / "deploy"
CELERY_PROJECT = ROOT / "examples" / "celery_app"

#: Every environment variable the product reads for its settings and the dashboard's credentials.
KNOWN_ENV = frozenset({kind.env_var for kind in SETTING_KINDS} | {BASIC_AUTH_ENV, TOKEN_ENV})


def stop_grace() -> float:
    """How long a graceful stop may take: the service waits this long for passes in flight."""
    return max(STOP_GRACE, Settings().lock_lease)


def parse_cli(argv: list[str]) -> argparse.Namespace:
    """``argv`` (after the program name) parsed by the real ``parallel-scheduler`` parser; a
    test failure naming argparse's complaint when it refuses them."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return build_parser().parse_args(argv)
    except SystemExit:
        pytest.fail(f"parallel-scheduler refuses {shlex.join(argv)}: {err.getvalue().strip()}")


def program_argv(command: list[str], program: str) -> list[str] | None:
    """The arguments after ``program`` when ``command`` runs it (by name or by path)."""
    if command and Path(command[0]).name == program:
        return command[1:]
    return None


def parse_scheduler_command(command: str) -> argparse.Namespace:
    """An example's ``parallel-scheduler`` command line (run by name or by path), parsed by the
    real parser."""
    return parse_cli(program_argv(shlex.split(command), "parallel-scheduler") or [])


def assert_celery_worker_command(command: str) -> None:
    """An example's command line runs ``celery -A proj worker`` with options that
    ``celery worker --help`` lists (``assert_celery_worker_accepts``)."""
    argv = program_argv(shlex.split(command), "celery")
    assert argv is not None and argv[:3] == ["-A", "proj", "worker"]
    assert_celery_worker_accepts(argv[3:])


def assert_celery_worker_accepts(options: list[str]) -> None:
    """Every ``--option`` of ``options`` is one ``celery worker --help`` lists for the example
    project (its app installs the plugin, which adds ``--parallel-scheduler``)."""
    celery = Path(sys.executable).parent / "celery"
    env = {**os.environ, "PYTHONPATH": str(CELERY_PROJECT)}
    done = subprocess.run(
        [str(celery), "-A", "proj", "worker", "--help"],
        cwd=CELERY_PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for option in (o for o in options if o.startswith("--")):
        assert option in done.stdout, f"celery worker has no {option}"
