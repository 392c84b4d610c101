"""``manage.py parallel_scheduler <command>``: every command of the ``parallel-scheduler`` command
line, run with the Django project's scheduler settings, so one process definition (systemd,
Kubernetes, a Procfile) serves the web site and the scheduler alike.

Django's settings reach the command line as the ``PARALLEL_SCHEDULER_*`` environment variables
it reads anyway, set for the command's duration only: every path of the command line (its
option parsing, its error lines with credentials masked, its exit statuses) stays as it is, and
an option given on the command line still wins. The one command Django adds,
``import-django-celery-beat``, is handed to ``beat_import_command``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from typing import Any, TextIO

from parallel_scheduler.contrib.django.conf import (
    DJANGO_CELERY_PREFIX,
    SETTINGS_NAME,
    DjangoSources,
    django_sources,
    masked,
)
from parallel_scheduler.errors import ConfigurationError
from parallel_scheduler.settings import ENV_PREFIX, SETTING_KINDS, Settings
from storage_adapters.errors import one_line

__all__ = ["BEAT_IMPORT", "help_text", "run", "settings_environment", "without_django_options"]

#: The command Django adds to the command line's.
BEAT_IMPORT = "import-django-celery-beat"
#: Options ``manage.py`` itself applies before it calls a command (they take a value).
_DJANGO_OPTIONS = ("--settings", "--pythonpath")
_HELP_FLAGS = ("-h", "--help")


def _as_text(value: Any) -> str:
    """A setting's value as its environment variable spells it (``Settings`` reads it back)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def settings_environment(sources: DjangoSources, settings: Settings) -> dict[str, str]:
    """The ``PARALLEL_SCHEDULER_*`` variables that carry the settings Django's settings set
    (in ``PARALLEL_SCHEDULER`` or the Celery namespace) to the command line, at the value that
    won by precedence. Settings Django does not set are left to the command line's own sources,
    so a Celery app's configuration (``run --app``) still applies to them."""
    configured = sources.configured()
    return {
        kind.env_var: _as_text(getattr(settings, kind.name))
        for kind in SETTING_KINDS
        if kind.name in configured and getattr(settings, kind.name) is not None
    }


@contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def without_django_options(argv: Sequence[str]) -> list[str]:
    """``argv`` without ``--settings``/``--pythonpath``, which ``manage.py`` applied already."""
    kept: list[str] = []
    skip_value = False
    for arg in argv:
        if skip_value:
            skip_value = False
        elif arg in _DJANGO_OPTIONS:
            skip_value = True
        elif not arg.startswith(tuple(option + "=" for option in _DJANGO_OPTIONS)):
            kept.append(arg)
    return kept


def help_text(prog: str) -> str:
    """The command line's help under ``prog``, and what Django adds to it."""
    from parallel_scheduler.cli import build_parser

    parser = build_parser()
    parser.prog = prog
    return (
        parser.format_help() + f"\nDjango: {prog} {BEAT_IMPORT} [--dry-run] [--disable-source]\n"
        "  copies django-celery-beat's periodic tasks into recurring jobs.\n"
        f"\nSettings come from settings.{SETTINGS_NAME}, then the {ENV_PREFIX}* environment "
        f"variables, then the {DJANGO_CELERY_PREFIX}* settings; an option given here wins.\n"
    )


def _exit_status(exc: SystemExit, stderr: TextIO) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=stderr)
    return 1


def run(argv: Sequence[str], stdout: TextIO, stderr: TextIO, prog: str = "manage.py") -> int:
    """Run the command line's ``argv`` (what follows ``manage.py parallel_scheduler``) with the
    project's settings; its exit status (0 done, 1 a negative answer such as an unhealthy
    ``status --check``, 2 bad input or an error said in one line on ``stderr``)."""
    argv = list(argv)
    if argv and argv[0] == BEAT_IMPORT:
        from parallel_scheduler.contrib.django import beat_import_command

        return int(beat_import_command.run(argv[1:], stdout, stderr))
    if not argv or argv[0] in _HELP_FLAGS:
        stdout.write(help_text(f"{prog} parallel_scheduler"))
        return 0
    try:
        sources = django_sources()
        settings = Settings.load(sources.overrides, celery_conf=sources.celery_conf)
    except ConfigurationError as exc:
        print(f"parallel-scheduler: error: {one_line(masked(str(exc)))}", file=stderr)
        return 2
    from parallel_scheduler.cli import main

    with (
        _environment(settings_environment(sources, settings)),
        redirect_stdout(stdout),
        redirect_stderr(stderr),
    ):
        try:
            return main(argv)
        except SystemExit as exc:  # argparse: --help (0) or a bad argument (2)
            return _exit_status(exc, sys.stderr)
