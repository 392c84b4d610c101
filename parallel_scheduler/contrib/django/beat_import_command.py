"""``manage.py parallel_scheduler import-django-celery-beat``: the django-celery-beat import
(``beat_import``) from the command line, its plan shown as a table.

Exit status: 0 when every PeriodicTask was imported (or skipped: a one-off that ran, an entry of
the app's ``beat_schedule``), 1 when some were refused (the others were imported; the table says
why each refused one was), 2 for a bad option or when the store refused the write (nothing of
the refused chunk was written, nothing was disabled).
"""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any, NoReturn, TextIO

from parallel_scheduler.contrib.django import conf
from parallel_scheduler.contrib.django.beat_import import ImportRow, import_django_celery_beat
from parallel_scheduler.errors import ParallelSchedulerError

__all__ = ["run"]

PROG = "manage.py parallel_scheduler import-django-celery-beat"
_COLUMNS = ("name", "id", "task", "schedule", "zone", "queue", "action")


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """Errors raised (one line on the given stderr), help printed on the given stdout."""

    def __init__(self, out: TextIO, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.out = out

    def error(self, message: str) -> NoReturn:
        raise _UsageError(message)

    def _print_message(self, message: str, file: object = None) -> None:
        if message:
            self.out.write(message)


def _parser(stdout: TextIO) -> argparse.ArgumentParser:
    parser = _Parser(
        stdout,
        prog=PROG,
        description="Create the recurring (and delayed) jobs equivalent to django-celery-beat's "
        "PeriodicTasks; solar and inexact schedules are listed and refused.",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")
    parser.add_argument(
        "--disable-source",
        action="store_true",
        help="after the write, disable the imported PeriodicTasks (one transaction)",
    )
    parser.add_argument(
        "--database", default="default", metavar="ALIAS", help="Django database alias"
    )
    return parser


def _cell(row: ImportRow, column: str) -> str:
    value = str(getattr(row, column)) or "-"
    if column == "action" and row.reason:
        value = f"{value}: {row.reason}"
    return value


def render_table(rows: list[ImportRow]) -> str:
    """The rows as an aligned text table, one line per PeriodicTask."""
    cells = [[_cell(row, column) for column in _COLUMNS] for row in rows]
    widths = [max([len(c)] + [len(line[i]) for line in cells]) for i, c in enumerate(_COLUMNS)]
    lines = [[c.upper() for c in _COLUMNS], *cells]
    return "\n".join(
        "  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def run(argv: list[str], stdout: TextIO, stderr: TextIO) -> int:
    """Run the subcommand with ``argv`` (the words after its name); returns the exit status."""
    try:
        ns = _parser(stdout).parse_args(argv)
    except _UsageError as exc:
        stderr.write(f"{PROG}: error: {exc}\n")
        return 2
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    from django.db import connections

    if ns.database not in connections:
        stderr.write(f"{PROG}: error: no Django database {ns.database!r} in DATABASES\n")
        return 2
    try:
        rows = import_django_celery_beat(
            conf.get_client(),
            database=ns.database,
            dry_run=ns.dry_run,
            disable_source_tasks=ns.disable_source,
        )
    except ParallelSchedulerError as exc:
        stderr.write(f"{PROG}: error: {exc}\n")
        return 2
    stdout.write(render_table(rows) + "\n" if rows else "no PeriodicTask found\n")
    counts = Counter(row.action for row in rows)
    summary = ", ".join(f"{counts[a]} {a}" for a in ("create", "update", "unchanged") if counts[a])
    left = ", ".join(f"{counts[a]} {a}" for a in ("refused", "skipped") if counts[a])
    verb = "would import" if ns.dry_run else "imported"
    stdout.write(f"{verb} {summary or 'nothing'}{'; ' + left if left else ''}")
    stdout.write(" (dry run: nothing written)\n" if ns.dry_run else "\n")
    if ns.disable_source and not ns.dry_run:
        stdout.write("the imported PeriodicTasks are disabled in django-celery-beat\n")
    return 1 if counts["refused"] else 0
