"""``manage.py parallel_scheduler <command> [args]``: the ``parallel-scheduler`` command line with
the project's settings. Thin on purpose: the work is ``contrib/django/commands.py``'s; this only
hands it the arguments untouched and turns its exit status into the process's."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from parallel_scheduler.contrib.django import commands

__all__ = ["Command"]


class Command(BaseCommand):  # type: ignore[misc]  # Django ships no types
    help = "Run a parallel-scheduler command (run, status, list, ...) with this project's settings."
    # The command line judges its own settings; `manage.py check` runs the app's checks.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("args", nargs=argparse.REMAINDER, metavar="COMMAND [ARGS ...]")

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> Any:
        """Django's parser, handing every argument to the command line untouched: what
        ``call_command`` uses (``run_from_argv`` parses nothing), so its options
        (``call_command("parallel_scheduler", "--prefix", "x", "list")``) are not refused."""
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parse_args = parser.parse_args

        def everything_to_the_command_line(args: Any = None, namespace: Any = None) -> Any:
            parsed = parse_args([], namespace)  # Django's defaults only
            parsed.args = [str(arg) for arg in args or ()]
            return parsed

        parser.parse_args = everything_to_the_command_line
        return parser

    def print_help(self, prog_name: str, subcommand: str) -> None:
        """``manage.py help parallel_scheduler``: the command line's help."""
        self.stdout.write(commands.help_text(f"{os.path.basename(prog_name)} {subcommand}"))

    def run_from_argv(self, argv: list[str]) -> None:
        """``manage.py parallel_scheduler ...``: every argument goes to the command line as is
        (Django's parser would refuse its options); its exit status is the process's."""
        prog = os.path.basename(argv[0])
        try:
            status = commands.run(
                commands.without_django_options(argv[2:]), sys.stdout, sys.stderr, prog
            )
        finally:
            connections.close_all()
        if status:
            sys.exit(status)

    def handle(self, *args: str, **options: Any) -> None:
        """``call_command("parallel_scheduler", "status", "--check")``: a non-zero exit status is
        a ``CommandError`` carrying it (``returncode``)."""
        argv = list(args)
        stdout = options.get("stdout") or sys.stdout
        stderr = options.get("stderr") or sys.stderr
        status = commands.run(argv, stdout, stderr)
        if status:
            shown = argv[0] if argv else "parallel_scheduler"
            raise CommandError(f"{shown} exited with status {status}", returncode=status)
