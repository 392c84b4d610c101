"""Effectively-once execution on the worker side: ``IdempotentTask`` runs each task id once.

The scheduler never loses a job, and pays for that with rare duplicates: a scheduler that dies
(or stalls past its lease) between handing jobs to the broker and marking them Enqueued leaves
them to be sent again, at most the jobs in flight at that moment. Celery's Redis broker adds its
own: a task that runs longer than ``visibility_timeout`` is delivered a second time. Every
delivery of one job carries the job id as its task id, so a worker can recognise a repeat::

    from parallel_scheduler.celery import IdempotentTask

    @app.task(base=IdempotentTask)
    def send_invoice(invoice_id): ...

The bookkeeping is one Redis key per task id, ``<prefix>:<task id>``:

* a delivery runs only if it reserves the id first (``SET key running:<token> NX EX
  running_ttl``); when the task returns, the key becomes ``done`` for ``ttl`` seconds;
* a delivery that finds the key (``done``, or ``running`` elsewhere right now) is skipped: the
  task body does not run, ``on_duplicate`` is called, and Celery's ``Ignore`` ends the delivery,
  so the message is acknowledged and the first run's result and state are left as they were;
* if the task raises, or calls ``self.retry()``, the reservation is dropped (only if it is still
  this delivery's), so a retry or a re-delivery of a failed task does run;
* a call without a task id (``task(...)`` called directly) just runs.

If the worker process dies in the middle of a task, the reservation stays until ``running_ttl``
runs out: a re-delivery before then is skipped, one after it runs. Tasks using ``acks_late`` to
survive worker crashes should set ``running_ttl`` a little above their longest run. If Redis
cannot be reached, the task runs anyway and a warning is logged (``fail_open``; set it to False
to raise instead and let Celery's retry settings decide): a duplicate is the lesser harm than a
job that never runs.

Settings, highest precedence first: class attributes of a subclass (``idempotency_url``,
``idempotency_prefix``, ``idempotency_ttl``, ``idempotency_running_ttl``,
``idempotency_fail_open``), ``PARALLEL_SCHEDULER_IDEMPOTENCY_<NAME>`` environment variables, the
app's ``parallel_scheduler_idempotency_<name>`` configuration, then the defaults. The Redis URL
defaults to the app's ``parallel_scheduler_storage_url`` when that is a Redis URL; with any
other storage, set ``parallel_scheduler_idempotency_url``.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from typing import Any

import redis
from celery import Task
from celery.exceptions import Ignore

from parallel_scheduler.errors import ConfigurationError
from parallel_scheduler.settings import Settings
from storage_adapters import mask_url

__all__ = ["IdempotentTask"]

logger = logging.getLogger(__name__)

DEFAULT_PREFIX = "ps:idempotent"
DEFAULT_TTL = 24 * 3600.0
DEFAULT_RUNNING_TTL = 3600.0
_ENV = "PARALLEL_SCHEDULER_IDEMPOTENCY_"
_CONF = "parallel_scheduler_idempotency_"
_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
_DONE = "done"
_RUNNING = "running:"
_TOKEN = "parallel_scheduler_idempotency_token"  # this delivery's reservation, on the request
# Drop a reservation only if it is still ours: a run that outlived running_ttl may have lost it.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""

_clients: dict[tuple[int, str], redis.Redis] = {}
_clients_guard = threading.Lock()


def _client(url: str) -> redis.Redis:
    """One client per process and URL: prefork children must not share a parent's sockets."""
    key = (os.getpid(), url)
    with _clients_guard:
        client = _clients.get(key)
        if client is None:
            client = redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=10)
            _clients[key] = client
        return client


def _seconds(name: str, value: Any) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ConfigurationError(f"idempotency {name} must be seconds, not {value!r}") from None
    if not seconds > 0:
        raise ConfigurationError(f"idempotency {name} must be more than 0 seconds, not {value!r}")
    return seconds


