"""The hand-off of a due job to the worker system: the ``Dispatcher`` protocol and implementations.

A dispatcher sends; it never touches storage. The scheduler marks a job Enqueued only after its
dispatcher returned, so a dispatcher that raises leaves the job Scheduled.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any, Protocol, runtime_checkable

from storage_adapters import ClaimedJob

from .errors import DispatchError, LeaseLost
from .jobs import decode_payload

__all__ = [
    "BatchDispatchError",
    "CallableDispatcher",
    "CeleryDispatcher",
    "Dispatcher",
    "KeepGoing",
    "always",
]

#: Asked before each job of a batch is sent; ``False`` stops the batch (see ``LeaseLost``).
KeepGoing = Callable[[], bool]


def always() -> bool:
    return True


def lease_lost() -> LeaseLost:
    return LeaseLost("the lock lease ran out before the rest of the batch was sent")


class BatchDispatchError(DispatchError):
    """A batch hand-off stopped part-way: the first ``sent`` jobs were sent, the rest were not."""

    def __init__(self, sent: int, cause: BaseException) -> None:
        super().__init__(f"dispatch failed after {sent} job(s): {type(cause).__name__}: {cause}")
        self.sent = sent
        self.cause = cause


@runtime_checkable
class Dispatcher(Protocol):
    def dispatch(self, job: ClaimedJob) -> None:
        """Hand one job to the worker system, or raise."""

    def dispatch_many(self, jobs: Sequence[ClaimedJob], keep_going: KeepGoing = always) -> None:
        """Hand jobs over in order; on failure raise ``BatchDispatchError`` saying how many went.

        ``keep_going()`` is asked before each send (once, before an all-or-nothing send of the
        whole batch); when it says no, stop with ``BatchDispatchError(sent, LeaseLost(...))``.
        """


def dispatch_each(
    dispatcher: Dispatcher, jobs: Sequence[ClaimedJob], keep_going: KeepGoing = always
) -> None:
    """``dispatch_many`` for dispatchers that have no cheaper way than one job at a time."""
    for sent, job in enumerate(jobs):
        if not keep_going():
            raise BatchDispatchError(sent, lease_lost())
        try:
            dispatcher.dispatch(job)
        except Exception as exc:
            raise BatchDispatchError(sent, exc) from exc


class CallableDispatcher:
    """Serves any worker system: calls ``fn(task, args, kwargs, options, job_id)`` per job."""

    def __init__(self, fn: Callable[[str, list[Any], dict[str, Any], dict[str, Any], str], None]):
        self._fn = fn

    def dispatch(self, job: ClaimedJob) -> None:
        args, kwargs, options = decode_payload(job.payload)
        self._fn(job.task, args, kwargs, options, job.id)

    def dispatch_many(self, jobs: Sequence[ClaimedJob], keep_going: KeepGoing = always) -> None:
        dispatch_each(self, jobs, keep_going)


def celery_options(options: dict[str, Any]) -> dict[str, Any]:
    """Our stored routing options as ``send_task`` keyword arguments."""
    out = dict(options)
    expires = out.get("expires")
    if isinstance(expires, (int, float)):
        out["expires"] = datetime.fromtimestamp(expires, tz=timezone.utc)
    return out


class CeleryDispatcher:
    """Sends through ``app.send_task`` on the app's real broker, with the job id as the task id.

    So ``AsyncResult(job_id)`` works, and a second delivery of one job carries the same task id,
    which makes duplicates detectable (and skippable) on the worker side.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    def _send(self, job: ClaimedJob, producer: Any = None) -> None:
        args, kwargs, options = decode_payload(job.payload)
        self.app.send_task(
            job.task,
            args=args,
            kwargs=kwargs,
            task_id=job.id,
            producer=producer,
            **celery_options(options),
        )

    def dispatch(self, job: ClaimedJob) -> None:
        self._send(job)

    def dispatch_many(self, jobs: Sequence[ClaimedJob], keep_going: KeepGoing = always) -> None:
        """One producer (one broker connection) for the whole chunk instead of one per job."""
        sent = 0
        try:
            with self.app.producer_or_acquire() as producer:
                for job in jobs:
                    if not keep_going():
                        raise lease_lost()
                    self._send(job, producer)
                    sent += 1
        except Exception as exc:
            raise BatchDispatchError(sent, exc) from exc
