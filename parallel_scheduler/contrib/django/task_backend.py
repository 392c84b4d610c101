"""``DurableBackend``: a ``django.tasks`` backend whose tasks wait in the scheduler's durable
storage (due now, or at ``run_after``) and are released into Celery, where one Celery task
(``parallel_scheduler.django_task``, ``task_runner``) runs the Django task.

Every enqueue goes through storage, deferred or not: the job id is the ``TaskResult`` id, and one
path (store, release, run, record the outcome) means one answer from ``get_result`` whatever
the call asked for. The cost is at most one scheduler pass (``poll_interval``) before a task due
now is sent.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from django.utils import timezone

from parallel_scheduler.contrib.django import conf
from parallel_scheduler.contrib.django.task_api import BaseTaskBackend, InvalidTask
from parallel_scheduler.contrib.django.task_results import build_result, read_result
from parallel_scheduler.errors import InvalidJobError
from parallel_scheduler.job_checks import check_call, validate_options

__all__ = ["CELERY_TASK", "DurableBackend", "celery_priority", "invocation"]

#: The Celery task every stored Django task is sent as (``task_runner`` registers it).
CELERY_TASK = "parallel_scheduler.django_task"
#: Django's priority range (``django.tasks``: higher runs sooner).
MIN_PRIORITY, MAX_PRIORITY = -100, 100
PRIORITY_ORDERS = ("higher_first", "lower_first")
_OPTION_NAMES = frozenset(
    {"celery_task", "queues", "priority_levels", "priority_order", "send_options"}
)
#: The Celery options ``send_options`` may set for every task of the backend.
SEND_OPTIONS = frozenset(
    {"routing_key", "exchange", "headers", "expires", "time_limit", "soft_time_limit"}
)
_STRICT_JSON = json.JSONEncoder(allow_nan=False)


def _improperly_configured(message: str) -> Exception:
    from django.core.exceptions import ImproperlyConfigured

    return ImproperlyConfigured(f"TASKS OPTIONS of DurableBackend: {message}")  # type: ignore[no-any-return]


def celery_priority(priority: int, levels: int = 10, order: str = "higher_first") -> int:
    """Django's priority (-100..100, higher sooner) as a Celery message priority in
    ``0..levels-1``: spread evenly, rounded down; ``lower_first`` (Redis brokers, where 0 is
    served first) turns it round."""
    step = (priority - MIN_PRIORITY) * (levels - 1) // (MAX_PRIORITY - MIN_PRIORITY)
    return step if order == "higher_first" else levels - 1 - step


def invocation(
    task: Any, alias: str, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """The Celery task's keyword arguments for one call of a Django task: its path, the call,
    and what it was enqueued with (``meta``: backend, priority, queue, ``run_after``)."""
    run_after = task.run_after
    meta = {
        "backend": alias,
        "priority": int(task.priority),
        "queue_name": task.queue_name,
        "run_after": None if run_after is None else run_after.isoformat(),
    }
    return {
        "module_path": task.module_path,
        "args": list(args),
        "kwargs": dict(kwargs),
        "meta": meta,
    }


def _text_keys(value: Any) -> bool:
    """Whether every mapping in ``value`` has text keys (JSON would turn ``1`` into ``"1"``)."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and _text_keys(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(_text_keys(v) for v in value)
    return True


def _check_json(what: str, value: Any) -> None:
    try:
        _STRICT_JSON.encode(value)
    except (TypeError, ValueError) as exc:
        raise InvalidTask(f"{what} must be JSON (no pickle): {exc}") from None
    if not _text_keys(value):
        raise InvalidTask(f"{what} must be JSON: a mapping in them has a key that is not text")