def _boolean(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    lowered = str(value).strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ConfigurationError(f"idempotency {name} must be true or false, not {value!r}")


class IdempotentTask(Task):  # type: ignore[misc]
    """A Celery task base class that runs each task id at most once while its record lives.

    Every delivery of a stored job carries the job id as its task id, so a scheduler's duplicate
    (or the Redis broker's re-delivery after ``visibility_timeout``) finds the first delivery's
    record in Redis and is skipped: its body does not run, ``on_duplicate`` is called and the
    message is acknowledged. Needs the ``redis`` extra; the settings are in the module
    docstring (``parallel_scheduler_idempotency_url``, ``_prefix``, ``_ttl``, ``_running_ttl``,
    ``_fail_open``).

    :raises ConfigurationError: at the first delivery, when no Redis URL is configured (a SQL
        storage and no ``parallel_scheduler_idempotency_url``) or a setting is malformed.

    Example::

        @app.task(base=IdempotentTask)
        def send_invoice(invoice_id): ...
    """

    #: Class-level overrides; ``None`` means: environment, then app configuration, then default.
    idempotency_url: str | None = None
    idempotency_prefix: str | None = None
    idempotency_ttl: float | None = None
    idempotency_running_ttl: float | None = None
    idempotency_fail_open: bool | None = None

    # -- configuration ----------------------------------------------------------------------

    def _idempotency_setting(self, name: str) -> Any:
        value = getattr(self, f"idempotency_{name}", None)
        if value is None:
            value = os.environ.get(_ENV + name.upper())
        if value is None:
            value = self._get_app().conf.get(_CONF + name)
        return value

    def idempotency_redis_url(self) -> str:
        """The Redis that keeps the records: the setting, else a Redis storage URL."""
        url = self._idempotency_setting("url")
        if url is None:
            storage_url = Settings.load(celery_conf=self._get_app().conf).storage_url
            if storage_url is not None and storage_url.startswith(_REDIS_SCHEMES):
                url = storage_url
            else:
                shown = "the default SQLite file" if storage_url is None else mask_url(storage_url)
                raise ConfigurationError(
                    f"IdempotentTask {self.name!r} keeps its records in Redis, and the storage "
                    f"({shown}) is not Redis: set parallel_scheduler_idempotency_url "
                    f"(or {_ENV}URL) to a redis:// URL"
                )
        url = str(url)
        if not url.startswith(_REDIS_SCHEMES):
            raise ConfigurationError(
                f"parallel_scheduler_idempotency_url must be a redis://, rediss:// or unix:// "
                f"URL, not {mask_url(url)!r}"
            )
        return url

    def idempotency_key(self, task_id: str) -> str:
        """The Redis key that records ``task_id``'s delivery: ``<prefix>:<task id>``."""
        prefix = self._idempotency_setting("prefix") or DEFAULT_PREFIX
        return f"{prefix}:{task_id}"

    def _running_ttl(self) -> float:
        value = self._idempotency_setting("running_ttl")
        return DEFAULT_RUNNING_TTL if value is None else _seconds("running_ttl", value)

    def _ttl(self) -> float:
        value = self._idempotency_setting("ttl")
        return DEFAULT_TTL if value is None else _seconds("ttl", value)

    def _fail_open(self) -> bool:
        value = self._idempotency_setting("fail_open")
        return True if value is None else _boolean("fail_open", value)

    # -- the hooks a subclass may change ----------------------------------------------------

    def on_duplicate(self, task_id: str, state: str) -> None:
        """Called for a skipped delivery; ``state`` is ``done`` or ``running``."""
        logger.info("task %s[%s] skipped: this task id has %s", self.name, task_id,
                    "already run" if state == _DONE else "a delivery running now")  # fmt: skip

    # -- execution --------------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        task_id = self.request.id
        if not task_id:
            return super().__call__(*args, **kwargs)
        key = self.idempotency_key(str(task_id))
        token = f"{_RUNNING}{uuid.uuid4().hex}"
        try:
            records = _client(self.idempotency_redis_url())
            reserved = records.set(key, token, nx=True, ex=max(1, round(self._running_ttl())))
            existing = None if reserved else records.get(key)
            # Our own token: the client retried a SET whose reply was lost; it did reserve.
            reserved = reserved or existing in (token, token.encode())
        except redis.RedisError as exc:
            if not self._fail_open():
                raise
            logger.warning(
                "task %s[%s] runs without its once-only check: Redis failed: %s",
                self.name, task_id, exc,
            )  # fmt: skip
            return super().__call__(*args, **kwargs)
        if not reserved:
            state = _DONE if existing in (_DONE, _DONE.encode()) else "running"
            self.on_duplicate(str(task_id), state)
            raise Ignore()
        setattr(self.request, _TOKEN, token)
        try:
            result = super().__call__(*args, **kwargs)
        except BaseException:
            self._release(key)
            raise
        self._mark_done(records, key)
        return result

    def retry(self, *args: Any, **kwargs: Any) -> Any:
        """Drop the reservation before the retry's message is sent, so the retry runs."""
        task_id = self.request.id
        if task_id:
            self._release(self.idempotency_key(str(task_id)))
        return super().retry(*args, **kwargs)

    def _release(self, key: str) -> None:
        token = getattr(self.request, _TOKEN, None)
        if token is None:
            return
        setattr(self.request, _TOKEN, None)
        try:
            _client(self.idempotency_redis_url()).eval(_RELEASE, 1, key, token)
        except redis.RedisError as exc:  # the reservation runs out by itself after running_ttl
            logger.warning("dropping the reservation %s failed: %s", key, exc)

    def _mark_done(self, records: redis.Redis, key: str) -> None:
        try:
            records.set(key, _DONE, ex=max(1, round(self._ttl())))
        except redis.RedisError as exc:  # the reservation still blocks repeats for running_ttl
            logger.warning("recording %s as done failed: %s", key, exc)
