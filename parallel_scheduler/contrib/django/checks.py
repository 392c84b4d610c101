"""System checks: ``manage.py check`` (and ``runserver``, ``migrate``...) names a bad scheduler
setting before a process starts with it, each as a ``parallel_scheduler.E0xx`` error with a hint
that says how to fix it.

``check_settings`` reads the settings only; ``check_store`` reaches the store to compare its
recorded shard count with the ``shards`` setting. A store that cannot be reached is a warning,
not an error, because ``check`` runs in CI where no storage server is. Storage URLs are masked
in every message.
"""

from __future__ import annotations

import os
from typing import Any

from django.core import checks

from parallel_scheduler.contrib.django.conf import (
    DJANGO_CELERY_PREFIX,
    SETTINGS_NAME,
    DjangoSources,
    django_sources,
    masked,
)
from parallel_scheduler.errors import ConfigurationError
from parallel_scheduler.opening_storage import open_storage, sqlite_file
from parallel_scheduler.settings import ENV_PREFIX, SETTING_KINDS, Settings
from storage_adapters import DEFAULT_URL, MissingExtraError, Storage, mask_url, shards_of
from storage_adapters.errors import StorageError, StorageUnavailableError, one_line
from storage_adapters.sharding import refuse_one_shard_jobs
from storage_adapters.urls import InvalidStorageURLError, scheme_of

__all__ = ["TAG", "check_settings", "check_store", "register"]

#: ``manage.py check --tag parallel_scheduler`` runs these checks alone.
TAG = "parallel_scheduler"
_SOURCES = (
    f"settings.{SETTINGS_NAME}, the {ENV_PREFIX}* environment variables or the "
    f"{DJANGO_CELERY_PREFIX}* settings"
)
_NAMES = ", ".join(kind.name for kind in SETTING_KINDS)


def register() -> None:
    """Register both checks with Django (``AppConfig.ready`` calls this; registering twice is
    harmless, Django keeps a set)."""
    checks.register(check_settings, TAG)
    checks.register(check_store, TAG)


def _error(number: int, message: str, hint: str) -> checks.Error:
    return checks.Error(one_line(message), hint=hint, id=f"parallel_scheduler.E{number:03d}")


def _warning(number: int, message: str, hint: str) -> checks.Warning:
    return checks.Warning(one_line(message), hint=hint, id=f"parallel_scheduler.W{number:03d}")


def _storage_url_source(sources: DjangoSources) -> tuple[Any, str]:
    """The storage URL that wins, and the setting it comes from."""
    if "storage_url" in sources.overrides:
        return sources.overrides["storage_url"], f"{SETTINGS_NAME}['storage_url']"
    env_var = ENV_PREFIX + "STORAGE_URL"
    if os.environ.get(env_var) is not None:
        return os.environ[env_var], f"the environment variable {env_var}"
    celery = sources.celery_conf.get("parallel_scheduler_storage_url")
    if celery is not None:
        return celery, f"{DJANGO_CELERY_PREFIX}STORAGE_URL"
    return None, ""


def _loaded(sources: DjangoSources) -> tuple[Settings | None, list[checks.CheckMessage]]:
    """The settings, or the one error that says why there are none."""
    url, where = _storage_url_source(sources)
    if url is not None:
        try:
            scheme_of(url)
        except InvalidStorageURLError as exc:
            shown = masked(str(exc), sources)
            if isinstance(url, str) and url and "://" not in url:  # mask_url cannot find a
                shown = shown.replace(url, "(value hidden)")  # password without a scheme
            return None, [
                _error(
                    3,
                    f"{where}: {shown}",
                    f"Set {where} to a URL the scheduler can open: sqlite:///path/to/file.db, "
                    "postgresql://user@host/db, redis://host:6379/0 or "
                    "redis+cluster://host1:6379,host2:6379",
                )
            ]
    try:
        settings = Settings.load(sources.overrides, celery_conf=sources.celery_conf)
    except ConfigurationError as exc:
        hint = (
            f"Fix it where it is set ({_SOURCES}). The settings are: {_NAMES} "
            "(docs: Reference, Settings)"
        )
        return None, [_error(2, f"bad scheduler setting: {masked(str(exc), sources)}", hint)]
    return settings, []


