"""The scheduler's settings in a Django project, and the process's one ``Client`` over them.

Sources, highest first: the ``PARALLEL_SCHEDULER`` dict of Django's settings (setting names as
``Settings`` takes them: ``{"storage_url": ...}``), ``PARALLEL_SCHEDULER_*`` environment
variables, then the Celery namespace most Django projects already use
(``CELERY_PARALLEL_SCHEDULER_STORAGE_URL``, read as Celery's ``parallel_scheduler_storage_url``).
The cached client is forgotten when Django says one of those settings changed
(``override_settings`` in tests), so the next ``get_client()`` opens the store they name.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any

from parallel_scheduler.client import Client
from parallel_scheduler.errors import ConfigurationError
from parallel_scheduler.settings import CELERY_PREFIX, ENV_PREFIX, SETTING_KINDS, Settings
from storage_adapters import mask_url

__all__ = [
    "DJANGO_CELERY_PREFIX",
    "SETTINGS_NAME",
    "DjangoSources",
    "django_sources",
    "get_client",
    "is_scheduler_setting",
    "load_settings",
    "masked",
    "on_setting_changed",
    "reset",
]

#: The Django setting holding the scheduler's settings as a dict.
SETTINGS_NAME = "PARALLEL_SCHEDULER"
#: The Celery namespace's prefix in Django's settings (``namespace="CELERY"``).
DJANGO_CELERY_PREFIX = "CELERY_" + CELERY_PREFIX.upper()

_guard = threading.Lock()
_client: list[Client] = []


def _django_settings() -> Any:
    from django.conf import settings

    return settings


class DjangoSources:
    """The scheduler's settings as Django's settings give them, before precedence applies.

    :ivar overrides: the ``PARALLEL_SCHEDULER`` dict, its ``None`` values left out.
    :ivar celery_conf: the ``CELERY_PARALLEL_SCHEDULER_*`` settings, by Celery key
        (``parallel_scheduler_storage_url``).
    """

    def __init__(self, overrides: dict[str, Any], celery_conf: dict[str, Any]) -> None:
        self.overrides = overrides
        self.celery_conf = celery_conf

    def configured(self) -> set[str]:
        """The setting names Django's settings set (in the dict or the Celery namespace)."""
        names = set(self.overrides)
        names.update(kind.name for kind in SETTING_KINDS if kind.celery_key in self.celery_conf)
        return names

    def storage_urls(self) -> list[str]:
        """Every storage URL a source names, for masking them in messages."""
        candidates = [
            self.overrides.get("storage_url"),
            self.celery_conf.get(CELERY_PREFIX + "storage_url"),
            os.environ.get(ENV_PREFIX + "STORAGE_URL"),
        ]
        return [url for url in candidates if isinstance(url, str) and url]


def django_sources() -> DjangoSources:
    """Read ``PARALLEL_SCHEDULER`` and the Celery namespace from Django's settings.

    :raises ConfigurationError: ``PARALLEL_SCHEDULER`` is set but is not a dict.
    """
    settings = _django_settings()
    given = getattr(settings, SETTINGS_NAME, None)
    if given is None:
        given = {}
    if not isinstance(given, Mapping):
        raise ConfigurationError(
            f"the {SETTINGS_NAME} setting must be a dict of setting names to values, "
            f"not {type(given).__name__}"
        )
    overrides = {str(name): value for name, value in given.items() if value is not None}
    celery_conf = {
        name[len("CELERY_") :].lower(): getattr(settings, name)
        for name in dir(settings)
        if name.startswith(DJANGO_CELERY_PREFIX)
    }
    return DjangoSources(overrides, celery_conf)


def masked(message: str, sources: DjangoSources | None = None) -> str:
    """``message`` with every storage URL Django's settings or the environment name masked."""
    try:
        urls = (sources or django_sources()).storage_urls()
    except ConfigurationError:
        urls = []
    for url in urls:
        if "://" in url:
            message = message.replace(url, mask_url(url))
    return message


def load_settings() -> Settings:
    """The scheduler's settings from Django's; raises ``ConfigurationError`` naming a bad one."""
    sources = django_sources()
    try:
        return Settings.load(sources.overrides, celery_conf=sources.celery_conf)
    except ConfigurationError as exc:
        raise ConfigurationError(masked(str(exc), sources)) from None


def get_client() -> Client:
    """This process's client over the configured store, opened and set up on first use.

    Set-up (idempotent; creates or upgrades the schema and records the shard count) runs once
    per process, as the dashboard's ``create_app`` does for a client it opens: the pages and
    the ``django.tasks`` backend then work on a fresh store without a separate step. A set-up
    that fails leaves nothing cached, so the next call tries again.
    """
    with _guard:
        if not _client:
            client = Client(settings=load_settings())
            try:
                client.setup()
            except BaseException:
                client.close()
                raise
            _client.append(client)
        return _client[0]


def reset() -> None:
    """Close and forget the client (settings changed, or a test's end)."""
    with _guard:
        while _client:
            _client.pop().close()


def is_scheduler_setting(name: str) -> bool:
    """Whether the Django setting ``name`` is one the scheduler's settings are read from."""
    return name == SETTINGS_NAME or name.startswith(DJANGO_CELERY_PREFIX)


def on_setting_changed(setting: str = "", **_: Any) -> None:
    """Django's ``setting_changed`` receiver (connected in ``AppConfig.ready``): a changed
    scheduler setting closes the cached client, so the next ``get_client()`` uses the new one."""
    if is_scheduler_setting(setting):
        reset()
