"""The plugin's heart: one ``CeleryIntegration`` per app, installed with ``install(app)``.

It routes far-future ``apply_async``/``send_task`` calls into durable storage, gives tasks a
``schedule()`` helper, and builds the scheduler that the worker bootstep, the ``celery
parallel-scheduler`` command and ``parallel-scheduler run --app`` all run.

Interception happens at ``app.send_task``, which every ``Task.apply_async`` goes through whatever
the task's base class, so no task code changes. Settings are read from ``app.conf`` on first use,
not at install time, so ``install(app)`` may come before ``app.config_from_object(...)``.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any

from celery.utils import uuid
from celery.utils.time import maybe_make_aware

import storage_adapters
from storage_adapters import ClaimedJob, ListReleasingStorage, Storage, StorageUnavailableError

from ..client import Client
from ..clock import StorageClock
from ..dispatchers import CeleryDispatcher, Dispatcher
from ..envelopes import EnvelopeMaker
from ..errors import ConfigurationError, InvalidJobError
from ..jobs import JobSpec
from ..recurring_jobs import RecurringJobs
from ..scheduler_service import SchedulerService
from ..settings import Settings
from .broker_extras import require_broker_transport
from .call_options import carried_options, explain, reasons_not_to_defer
from .retries import is_retry, retry_job_id
from .revoke import hook_revoke
from .signals import job_released, job_scheduled

__all__ = ["CeleryIntegration", "get_integration", "install"]

logger = logging.getLogger("parallel_scheduler.celery")
_ATTRIBUTE = "parallel_scheduler"
#: Options that name a broker connection: harmless to drop when it is the app's own broker (a
#: group passes the producer it sends every member with), since the release uses that broker too.
_CONNECTION_OPTIONS = ("producer", "publisher", "connection")


class CeleryIntegration:
    def __init__(self, app: Any, overrides: Mapping[str, Any] | None = None) -> None:
        self.app = app
        self._overrides = dict(overrides or {})
        self._client: Client | None = None
        self._client_pid = 0
        self._guard = threading.Lock()

    @cached_property
    def settings(self) -> Settings:
        require_broker_transport(self.app)  # here, the first read of the app's configuration
        return Settings.load(self._overrides, celery_conf=self.app.conf)

    @property
    def client(self) -> Client:
        """This process's client: prefork workers fork after install, and connections must not
        be shared across a fork. A caller waits for unreachable storage about ``connect_timeout``
        (retries included), then gets ``StorageUnavailableError``."""
        with self._guard:
            if self._client is None or self._client_pid != os.getpid():
                client = Client(settings=self.settings, retry_for=self.settings.connect_timeout)
                try:
                    client.envelopes = self._envelope_maker(client.storage)
                    client.setup()
                except BaseException:
                    client.close()
                    raise
                self._client, self._client_pid = client, os.getpid()
            return self._client

    def _envelope_maker(self, storage: Storage) -> EnvelopeMaker | None:
        """With ``fast_publish`` and Redis storage, the broker message is built as a call is
        stored, once. Not with SQL storage: there every claim and every mark rewrites the whole
        row, so a stored message makes the release slower than building it then (measured)."""
        if not self.settings.fast_publish or not isinstance(storage, ListReleasingStorage):
            return None
        dispatcher = self.dispatcher()
        return dispatcher if isinstance(dispatcher, EnvelopeMaker) else None

    # -- calls ------------------------------------------------------------------------------

    def delay_seconds(self, countdown: Any, eta: Any) -> float | None:
        """How far ahead a call is due, by Celery's clock and time zone rules."""
        if countdown is not None:
            return float(countdown)
        if isinstance(eta, datetime):
            aware = maybe_make_aware(eta, self.app.timezone)
            return float((aware - self.app.now()).total_seconds())
        return None

    def should_defer(self, countdown: Any, eta: Any) -> bool:
        threshold = self.settings.eta_threshold
        if threshold is None:
            return False
        delay = self.delay_seconds(countdown, eta)
        # A non-finite delay goes to storage too: the job model refuses it naming the value,
        # where Celery's own path would fail with a bare OverflowError/ValueError.
        return delay is not None and (not math.isfinite(delay) or delay > threshold)

    def schedule(
        self,
        name: str,
        args: Sequence[Any] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        *,
        countdown: float | timedelta | None = None,
        eta: datetime | None = None,
        task_id: str | None = None,
        **options: Any,
    ) -> Any:
        """Store one call durably; returns an ``AsyncResult`` whose id is the task id (the job
        id, but for a retry, stored as ``<task id>:retry-<n>``: see ``retries.py``)."""
        job_id, message_id, options, reasons = self.plan(task_id, options)
        if reasons:
            raise InvalidJobError(f"cannot store a call of {name!r}: {explain(reasons)}")
        self._warn_if_unknown(name)
        if isinstance(eta, datetime):
            eta = maybe_make_aware(eta, self.app.timezone)
        carried = carried_options(options, self.app.now())
        if "queue" not in carried:  # route now, by this app's task_routes and default queue,
            carried["queue"] = self._queue_for(name, args, kwargs)  # whoever releases it later
        spec = JobSpec(name, args or (), kwargs or {}, carried, job_id, eta, countdown)
        try:
            result = self.client.schedule_many([spec])[0]
        except StorageUnavailableError as exc:
            raise StorageUnavailableError(
                f"the call of {name!r} was not stored, nor sent: {exc} (gave up after "
                f"connect_timeout={self.settings.connect_timeout:g} s; set fallback_to_celery to "
                "hand such calls to Celery's own eta path while storage is down)"
            ) from exc
        if not result.created:
            logger.info("job %s already exists; the call changed nothing", result.job_id)
        job_scheduled.send(
            sender=name, job_id=result.job_id, due_at=result.due_at, created=result.created
        )
        result_cls = options.get("result_cls") or self.app.AsyncResult
        return result_cls(message_id or result.job_id)

    def plan(
        self, task_id: str | None, options: Mapping[str, Any]
    ) -> tuple[str | None, str | None, dict[str, Any], list[str]]:
        """``(job id, task id of the message, options, reasons not to store)`` for one call.

        A retry keeps its task's id and lineage in the message and gets a job id of its own;
        a connection option naming this app's own broker is dropped (the release uses it too).
        """
        options = dict(options)
        for name in _CONNECTION_OPTIONS:
            if options.get(name) is not None and self._same_broker(options[name]):
                del options[name]
        reasons = reasons_not_to_defer(options)
        if not is_retry(options.get("retries")):
            return task_id, None, options, reasons
        message_id = task_id or uuid()
        job_id = retry_job_id(message_id, options["retries"])
        if job_id is None:
            reasons.append("task_id")
        options["headers"] = {**(options.get("headers") or {}), "id": message_id}
        parent = self.app.current_worker_task  # what send_task would fill in at call time
        if parent is not None:
            request = parent.request
            options["root_id"] = options.get("root_id") or request.root_id or request.id
            options["parent_id"] = options.get("parent_id") or request.id
        return job_id, message_id, options, reasons

    def _same_broker(self, thing: Any) -> bool:
        """Whether a producer or connection option reaches this app's own broker."""
        connection = getattr(thing, "connection", thing)
        as_uri = getattr(connection, "as_uri", None)
        if as_uri is None:
            return False
        with self.app.connection_for_write() as own:
            return bool(as_uri() == own.as_uri())

    def _queue_for(self, name: str, args: Any, kwargs: Any) -> str:
        route = self.app.amqp.router.route({}, name, args or (), kwargs or {})
        queue = route.get("queue")
        return str(getattr(queue, "name", queue) or self.app.conf.task_default_queue)

    def _warn_if_unknown(self, name: str) -> None:
        """Warn when the app knows its tasks (it registered some of its own) but not this one;
        a producer-only app that registers none cannot tell, and stays quiet."""
        if not self.app.autofinalize and not self.app.finalized:
            return
        registry = self.app.tasks
        own = [task for task in registry if not task.startswith("celery.")]
        if own and name not in registry:
            logger.warning(
                "task %r is not registered in app %r; it will be sent by name when due",
                name,
                self.app.main,
            )

    def cancel(self, job_id: str) -> bool:
        """Cancel a stored call by the id its ``AsyncResult`` carries (a stored retry by its own
        job id, ``<task id>:retry-<n>``; ``revoke(task_id)`` cancels those too)."""
        return self.client.cancel(job_id)

    def cancel_many(self, job_ids: Iterable[str]) -> list[str]:
        """Cancel every listed job that is still scheduled; returns the ids it cancelled."""
        client = self.client
        return [job_id for job_id in job_ids if client.cancel(job_id)]

    # -- the scheduler ------------------------------------------------------------------------

    def dispatcher(self) -> Dispatcher:
        """``send_task`` per job, or with ``fast_publish`` the broker's one-round-trip-per-chunk
        path: ``RedisPublisher`` for a Redis broker, ``AmqpPublisher`` for RabbitMQ."""
        if not self.settings.fast_publish:
            return CeleryDispatcher(self.app)
        from .amqp_publisher import AMQP_SCHEMES, AmqpPublisher, broker_scheme, masked_broker_url

        scheme = broker_scheme(self.app)
        if scheme in AMQP_SCHEMES:
            return AmqpPublisher(self.app)
        if scheme in ("redis", "rediss", "unix"):
            from .redis_publisher import RedisPublisher

            return RedisPublisher(self.app)
        raise ConfigurationError(
            "fast_publish needs a Redis (redis://, rediss://, unix://) or RabbitMQ (amqp://, "
            f"amqps://, pyamqp://) broker, not {masked_broker_url(self.app)!r}; "
            "set fast_publish to false to publish through send_task"
        )

    def make_service(self, owner: str | None = None) -> SchedulerService:
        """Both schedulers, sending through this app; fails at once on a bad storage URL."""
        settings = self.settings
        storage = storage_adapters.from_url(
            settings.storage_url,
            prefix=settings.prefix,
            pool_size=settings.max_degree_of_parallelism,
            connect_timeout=settings.connect_timeout,
        )
        try:
            storage.setup()
            if self.app.conf.beat_schedule:
                from .beat import sync_beat_schedule

                clock = StorageClock(storage)
                sync_beat_schedule(
                    self.app, RecurringJobs(storage, clock, settings.max_payload_bytes, 30.0)
                )
        except BaseException:
            storage.close()
            raise
        return SchedulerService(
            storage,
            self.dispatcher(),
            settings,
            owner=owner,
            listeners=(_announce_release,),
            owns_storage=True,
        )