class DurableBackend(BaseTaskBackend):  # type: ignore[misc]  # the API ships no types here
    """``TASKS = {"default": {"BACKEND": "parallel_scheduler.contrib.django.tasks.DurableBackend",
    "QUEUES": [...], "OPTIONS": {...}}}``: see ``docs/django/tasks.md`` for the options."""

    supports_defer = True
    supports_async_task = False
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        options = dict(params.get("OPTIONS") or {})
        unknown = set(options) - _OPTION_NAMES
        if unknown:
            raise _improperly_configured(
                f"unknown option(s) {sorted(unknown)}; known: {sorted(_OPTION_NAMES)}"
            )
        self.celery_task = str(options.get("celery_task", CELERY_TASK))
        self.queue_map = dict(options.get("queues") or {})
        self.priority_levels = options.get("priority_levels", 10)
        if (
            isinstance(self.priority_levels, bool)
            or not isinstance(self.priority_levels, int)
            or not 1 <= self.priority_levels <= 256
        ):
            raise _improperly_configured(
                f"priority_levels must be an integer 1-256, not {self.priority_levels!r}"
            )
        self.priority_order = options.get("priority_order", "higher_first")
        if self.priority_order not in PRIORITY_ORDERS:
            raise _improperly_configured(
                f"priority_order must be one of {PRIORITY_ORDERS}, not {self.priority_order!r}"
            )
        send_options = dict(options.get("send_options") or {})
        refused = set(send_options) - SEND_OPTIONS
        if refused:
            raise _improperly_configured(
                f"send_options may not hold {sorted(refused)}; allowed: {sorted(SEND_OPTIONS)} "
                "(queue and priority come from the task, messages are always JSON)"
            )
        try:
            self.send_options = validate_options(send_options)
        except InvalidJobError as exc:
            raise _improperly_configured(f"send_options: {exc}") from None
        self._set_up: weakref.WeakSet[Any] = weakref.WeakSet()  # the clients set up
        self._guard = threading.Lock()

    # -- enqueue -------------------------------------------------------------------------------

    def celery_options(self, task: Any) -> dict[str, Any]:
        """The Celery send options of one task: its queue (mapped by the ``queues`` option;
        Django's ``"default"`` unmapped is Celery's default queue) and its priority."""
        options = dict(self.send_options)
        queue = self.queue_map.get(task.queue_name)
        if queue is None and task.queue_name != "default":
            queue = task.queue_name
        if queue is not None:
            options["queue"] = queue
        options["priority"] = celery_priority(
            int(task.priority), self.priority_levels, self.priority_order
        )
        return options

    def _client(self) -> Any:
        client = conf.get_client()
        with self._guard:
            if client not in self._set_up:
                client.setup()  # idempotent: a project's first enqueue may precede any worker
                self._set_up.add(client)
        return client

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        """Store the call as a job due at ``task.run_after`` (now when none); the job id is the
        result's id. Arguments must be JSON: anything else is refused and nothing is written."""
        self.validate_task(task)
        args, kwargs = list(args), dict(kwargs)
        try:
            check_call(args, kwargs)
        except InvalidJobError as exc:
            raise InvalidTask(f"task {task.module_path}: {exc}") from None
        _check_json(f"the arguments of task {task.module_path}", args)
        _check_json(f"the keyword arguments of task {task.module_path}", kwargs)
        client = self._client()
        try:
            scheduled = client.schedule(
                self.celery_task,
                kwargs=invocation(task, self.alias, args, kwargs),
                eta=task.run_after,
                **self.celery_options(task),
            )
        except InvalidJobError as exc:
            raise InvalidTask(f"task {task.module_path}: {exc}") from None
        return build_result(
            task, scheduled.job_id, self.alias, args, kwargs, enqueued_at=timezone.now()
        )

    # -- results -------------------------------------------------------------------------------

    def get_result(self, result_id: str) -> Any:
        """The result of one enqueued task, from its job and its recorded outcomes; raises the
        API's ``TaskResultDoesNotExist`` for an id storage does not hold."""
        return read_result(self._client(), result_id, self.alias)
