"""The plugin's heart: one ``CeleryIntegration`` per app (``install.py`` attaches it).

It holds the app's settings and this process's client, decides whether a call is stored
(``should_defer``), stores and cancels calls, and hands out the scheduler that the worker
bootstep, the beat scheduler class, the ``celery parallel-scheduler`` command and
``parallel-scheduler run --app`` all run (built in ``wiring.py``).

Settings are read from ``app.conf`` on first use, not at install time, so ``install(app)`` may
come before ``app.config_from_object(...)``. This module imports no sibling above it: ``install``,
``bootstep`` and ``beat`` import it, never the other way round.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from typing import Any

from celery.utils import uuid

from parallel_scheduler.celery.broker_extras import require_broker_transport
from parallel_scheduler.celery.call_options import carried_options, explain, reasons_not_to_defer
from parallel_scheduler.celery.call_times import CallTime, read_call_time
from parallel_scheduler.celery.django_project import django_overrides
from parallel_scheduler.celery.routing import queue_for, router_of
from parallel_scheduler.celery.signals import job_scheduled
from parallel_scheduler.celery.stored_retries import is_retry, note_stored_retry, retry_job_id
from parallel_scheduler.celery.wiring import build_service, dispatcher_for, envelopes_for
from parallel_scheduler.client import Client
from parallel_scheduler.dispatchers import Dispatcher
from parallel_scheduler.errors import InvalidJobError
from parallel_scheduler.jobs import JobSpec
from parallel_scheduler.process.service import SchedulerService
from parallel_scheduler.settings import Settings
from storage_adapters import StorageUnavailableError

__all__ = ["ATTRIBUTE", "CeleryIntegration", "get_integration"]

logger = logging.getLogger(__name__)
#: The app attribute ``install`` sets to the app's integration.
ATTRIBUTE = "parallel_scheduler"
#: Options that name a broker connection: harmless to drop when it is the app's own broker (a
#: group passes the producer it sends every member with), since the release uses that broker too.
_CONNECTION_OPTIONS = ("producer", "publisher", "connection")


class CeleryIntegration:
    """parallel-scheduler's part of one Celery app: ``install(app)`` sets it as
    ``app.parallel_scheduler``.

    It reads the settings (``Settings.load`` over ``app.conf``), opens this process's ``Client``
    on first use, decides which calls are stored, stores them, cancels them and builds the
    scheduler service (``make_service``) that the worker bootstep, ``celery -A proj
    parallel-scheduler`` and ``parallel-scheduler run --app`` run.

    :param app: the Celery app.
    :param overrides: settings that win over the environment and ``app.conf``.

    Example::

        result = send_reminder.apply_async((42,), countdown=3 * 24 * 3600)
        app.parallel_scheduler.cancel(result.id)
        job = app.parallel_scheduler.client.get(result.id)
    """

    def __init__(self, app: Any, overrides: Mapping[str, Any] | None = None) -> None:
        self.app = app
        self._overrides = dict(overrides or {})
        self._client: Client | None = None
        self._client_pid = 0
        self._guard = threading.Lock()

    @cached_property
    def settings(self) -> Settings:
        require_broker_transport(self.app)  # here, the first read of the app's configuration
        # a Django project's PARALLEL_SCHEDULER dict, below install()'s own overrides
        overrides = {**django_overrides(self.app), **self._overrides}
        return Settings.load(overrides, celery_conf=self.app.conf)

    @property
    def client(self) -> Client:
        """This process's client: prefork workers fork after install, and connections must not
        be shared across a fork. A caller waits for unreachable storage about ``connect_timeout``
        (retries included), then gets ``StorageUnavailableError``."""
        with self._guard:
            if self._client is None or self._client_pid != os.getpid():
                client = Client(
                    settings=self.settings,
                    retry_for=self.settings.connect_timeout,
                    queue_router=router_of(self.app),
                )
                try:
                    client.envelopes = envelopes_for(self.app, self.settings, client.storage)
                    client.setup()
                except BaseException:
                    client.close()
                    raise
                self._client, self._client_pid = client, os.getpid()
            return self._client

    # -- calls ------------------------------------------------------------------------------

    def call_time(self, countdown: Any, eta: Any) -> CallTime:
        """When a call is due, read as Celery reads ``countdown`` and ``eta`` (``call_times``);
        ``InvalidJobError`` for a value Celery could not use either."""
        return read_call_time(countdown, eta, self.app.timezone)

    def should_defer(self, countdown: Any, eta: Any) -> bool:
        """Whether a call is due further ahead than ``eta_threshold``: every form of ``eta`` and
        ``countdown`` Celery takes is measured (an ISO 8601 eta too), and one it cannot use is
        refused by name, nothing stored. With no threshold, nothing is intercepted or read."""
        threshold = self.settings.eta_threshold
        if threshold is None:
            return False
        delay = self.call_time(countdown, eta).delay(self.app.now())
        # A non-finite delay goes to storage too: the job model refuses it naming the value,
        # where Celery's own path would fail with a bare OverflowError/ValueError.
        return delay is not None and (not math.isfinite(delay) or delay > threshold)

    def celery_countdown(self, countdown: Any) -> Any:
        """The countdown to hand Celery's own path: a ``Decimal``, ``Fraction`` or ``timedelta``
        (which Celery cannot add to a date) as its seconds, when the plugin reads countdowns."""
        if self.settings.eta_threshold is None or not countdown or type(countdown) in (int, float):
            return countdown
        return self.call_time(countdown, None).countdown

    def schedule(
        self,
        name: str,
        args: Sequence[Any] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        *,
        countdown: Any = None,
        eta: Any = None,
        task_id: str | None = None,
        jitter: Any = None,
        unique_key: Any = None,
        on_conflict: Any = "keep",
        **options: Any,
    ) -> Any:
        """Store one call durably; returns an ``AsyncResult`` whose id is the task id (the job
        id, but for a retry, stored as ``<task id>:retry-<n>``: see ``stored_retries.py``). With
        ``unique_key``, a held key answers the holder's id (``Client.schedule``)."""
        job_id, message_id, options, reasons = self.plan(task_id, options)
        if reasons:
            raise InvalidJobError(f"cannot store a call of {name!r}: {explain(reasons)}")
        self._warn_if_unknown(name)
        countdown, eta = self._due(countdown, eta)
        carried = carried_options(options, self.app.now())
        if "queue" not in carried:  # route now, by this app's task_routes and default queue,
            carried["queue"] = queue_for(self.app, name, args, kwargs)  # whoever releases it
        spec = JobSpec(
            name,
            args=args or (),
            kwargs=kwargs or {},
            options=carried,
            id=job_id,
            eta=eta,
            countdown=countdown,
            jitter=jitter,
            unique_key=unique_key,
            on_conflict=on_conflict,
        )
        try:
            result = self.client.schedule_many([spec])[0]
        except StorageUnavailableError as exc:
            raise StorageUnavailableError(
                f"the call of {name!r} was not stored, nor sent: {exc} (gave up after "
                f"connect_timeout={self.settings.connect_timeout:g} s; set fallback_to_celery to "
                "hand such calls to Celery's own eta path while storage is down)"
            ) from exc
        if result.replaced:
            logger.info("job %s holds the unique key; the call replaced it", result.job_id)
        elif not result.created:
            logger.info("job %s already exists; the call changed nothing", result.job_id)
        if message_id is not None:  # a stored retry: its outcome links to it (celery/outcomes.py)
            note_stored_retry(message_id, result.job_id)
        job_scheduled.send(
            sender=name, job_id=result.job_id, due_at=result.due_at, created=result.created
        )
        result_cls = options.get("result_cls") or self.app.AsyncResult
        return result_cls(message_id or result.job_id)

    def _due(self, countdown: Any, eta: Any) -> tuple[Any, Any]:
        """``countdown`` and ``eta`` for ``JobSpec``, read as Celery reads them; an eta of epoch
        seconds (``task.schedule()`` takes one) and an int or float countdown stay as given, so
        that an error quotes what the caller wrote."""
        if not countdown and _is_epoch(eta):
            return None, eta
        when = self.call_time(countdown, eta)
        if when.countdown is not None and type(countdown) in (int, float):
            return countdown, None
        return when.countdown, when.eta

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
        """What this app's scheduler sends through (see ``wiring.dispatcher_for``)."""
        return dispatcher_for(self.app, self.settings)

    def make_service(self, owner: str | None = None) -> SchedulerService:
        """Both schedulers, sending through this app; fails at once on a bad storage URL."""
        return build_service(self.app, self.settings, owner)


def _is_epoch(eta: Any) -> bool:
    return type(eta) in (int, float)


def get_integration(app: Any) -> CeleryIntegration:
    """The app's integration: the installed one, or a new one that intercepts nothing."""
    existing = getattr(app, ATTRIBUTE, None)
    return existing if isinstance(existing, CeleryIntegration) else CeleryIntegration(app)
