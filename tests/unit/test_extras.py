"""A missing driver stops with the ``pip install`` line that fixes it, not a bare import error.

The project's virtualenv has every extra installed, so these tests take one driver away the way
Python itself spells "not importable": ``sys.modules[name] = None`` makes the next import of
``name`` raise ``ModuleNotFoundError``, exactly as when the package is absent, and monkeypatch
puts the real module back afterwards. ``scripts/package_check.py`` checks the same messages in a
fresh virtualenv where the drivers are really absent.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from celery import Celery

import parallel_scheduler
import parallel_scheduler.celery
import storage_adapters
from storage_adapters import MissingExtraError, ParallelSchedulerError
from tests.conftest import REDIS_URL


def _hide(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)


def test_redis_storage_without_the_driver_names_the_redis_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _hide(monkeypatch, "redis")
    with pytest.raises(MissingExtraError) as raised:
        storage_adapters.from_url("redis://127.0.0.1:6379/0")
    message = str(raised.value)
    assert message == (
        "Redis storage needs the 'redis' package, which is not installed: "
        "pip install 'parallel-scheduler[redis]'"
    )
    # One except catches everything of ours; code probing for optional features still works.
    assert isinstance(raised.value, ParallelSchedulerError)
    assert parallel_scheduler.MissingExtraError is MissingExtraError  # re-exported by the core
    assert isinstance(raised.value, ImportError)
    assert raised.value.name == "redis"


@pytest.mark.parametrize("url", ["postgresql://app@db/jobs", "postgresql+psycopg://app@db/jobs"])
def test_postgresql_storage_without_the_driver_names_the_postgresql_extra(
    monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    _hide(monkeypatch, "psycopg")
    with pytest.raises(MissingExtraError, match=r"pip install 'parallel-scheduler\[postgresql\]'"):
        storage_adapters.from_url(url)


def test_a_psycopg_that_cannot_load_libpq_names_both_ways_out(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Plain psycopg on a machine without libpq imports but cannot load: a real package that
    fails the same way (psycopg raises ImportError, not ModuleNotFoundError) stands in for it."""
    broken = tmp_path / "psycopg"
    broken.mkdir()
    (broken / "__init__.py").write_text(
        "raise ImportError(\"no pq wrapper available.\\n- couldn't import psycopg 'c' "
        "implementation: No module named 'psycopg_c'\\n- couldn't import psycopg 'python' "
        'implementation: libpq library not found")\n'
    )
    monkeypatch.delitem(sys.modules, "psycopg", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(MissingExtraError) as raised:
        storage_adapters.from_url("postgresql://app@db/jobs")
    message = str(raised.value)
    assert message.startswith("PostgreSQL storage needs 'psycopg', which cannot load (no pq ")
    assert "apt-get install libpq5" in message
    assert "pip install 'parallel-scheduler[postgresql-binary]'" in message


def test_sqlite_storage_needs_no_server_driver(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _hide(monkeypatch, "redis", "psycopg")
    storage = storage_adapters.from_url(f"sqlite:///{tmp_path / 'jobs.db'}")
    try:
        storage.setup()
    finally:
        storage.close()


def test_idempotent_task_without_the_redis_driver_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _hide(monkeypatch, "redis")
    with pytest.raises(MissingExtraError, match=r"^IdempotentTask needs the 'redis' package"):
        parallel_scheduler.celery.IdempotentTask  # noqa: B018 (the attribute access is the test)


def test_idempotent_task_loads_on_first_use() -> None:
    from parallel_scheduler.celery.idempotent import IdempotentTask

    assert parallel_scheduler.celery.IdempotentTask is IdempotentTask
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchThing'"):
        parallel_scheduler.celery.NoSuchThing  # noqa: B018


@pytest.mark.redis
def test_a_redis_broker_without_kombus_redis_transport_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The packaging bug itself: kombu's Redis transport needs ``packaging`` (celery[redis]);
    without it the first ``apply_async`` says what to install instead of failing in kombu."""
    monkeypatch.delitem(sys.modules, "kombu.transport.redis", raising=False)
    _hide(monkeypatch, "packaging", "packaging.version")
    app = Celery("extras", broker=REDIS_URL, set_as_current=False)
    app.conf.parallel_scheduler_eta_threshold = 60
    parallel_scheduler.celery.install(app)

    @app.task(name="extras.noop")
    def noop() -> None:
        """Never runs: the call fails before anything is published."""

    with pytest.raises(MissingExtraError) as raised:
        noop.apply_async(countdown=1)
    assert str(raised.value) == (
        f"the broker {storage_adapters.mask_url(REDIS_URL)!r} needs the 'packaging' package, "
        "which is not installed: pip install 'parallel-scheduler[redis]'"
    )