def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Errors for a bad ``PARALLEL_SCHEDULER`` (E001), a bad setting (E002), a bad storage URL
    (E003) or a storage driver that is not installed (E004); a warning when no storage URL is
    set (W002). Reads the settings only; nothing is created."""
    try:
        sources = django_sources()
    except ConfigurationError as exc:
        hint = f"Write {SETTINGS_NAME} = {{'storage_url': 'postgresql://...', ...}} in settings.py"
        return [_error(1, str(exc), hint)]
    settings, problems = _loaded(sources)
    if settings is None:
        return problems
    if settings.storage_url is None:
        problems.append(
            _warning(
                2,
                f"no storage URL is set: the scheduler uses {DEFAULT_URL}, a file in whatever "
                "directory each process starts in",
                f"Set {SETTINGS_NAME}['storage_url'] (or {ENV_PREFIX}STORAGE_URL) so every "
                "process, web and scheduler, uses the same store",
            )
        )
    try:
        open_storage(settings, pool_size=1).close()  # drivers load; nothing is reached
    except MissingExtraError as exc:
        problems.append(
            _error(4, str(exc), "Install the extra the message names, or use another storage URL")
        )
    except InvalidStorageURLError as exc:
        _, where = _storage_url_source(sources)
        problems.append(
            _error(3, f"{where}: {masked(str(exc), sources)}", "Correct the storage URL")
        )
    except StorageError:
        pass  # reaching the store is check_store's
    return problems


def check_store(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """An error when the store was set up with another shard count than the ``shards`` setting
    (E005) or refuses to be read (E006); a warning when it cannot be reached (W001). Reads only:
    a store that was never set up (or an SQLite file that does not exist) is not created."""
    try:
        sources = django_sources()
        settings = Settings.load(sources.overrides, celery_conf=sources.celery_conf)
    except ConfigurationError:
        return []  # check_settings says why
    url = settings.storage_url or DEFAULT_URL
    path = sqlite_file(url)
    if path is not None and not path.exists():
        return []  # set-up records the count; connecting would create the file
    try:
        storage = open_storage(settings, pool_size=1)
    except (StorageError, MissingExtraError):
        return []  # check_settings says why
    try:
        return _shard_problems(storage, settings)
    except StorageUnavailableError as exc:
        return [
            _warning(
                1,
                f"could not reach the scheduler's store at {mask_url(url)} to check its shard "
                f"count: {masked(str(exc), sources)}",
                "Start the storage server, or correct storage_url. The scheduler, its pages "
                "and the task backend need it; check passes without it so CI runs without "
                "servers",
            )
        ]
    except StorageError as exc:
        return [
            _error(
                6,
                f"the scheduler's store at {mask_url(url)} refused to be read: "
                f"{masked(str(exc), sources)}",
                "Correct storage_url (credentials, database, file permissions) or the server",
            )
        ]
    finally:
        storage.close()


def _shard_problems(storage: Storage, settings: Settings) -> list[checks.CheckMessage]:
    home = shards_of(storage)[0]
    if not hasattr(home, "stored_shard_count"):
        return []  # an adapter that cannot be sharded is one store
    if hasattr(home, "exists") and not home.exists():
        return []  # never set up: set-up records the count
    stored = home.stored_shard_count()
    prefix = settings.prefix
    where = f"{SETTINGS_NAME}['shards'] (or {ENV_PREFIX}SHARDS)"
    if stored is None and settings.shards > 1:
        try:
            refuse_one_shard_jobs(home, settings.shards, prefix)
        except StorageError as exc:  # a one-shard store holding jobs cannot be split
            if isinstance(exc, StorageUnavailableError):
                raise
            hint = f"Set {where} to 1, or use a new prefix for the {settings.shards}-shard store"
            return [_error(5, f"shards={settings.shards}: {exc}", hint)]
        return []  # empty: set-up records the count
    if (stored or 1) != settings.shards:
        return [
            _error(
                5,
                f"shards={settings.shards} in the scheduler's settings, but the store under "
                f"prefix {prefix!r} at {mask_url(settings.storage_url or DEFAULT_URL)} was set "
                f"up with {stored or 1} shard(s)",
                f"Set {where} to {stored or 1}: every scheduler and client of one store must "
                "use the same count. To change it, start a new prefix and let this one drain "
                "(docs: Running many schedulers)",
            )
        ]
    return []