def _announce_release(job: ClaimedJob, sent_at: float) -> None:
    logger.debug("released job %s (task %s)", job.id, job.task)
    if job_released.receivers:
        job_released.send(sender=job.task, job_id=job.id, due_at=job.due_at, sent_at=sent_at)


def get_integration(app: Any) -> CeleryIntegration:
    """The app's integration: the installed one, or a new one that intercepts nothing."""
    existing = getattr(app, _ATTRIBUTE, None)
    return existing if isinstance(existing, CeleryIntegration) else CeleryIntegration(app)


def _wrap_send_task(app: Any, integration: CeleryIntegration) -> None:
    original: Callable[..., Any] = app.send_task

    def send_task(
        name: str, args: Any = None, kwargs: Any = None, countdown: Any = None, eta: Any = None,
        task_id: str | None = None, **options: Any,
    ) -> Any:  # fmt: skip
        if integration.should_defer(countdown, eta):
            reasons = integration.plan(task_id, options)[3]
            if reasons:
                logger.warning(
                    "call of %s goes to Celery's own eta path (it waits in worker memory): %s",
                    name,
                    explain(reasons),
                )
            else:
                try:
                    return integration.schedule(
                        name, args, kwargs, countdown=countdown, eta=eta, task_id=task_id,
                        **options,
                    )  # fmt: skip
                except StorageUnavailableError as exc:
                    # a retry that raised would be rejected by Celery and lost: never that
                    retry = is_retry(options.get("retries"))
                    if not (retry or integration.settings.fallback_to_celery):
                        raise
                    logger.warning(
                        "storage unreachable; call of %s goes to Celery's own eta path (%s): %s",
                        name,
                        "a retry is never dropped" if retry else "fallback_to_celery",
                        exc.__cause__ or exc,
                    )
        return original(
            name, args, kwargs, countdown=countdown, eta=eta, task_id=task_id, **options
        )

    app.send_task = send_task


def _task_schedule(task: Any, args: Any = None, kwargs: Any = None, **options: Any) -> Any:
    """``task.schedule(args, kwargs, countdown=…/eta=…, **options)``: always stored durably."""
    if task.typing:  # the same argument check apply_async makes, at call time
        task.__header__(*(args or ()), **(kwargs or {}))
    merged = {k: v for k, v in task._get_exec_options().items() if v is not None}
    merged.update(options)
    return get_integration(task._get_app()).schedule(task.name, args, kwargs, **merged)


def install(app: Any, **overrides: Any) -> CeleryIntegration:
    """Add parallel-scheduler to a Celery app; idempotent.

    ``overrides`` beat ``PARALLEL_SCHEDULER_*`` variables, which beat ``app.conf``'s
    ``parallel_scheduler_*`` settings.
    """
    existing = getattr(app, _ATTRIBUTE, None)
    if isinstance(existing, CeleryIntegration):
        return existing
    integration = CeleryIntegration(app, overrides)
    setattr(app, _ATTRIBUTE, integration)
    _wrap_send_task(app, integration)
    hook_revoke(app, integration.cancel_many)
    app.Task.schedule = _task_schedule
    from .bootstep import register_worker_step

    register_worker_step(app)
    return integration
