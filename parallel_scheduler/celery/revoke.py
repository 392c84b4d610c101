"""``revoke`` cancels stored calls too: ``app.control.revoke(id)`` and ``AsyncResult(id).revoke()``
(which calls the former) first cancel the stored job with that id and the task's stored retries,
then tell the workers as Celery always does.

Without this a revoked call would still be released when due, and only a live worker's in-memory
revoke list would drop it: after a worker restart it would run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from celery.utils.imports import symbol_by_name

from parallel_scheduler.celery.stored_retries import retry_job_ids

__all__ = ["hook_revoke", "revoked_job_ids"]


def revoked_job_ids(task_ids: Any) -> list[str]:
    """The stored ids a revoke of ``task_ids`` (one id or a list, as Celery takes) cancels."""
    ids = [task_ids] if isinstance(task_ids, str) else list(task_ids or ())
    return [job_id for task_id in ids for job_id in (str(task_id), *retry_job_ids(str(task_id)))]


def _revoke(cancel: Callable[[Iterable[str]], Any], forward: Callable[..., Any]) -> Any:
    def revoke(task_id: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            cancel(revoked_job_ids(task_id))
        except BaseException:
            forward(task_id, *args, **kwargs)  # the workers still hear of it, then the caller
            raise
        return forward(task_id, *args, **kwargs)

    revoke.__doc__ = "Cancel the stored job(s), then revoke as Celery does."
    return revoke


def hook_revoke(app: Any, cancel: Callable[[Iterable[str]], Any]) -> None:
    """Make ``app.control.revoke`` cancel stored jobs first, whenever ``app.control`` is made.

    ``app.control`` is built on first use from ``app.control_cls``, which may only be read after
    the app is configured, so the hook subclasses that class rather than building it now.
    """
    existing = app.__dict__.get("control")
    if existing is not None:  # already built: hook this instance
        existing.revoke = _revoke(cancel, existing.revoke)
        return
    base = symbol_by_name(app.control_cls)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        base.__init__(self, *args, **kwargs)
        self.revoke = _revoke(cancel, partial(base.revoke, self))

    hooked = type(f"ParallelScheduler{base.__name__}", (base,), {"__init__": __init__})
    app.control_cls = hooked
