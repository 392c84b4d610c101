"""``install(app)``: plug parallel-scheduler into a Celery app.

It attaches the app's ``CeleryIntegration``, wraps ``app.send_task`` (which every
``Task.apply_async`` goes through whatever the task's base class, so no task code changes) to
store far-future calls durably, gives tasks a ``schedule()`` helper, hooks ``revoke`` so it
cancels stored calls too, and registers the worker bootstep (``--parallel-scheduler``). The app's
``beat_schedule`` is synced into storage each time a scheduler starts (``wiring.build_service``).

The top of the Celery wing: it imports ``integration`` and ``bootstep``, and nothing imports it
but the package's ``__init__``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from parallel_scheduler.celery.bootstep import register_worker_step
from parallel_scheduler.celery.call_options import explain
from parallel_scheduler.celery.integration import ATTRIBUTE, CeleryIntegration, get_integration
from parallel_scheduler.celery.outcomes import record_outcomes_of
from parallel_scheduler.celery.revoke import hook_revoke
from parallel_scheduler.celery.stored_retries import is_retry
from parallel_scheduler.job_checks import check_call
from storage_adapters import StorageUnavailableError

__all__ = ["install"]

logger = logging.getLogger(__name__)


def _wrap_send_task(app: Any, integration: CeleryIntegration) -> None:
    original: Callable[..., Any] = app.send_task

    def send_task(
        name: str, args: Any = None, kwargs: Any = None, countdown: Any = None, eta: Any = None,
        task_id: str | None = None, **options: Any,
    ) -> Any:  # fmt: skip
        jitter = options.pop("jitter", None)  # only storage can jitter: a jittered call is stored
        unique = {k: options.pop(k) for k in ("unique_key", "on_conflict") if k in options}
        if unique:  # only storage keeps a key: stored whenever due (now too), or refused
            return integration.schedule(
                name, args, kwargs, countdown=countdown, eta=eta, task_id=task_id,
                jitter=jitter, **unique, **options,
            )  # fmt: skip
        if jitter or integration.should_defer(countdown, eta):
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
                        jitter=jitter, **options,
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
        countdown = integration.celery_countdown(countdown)
        return original(
            name, args, kwargs, countdown=countdown, eta=eta, task_id=task_id, **options
        )

    app.send_task = send_task


def _task_schedule(task: Any, args: Any = None, kwargs: Any = None, **options: Any) -> Any:
    """``task.schedule(args, kwargs, countdown=…/eta=…, **options)``: always stored durably."""
    check_call(args or (), kwargs or {})  # keyword names first: Celery's check wants strings
    if task.typing:  # the same argument check apply_async makes, at call time
        task.__header__(*(args or ()), **(kwargs or {}))
    merged = {k: v for k, v in task._get_exec_options().items() if v is not None}
    merged.update(options)
    return get_integration(task._get_app()).schedule(task.name, args, kwargs, **merged)


def install(app: Any, **overrides: Any) -> CeleryIntegration:
    """Add parallel-scheduler to a Celery app; idempotent.

    ``overrides`` beat ``PARALLEL_SCHEDULER_*`` variables, which beat ``app.conf``'s
    ``parallel_scheduler_*`` settings.

    After it, ``apply_async`` (and ``send_task``, ``self.retry()``, canvas calls) due further
    ahead than ``eta_threshold`` is stored durably instead of waiting in worker memory; every
    task gets ``task.schedule(args, kwargs, countdown=... | eta=..., **options)``, which always
    stores; ``revoke`` cancels stored calls too; ``app.parallel_scheduler`` is the integration
    (``cancel``, ``client``); and workers accept ``--parallel-scheduler`` to run the scheduler
    inside them. Storage is opened on first use, not here. A call with ``unique_key=`` (and
    ``on_conflict=``) is always stored, however soon it is due, since only storage can keep the
    key; it is refused (``InvalidJobError``) rather than sent past storage, never falling back.

    :param app: the Celery app.
    :param overrides: settings by name (``storage_url="redis://..."``, ``eta_threshold=60``),
        as ``Settings`` takes them.
    :returns: the app's ``CeleryIntegration`` (also ``app.parallel_scheduler``).
    :raises ConfigurationError: on first use, not here, for a bad setting (the message names
        it).

    Example::

        app = Celery("proj", broker="redis://127.0.0.1:6379/0")
        app.conf.parallel_scheduler_storage_url = "redis://127.0.0.1:6379/0"
        app.conf.parallel_scheduler_eta_threshold = 60
        parallel_scheduler.celery.install(app)
    """
    existing = getattr(app, ATTRIBUTE, None)
    if isinstance(existing, CeleryIntegration):
        return existing
    integration = CeleryIntegration(app, overrides)
    setattr(app, ATTRIBUTE, integration)
    _wrap_send_task(app, integration)
    hook_revoke(app, integration.cancel_many)
    app.Task.schedule = _task_schedule
    register_worker_step(app)
    record_outcomes_of(app, integration)  # only workers send the signals it listens to
    return integration
