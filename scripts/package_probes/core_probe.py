"""Run in a fresh virtualenv with the wheel installed WITHOUT extras (scripts/package_check.py).

The server drivers must be absent, every module must import except those that exist only to
speak to Redis, SQLite storage must work, and each feature that needs a missing driver must stop
with the ``pip install`` line that fixes it. Argument: a path for the SQLite file.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
import uuid
from collections.abc import Callable

from celery import Celery

import parallel_scheduler
import parallel_scheduler.celery
import storage_adapters
from parallel_scheduler import Client
from parallel_scheduler.dashboard import create_app
from storage_adapters import MissingExtraError, from_url

# Modules whose one job is speaking to Redis: they need the [redis] extra, by design (the Redis
# adapter's folder, the Redis-list publisher, IdempotentTask).
REDIS_ONLY = ("__main__", ".redis_lists", ".idempotent")
REDIS_ADAPTER = "storage_adapters.redis."
# The web dashboard's pages are Flask code: they need the [dashboard] extra, by design (the
# package itself imports, and create_app names the extra; checked below).
DASHBOARD_PAGES = "parallel_scheduler.dashboard."
# The Django app's modules are Django code: they need the [django] extra, by design (the package
# itself imports without it).
DJANGO_APP = "parallel_scheduler.contrib.django."


def check_clean_environment() -> None:
    for driver in ("redis", "psycopg", "packaging"):
        assert importlib.util.find_spec(driver) is None, f"the core install brought {driver}"
    for package in (parallel_scheduler, storage_adapters):
        assert str(package.__file__).startswith(sys.prefix), f"{package.__file__}: not the wheel"


def check_every_module_imports() -> None:
    broken = []
    for package in (parallel_scheduler, storage_adapters):
        for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if module.name.endswith(REDIS_ONLY) or module.name.startswith(
                (REDIS_ADAPTER, DASHBOARD_PAGES, DJANGO_APP)
            ):
                continue
            try:
                importlib.import_module(module.name)
            except Exception as exc:
                broken.append(f"{module.name}: {exc!r}")
    assert not broken, "modules that do not import without extras: " + "; ".join(broken)


def check_sqlite_round_trip(path: str) -> None:
    client = Client(storage_url=f"sqlite:///{path}")
    try:
        client.setup()
        job_id = f"core-{uuid.uuid4().hex}"
        result = client.schedule("tasks.record", ["x"], countdown=3600, job_id=job_id)
        job = client.get(job_id)
        assert result.created and job is not None and job.args == ["x"], "SQLite: not stored"
        assert client.cancel(job_id), "SQLite round trip: cancel failed"
    finally:
        client.close()


def expect_missing_extra(what: str, extra: str, attempt: Callable[[], object]) -> None:
    try:
        attempt()
    except MissingExtraError as exc:
        line = f"pip install 'parallel-scheduler[{extra}]'"
        assert line in str(exc), f"{what}: {exc} (expected {line!r})"
    else:
        raise AssertionError(f"{what} worked without the [{extra}] extra's driver")


def check_missing_extras_are_named() -> None:
    expect_missing_extra("Redis storage", "redis", lambda: from_url("redis://127.0.0.1:1/0"))
    expect_missing_extra(
        "PostgreSQL storage", "postgresql", lambda: from_url("postgresql://u@127.0.0.1:1/d")
    )
    expect_missing_extra(
        "IdempotentTask", "redis", lambda: parallel_scheduler.celery.IdempotentTask
    )
    expect_missing_extra("the web dashboard", "dashboard", create_app)

    app = Celery("core", broker="redis://127.0.0.1:1/0", set_as_current=False)
    app.conf.parallel_scheduler_eta_threshold = 60
    parallel_scheduler.celery.install(app)

    @app.task(name="tasks.record")
    def record(what: str) -> None:
        """Never runs: the call stops before anything is sent."""

    expect_missing_extra(
        "apply_async to a Redis broker", "redis", lambda: record.apply_async(("x",), countdown=1)
    )


if __name__ == "__main__":
    check_clean_environment()
    check_every_module_imports()
    check_sqlite_round_trip(sys.argv[1])
    check_missing_extras_are_named()
    print("core install: ok")
