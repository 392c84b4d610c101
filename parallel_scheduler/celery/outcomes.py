"""Execution outcomes: what a worker with the plugin installed did with each job released from
storage, recorded through Celery's worker signals and written by ``OutcomeWriter``.

A released job's message carries the release's header (``publish/send_task.RELEASE_HEADER``:
its due time), which a plain Celery call never has, and its task id is the job id (a stored
retry, whose message keeps its task's id, names its job in ``RELEASE_JOB_HEADER``). So only jobs
that came from storage are recorded, by job id:

- ``task_received`` (the worker's main process): received, with the worker's host name;
- ``task_prerun`` (where the task runs): started, and the due -> started lateness per queue;
- ``task_success``, ``task_failure`` (exception type and shortened message), ``task_retry``
  (the reason, and the stored retry's job id when the plugin stored it) with the runtime;
- ``task_revoked``: revoked; ``task_postrun`` forgets the run's start.

One event per state change, queued without waiting; storage being down drops events, counted
in a warning, and never slows or fails a task. ``record_outcomes`` (on by default) turns it off.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from celery import signals

from parallel_scheduler.celery.integration import CeleryIntegration
from parallel_scheduler.celery.outcome_metrics import outcome, started_late
from parallel_scheduler.celery.outcome_writer import OutcomeWriter
from parallel_scheduler.celery.publish.send_task import RELEASE_HEADER, RELEASE_JOB_HEADER
from parallel_scheduler.celery.stored_retries import stored_retry_of
from parallel_scheduler.opening_storage import open_storage
from storage_adapters import OutcomeEvent, OutcomeState, validate_job_id
from storage_adapters.checks.outcomes import MAX_ERROR_LENGTH

__all__ = ["OutcomeRecorder", "record_outcomes_of", "short_error"]

logger = logging.getLogger(__name__)
#: The longest error text recorded: the exception type and the start of its message.
ERROR_TEXT = 300
assert ERROR_TEXT <= MAX_ERROR_LENGTH


def short_error(exc: object) -> str:
    """``Type: message``, on one line, cut to ``ERROR_TEXT`` characters."""
    text = " ".join(str(exc).split())
    named = f"{type(exc).__name__}: {text}" if isinstance(exc, BaseException) else text
    return named if len(named) <= ERROR_TEXT else named[: ERROR_TEXT - 1] + "…"


def _header(request: Any, name: str) -> Any:
    """A header of a task's request (a ``Context`` or a worker ``Request``), or ``None``."""
    raw = getattr(request, name, None)
    if raw is None:
        headers = getattr(request, "request_dict", None) or {}
        raw = headers.get(name) if isinstance(headers, dict) else None
    return raw


def _due_at(request: Any) -> float | None:
    """The release header of a task's request, or ``None``: not a job released from storage."""
    raw = _header(request, RELEASE_HEADER)
    try:
        return None if raw is None else float(raw)
    except (TypeError, ValueError):
        return None


