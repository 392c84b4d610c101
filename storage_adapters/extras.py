"""Which optional extra brings which driver, and the error that names it.

The core install (``pip install parallel-scheduler``) runs with SQLite storage and no server
drivers; the Redis and PostgreSQL drivers come with the extras ``[redis]`` and ``[postgresql]``.
Code that is about to use a driver calls ``require_driver`` first, so a missing one stops with
the ``pip install`` line that fixes it instead of a ``ModuleNotFoundError`` from deep inside an
import. This is the one place that knows which extra installs which driver.
"""

from __future__ import annotations

import importlib

from storage_adapters.errors import ParallelSchedulerError

__all__ = ["EXTRA_FOR_DRIVER", "MissingExtraError", "require_driver"]

# Each optional driver module -> the extra that installs it (kombu's Redis transport also needs
# ``packaging``, which only ``celery[redis]`` brings).
EXTRA_FOR_DRIVER = {
    "redis": "redis",
    "kombu.transport.redis": "redis",
    "psycopg": "postgresql",
    "flask": "dashboard",
    "waitress": "dashboard",
}


class MissingExtraError(ParallelSchedulerError, ImportError):
    """A feature's driver is not installed (or cannot load); the message names the extra.

    It is also an ``ImportError``, so code that probes for optional features the usual way
    still recognises it.
    """


def require_driver(module: str, feature: str) -> None:
    """Import the driver ``module`` or raise ``MissingExtraError`` naming what to install.

    ``feature`` is what the caller was about to do ("Redis storage"), so the message says why
    the driver is needed. A driver that is installed but cannot load (plain psycopg without the
    system's libpq) gets the message that names both ways out.
    """
    extra = EXTRA_FOR_DRIVER[module]
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:  # the driver, or a package it needs, is not installed
        missing = exc.name or module
        if missing != module:  # a package the driver imports: name what pip knows, its top
            missing = missing.partition(".")[0]
        raise MissingExtraError(
            f"{feature} needs the {missing!r} package, which is not installed: "
            f"pip install 'parallel-scheduler[{extra}]'",
            name=missing,
        ) from None
    except ImportError as exc:
        raise _cannot_load(module, extra, feature, exc) from exc


def _cannot_load(module: str, extra: str, feature: str, exc: ImportError) -> MissingExtraError:
    hint = f"reinstall it: pip install --force-reinstall 'parallel-scheduler[{extra}]'"
    if module == "psycopg":
        hint = (
            "install the system's libpq (for example apt-get install libpq5), or use psycopg's "
            "bundled one: pip install 'parallel-scheduler[postgresql-binary]'"
        )
    return MissingExtraError(f"{feature} needs {module!r}, which cannot load ({exc}): {hint}")
