"""The app's settings from Django's (the ``PARALLEL_SCHEDULER`` dict, the environment, the Celery
namespace), the cached client following ``override_settings``, and ``manage.py check`` naming
every bad setting as a ``parallel_scheduler.E0xx`` error, against real SQLite and PostgreSQL
stores."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.checks import run_checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

import storage_adapters
from parallel_scheduler import Client
from parallel_scheduler.contrib.django import conf
from parallel_scheduler.contrib.django.checks import TAG
from parallel_scheduler.errors import ConfigurationError
from tests.conftest import POSTGRESQL_URL, require_server, unique_prefix


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No ``PARALLEL_SCHEDULER_*`` variable from the shell; no client left for the next test."""
    import os

    for name in list(os.environ):
        if name.startswith("PARALLEL_SCHEDULER_") and not name.startswith(
            "PARALLEL_SCHEDULER_TEST_"
        ):
            monkeypatch.delenv(name)
    yield
    conf.reset()


def messages(**settings: Any) -> list[tuple[str, str, str]]:
    """The app's check messages under ``settings``: (id, message, hint)."""
    with override_settings(**settings):
        return [(m.id, m.msg, m.hint or "") for m in run_checks(tags=[TAG])]


def ids(**settings: Any) -> list[str]:
    return [found[0] for found in messages(**settings)]


def sqlite_url(tmp_path: Path, name: str = "jobs.db") -> str:
    return f"sqlite:///{tmp_path / name}"


# -- settings ---------------------------------------------------------------------------------


def test_settings_from_the_dict_the_environment_and_the_celery_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = sqlite_url(tmp_path)
    # The Celery namespace alone
    with override_settings(
        PARALLEL_SCHEDULER=None,
        CELERY_PARALLEL_SCHEDULER_STORAGE_URL=url,
        CELERY_PARALLEL_SCHEDULER_BATCH_SIZE=7,
    ):
        loaded = conf.load_settings()
        assert (loaded.storage_url, loaded.batch_size) == (url, 7)
        # The environment beats the Celery namespace
        monkeypatch.setenv("PARALLEL_SCHEDULER_BATCH_SIZE", "8")
        assert conf.load_settings().batch_size == 8
        # The dict beats both
        with override_settings(PARALLEL_SCHEDULER={"batch_size": 9, "prefix": "djp"}):
            loaded = conf.load_settings()
            assert (loaded.storage_url, loaded.batch_size, loaded.prefix) == (url, 9, "djp")


def test_a_bad_setting_is_refused_with_its_name_and_the_url_masked() -> None:
    with (
        override_settings(PARALLEL_SCHEDULER={"batch_sise": 5}),
        pytest.raises(ConfigurationError, match=r"unknown setting.*batch_sise"),
    ):
        conf.load_settings()
    with (
        override_settings(PARALLEL_SCHEDULER="sqlite:///x.db"),
        pytest.raises(ConfigurationError, match="PARALLEL_SCHEDULER setting must be a dict"),
    ):
        conf.load_settings()
    with (
        override_settings(PARALLEL_SCHEDULER={"storage_url": "mongodb://u:hunter2@h/db"}),
        pytest.raises(ConfigurationError) as raised,
    ):
        conf.load_settings()
    assert "hunter2" not in str(raised.value) and "u:***@h" in str(raised.value)


def test_the_client_follows_override_settings_and_is_set_up(tmp_path: Path) -> None:
    default_client = conf.get_client()
    assert conf.get_client() is default_client  # one per process
    url = sqlite_url(tmp_path, "override.db")
    with override_settings(PARALLEL_SCHEDULER={"storage_url": url, "prefix": "djo"}):
        # Given settings changed by override_settings, Then the next client opens their store,
        # set up: a read and a write work without a separate set-up step
        client = conf.get_client()
        assert client is not default_client
        assert (client.settings.storage_url, client.settings.prefix) == (url, "djo")
        assert client.list() == []
        client.schedule("t.x", job_id="j", countdown=60)
        assert Client(storage_url=url, prefix="djo").get("j") is not None
    # And once the override ends, the project's own store again
    assert conf.get_client().settings.storage_url != url