class OutcomeRecorder:
    """One app's recording: the signal handlers, and one writer per process (made on first use,
    again after a fork)."""

    def __init__(self, integration: CeleryIntegration) -> None:
        self._integration = integration
        self._enabled: bool | None = None
        self._writer: OutcomeWriter | None = None
        self._writer_pid = 0
        self._guard = threading.Lock()
        self._started: dict[str, float] = {}

    @property
    def enabled(self) -> bool:
        if self._enabled is None:
            try:
                self._enabled = self._integration.settings.record_outcomes
            except ValueError:  # a bad setting: the plugin says so elsewhere
                self._enabled = False
        return self._enabled

    def writer(self) -> OutcomeWriter:
        with self._guard:
            if self._writer is None or self._writer_pid != os.getpid():
                settings = self._integration.settings
                self._writer = OutcomeWriter(lambda: open_storage(settings, pool_size=2))
                self._writer_pid = os.getpid()
            return self._writer

    def close(self) -> None:
        with self._guard:
            writer, self._writer = self._writer, None
            mine = self._writer_pid == os.getpid()
        if writer is not None and mine:
            writer.close()

    def _record(self, request: Any, task: str, state: OutcomeState, **fields: Any) -> None:
        # a stored retry's message keeps its task's id: the job released is named apart
        job_id = _header(request, RELEASE_JOB_HEADER) or getattr(request, "id", None)
        try:
            validate_job_id(job_id)  # type: ignore[arg-type]
        except ValueError:
            return
        worker = getattr(request, "hostname", None)
        event = OutcomeEvent(
            job_id,  # type: ignore[arg-type]
            task,
            state,
            time.time(),
            worker if isinstance(worker, str) else None,
            **fields,
        )
        self.writer().put(event)
        if state.is_final:
            outcome(task, state.value)

    # -- the signal handlers: each returns at once, and never raises into Celery -------------

    def on_received(self, sender: Any = None, request: Any = None, **_: Any) -> None:
        if self.enabled and _due_at(request) is not None:
            name = getattr(request, "name", None) or getattr(request, "task_name", "?")
            self._guard_call(self._record, request, str(name), OutcomeState.RECEIVED)

    def on_prerun(self, sender: Any = None, task_id: str | None = None, **_: Any) -> None:
        if not self.enabled or task_id is None:
            return
        request = getattr(sender, "request", None)
        due = _due_at(request)
        if due is None:
            return
        now = time.time()
        self._started[task_id] = time.perf_counter()
        delivery = getattr(request, "delivery_info", None) or {}
        started_late(str(delivery.get("routing_key") or ""), now - due)
        self._guard_call(self._record, request, sender.name, OutcomeState.STARTED)

    def _final(self, task: Any, request: Any, state: OutcomeState, **fields: Any) -> None:
        if not self.enabled or _due_at(request) is None:
            return
        began = self._started.get(getattr(request, "id", None) or "")
        runtime = None if began is None else time.perf_counter() - began
        name = getattr(task, "name", None) or getattr(request, "task", None) or "?"
        self._guard_call(self._record, request, str(name), state, runtime=runtime, **fields)

    def on_success(self, sender: Any = None, **_: Any) -> None:
        self._final(sender, getattr(sender, "request", None), OutcomeState.SUCCEEDED)

    def on_failure(self, sender: Any = None, exception: Any = None, **_: Any) -> None:
        request = getattr(sender, "request", None)
        self._final(sender, request, OutcomeState.FAILED, error=short_error(exception))

    def on_retry(
        self, sender: Any = None, request: Any = None, reason: Any = None, **_: Any
    ) -> None:
        task_id = getattr(request, "id", None)
        retry_id = stored_retry_of(task_id) if isinstance(task_id, str) else None
        fields = {"error": short_error(reason), "retry_id": retry_id}
        self._final(sender, request, OutcomeState.RETRIED, **fields)

    def on_revoked(self, sender: Any = None, request: Any = None, **_: Any) -> None:
        self._final(sender, request, OutcomeState.REVOKED)

    def on_postrun(self, sender: Any = None, task_id: str | None = None, **_: Any) -> None:
        if task_id is not None:
            self._started.pop(task_id, None)

    def on_shutdown(self, **_: Any) -> None:
        self._guard_call(self.close)

    @staticmethod
    def _guard_call(call: Any, *args: Any, **kwargs: Any) -> None:
        try:
            call(*args, **kwargs)
        except Exception:  # recording must never fail a task
            logger.debug("recording an execution outcome failed", exc_info=True)


def record_outcomes_of(app: Any, integration: CeleryIntegration) -> OutcomeRecorder:
    """Connect ``app``'s recorder to Celery's worker signals (once per app)."""
    recorder = OutcomeRecorder(integration)
    uid = f"parallel-scheduler-outcomes-{id(app)}"
    for signal, handler in (
        (signals.task_received, recorder.on_received),
        (signals.task_prerun, recorder.on_prerun),
        (signals.task_success, recorder.on_success),
        (signals.task_failure, recorder.on_failure),
        (signals.task_retry, recorder.on_retry),
        (signals.task_revoked, recorder.on_revoked),
        (signals.task_postrun, recorder.on_postrun),
        (signals.worker_process_shutdown, recorder.on_shutdown),
        (signals.worker_shutdown, recorder.on_shutdown),
    ):
        signal.connect(handler, weak=False, dispatch_uid=uid)
    return recorder