def test_the_celery_plugin_reads_the_projects_dict_too(tmp_path: Path) -> None:
    from celery import Celery

    import parallel_scheduler.celery

    url = sqlite_url(tmp_path, "plugin.db")
    with override_settings(PARALLEL_SCHEDULER={"storage_url": url, "prefix": "djp"}):
        # Given a Django project that sets only the dict, When its Celery app, configured from
        # Django's settings, installs the plugin, Then the plugin stores calls where the pages
        # and commands look
        app = Celery("djproject", broker="memory://")
        app.config_from_object("django.conf:settings", namespace="CELERY")
        parallel_scheduler.celery.install(app)
        settings = app.parallel_scheduler.settings
        assert (settings.storage_url, settings.prefix) == (url, "djp")
        # and install()'s own overrides still win
        other = Celery("djproject2", broker="memory://")
        other.config_from_object("django.conf:settings", namespace="CELERY")
        parallel_scheduler.celery.install(other, prefix="mine")
        assert other.parallel_scheduler.settings.prefix == "mine"
        assert other.parallel_scheduler.settings.storage_url == url
        # while an app configured otherwise in the same process keeps its own settings
        plain = Celery("elsewhere", broker="memory://")
        plain.conf.parallel_scheduler_prefix = "plain"
        parallel_scheduler.celery.install(plain)
        assert plain.parallel_scheduler.settings.prefix == "plain"
        assert plain.parallel_scheduler.settings.storage_url != url


# -- system checks ----------------------------------------------------------------------------


def test_the_test_projects_settings_pass(tmp_path: Path) -> None:
    assert messages(PARALLEL_SCHEDULER={"storage_url": sqlite_url(tmp_path)}) == []


def test_e001_the_setting_is_not_a_dict() -> None:
    ((check_id, message, hint),) = messages(PARALLEL_SCHEDULER=["storage_url", "x"])
    assert check_id == "parallel_scheduler.E001"
    assert "PARALLEL_SCHEDULER setting must be a dict" in message and "not list" in message
    assert "PARALLEL_SCHEDULER = {" in hint


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"batch_sise": 5}, "unknown setting(s): batch_sise"),
        ({"batch_size": -3}, "batch_size must be an integer from 1 to 100000, not -3"),
        ({"release_mode": "fast"}, "release_mode must be one of"),
        ({"prefix": "x;drop"}, "invalid prefix"),
    ],
)
def test_e002_a_bad_setting_is_named(tmp_path: Path, given: dict[str, Any], expected: str) -> None:
    settings = {"storage_url": sqlite_url(tmp_path), **given}
    ((check_id, message, hint),) = messages(PARALLEL_SCHEDULER=settings)
    assert check_id == "parallel_scheduler.E002"
    assert message.startswith("bad scheduler setting: ") and expected in message
    assert "settings.PARALLEL_SCHEDULER" in hint and "batch_size" in hint
    assert not (tmp_path / "jobs.db").exists()  # nothing was created


def test_e002_from_the_environment_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PARALLEL_SCHEDULER_SHARDS", "many")
    ((check_id, message, _),) = messages(PARALLEL_SCHEDULER={"storage_url": sqlite_url(tmp_path)})
    assert check_id == "parallel_scheduler.E002"
    assert "environment variable PARALLEL_SCHEDULER_SHARDS='many' is not a valid integer" in message


@pytest.mark.parametrize(
    ("settings", "where"),
    [
        (
            {"PARALLEL_SCHEDULER": {"storage_url": "mongodb://app:hunter2@db/jobs"}},
            "PARALLEL_SCHEDULER['storage_url']: unknown storage URL scheme 'mongodb'",
        ),
        (
            {
                "PARALLEL_SCHEDULER": {},
                "CELERY_PARALLEL_SCHEDULER_STORAGE_URL": "postgresql://app:hunter2@db:port/x",
            },
            "CELERY_PARALLEL_SCHEDULER_STORAGE_URL: malformed storage URL",
        ),
        (
            {"PARALLEL_SCHEDULER": {"storage_url": "app:hunter2@db"}},
            "PARALLEL_SCHEDULER['storage_url']: malformed storage URL",
        ),
    ],
)
def test_e003_a_bad_storage_url_is_named_and_masked(settings: dict[str, Any], where: str) -> None:
    ((check_id, message, hint),) = messages(**settings)
    assert check_id == "parallel_scheduler.E003"
    assert message.startswith(where), message
    assert "hunter2" not in message + hint
    assert "sqlite:///" in hint


def test_e004_a_driver_that_is_not_installed_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Python's own spelling of "not installed" (tests/unit/test_extras.py)
    monkeypatch.setitem(sys.modules, "redis", None)
    found = messages(PARALLEL_SCHEDULER={"storage_url": "redis://:hunter2@127.0.0.1:1/0"})
    assert [f[0] for f in found] == ["parallel_scheduler.E004"]
    assert "pip install 'parallel-scheduler[redis]'" in found[0][1]


def test_w002_no_storage_url(monkeypatch: pytest.MonkeyPatch) -> None:
    ((check_id, message, hint),) = messages(PARALLEL_SCHEDULER={})
    assert check_id == "parallel_scheduler.W002"
    assert "sqlite:///parallel-scheduler.db" in message and "storage_url" in hint


def test_w001_an_unreachable_store_is_a_warning_and_check_passes() -> None:
    url = "postgresql+psycopg://app:hunter2@127.0.0.1:1/none"
    with override_settings(PARALLEL_SCHEDULER={"storage_url": url, "connect_timeout": 1}):
        found = [(m.id, m.msg) for m in run_checks(tags=[TAG])]
        call_command("check", tags=[TAG], stdout=_Sink(), stderr=_Sink())  # no SystemCheckError
    ((check_id, message),) = found
    assert check_id == "parallel_scheduler.W001"
    assert "could not reach the scheduler's store at" in message
    assert "hunter2" not in message and "app:***@127.0.0.1:1" in message


class _Sink:
    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> None:
        self.text += text

    def flush(self) -> None:
        pass


# -- the shard count --------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgresql":
        require_server("postgresql")
        return POSTGRESQL_URL
    return sqlite_url(tmp_path, "sharded.db")


def _set_up(url: str, prefix: str, shards: int) -> storage_adapters.Storage:
    store = storage_adapters.from_url(url, prefix=prefix, shards=shards)
    store.setup()
    return store


def test_e005_the_shard_count_differs_from_the_stores(store_url: str) -> None:
    prefix = unique_prefix()
    store = _set_up(store_url, prefix, 3)
    try:
        base = {"storage_url": store_url, "prefix": prefix}
        # Given a store set up with 3 shards: the same count passes
        assert ids(PARALLEL_SCHEDULER={**base, "shards": 3}) == []
        # When the settings say another count, Then E005, naming both counts and the fix
        for shards in (1, 4):
            ((check_id, message, hint),) = messages(PARALLEL_SCHEDULER={**base, "shards": shards})
            assert check_id == "parallel_scheduler.E005"
            assert f"shards={shards} in the scheduler's settings" in message
            assert "was set up with 3 shard(s)" in message and repr(prefix) in message
            assert hint.startswith(
                "Set PARALLEL_SCHEDULER['shards'] (or PARALLEL_SCHEDULER_SHARDS) to 3"
            )
        # And manage.py check fails with it
        with (
            override_settings(PARALLEL_SCHEDULER={**base, "shards": 1}),
            pytest.raises(SystemCheckError, match=r"parallel_scheduler\.E005"),
        ):
            call_command("check", stdout=_Sink(), stderr=_Sink())
    finally:
        store.drop()
        store.close()


def test_e005_a_one_shard_store_holding_jobs_cannot_be_split(store_url: str) -> None:
    prefix = unique_prefix()
    store = _set_up(store_url, prefix, 1)
    try:
        base = {"storage_url": store_url, "prefix": prefix}
        # An empty one-shard store may still be split: set-up will record the count
        assert ids(PARALLEL_SCHEDULER={**base, "shards": 4}) == []
        Client(store).schedule("t.x", countdown=3600)
        ((check_id, message, hint),) = messages(PARALLEL_SCHEDULER={**base, "shards": 4})
        assert check_id == "parallel_scheduler.E005"
        assert message.startswith("shards=4: ") and "to 1" in hint
        assert ids(PARALLEL_SCHEDULER={**base, "shards": 1}) == []
    finally:
        store.drop()
        store.close()


def test_the_check_creates_no_store(tmp_path: Path) -> None:
    # An SQLite file that does not exist stays absent; a PostgreSQL prefix never set up too
    assert ids(PARALLEL_SCHEDULER={"storage_url": sqlite_url(tmp_path), "shards": 4}) == []
    assert not (tmp_path / "jobs.db").exists()
    require_server("postgresql")
    prefix = unique_prefix()
    assert ids(PARALLEL_SCHEDULER={"storage_url": POSTGRESQL_URL, "prefix": prefix}) == []
    store = storage_adapters.from_url(POSTGRESQL_URL, prefix=prefix)
    try:
        assert not store.exists()  # type: ignore[attr-defined]
    finally:
        store.close()
