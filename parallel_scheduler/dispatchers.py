"""The hand-off of a due job to the worker system: the ``Dispatcher`` protocol, and what serves any
worker system. Celery's dispatchers live in ``parallel_scheduler.celery.publish``.

A dispatcher sends; it never touches storage. The scheduler marks a job Enqueued only after its
dispatcher returned, so a dispatcher that raises leaves the job Scheduled.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from parallel_scheduler.errors import DispatchError, LeaseLost, UnsendableJobError
from parallel_scheduler.jobs import decode_payload
from storage_adapters import ClaimedJob

__all__ = [
    "BatchDispatchError",
    "CallableDispatcher",
    "Dispatcher",
    "KeepGoing",
    "always",
    "built_for_send",
    "decode_for_send",
    "metrics_label",
    "publish_description",
]

T = TypeVar("T")

#: Asked before each job of a batch is sent; ``False`` stops the batch (see ``LeaseLost``).
KeepGoing = Callable[[], bool]


def decode_for_send(job: ClaimedJob) -> tuple[list[Any], dict[str, Any], dict[str, Any]]:
    """The job's ``(args, kwargs, options)`` for its message; a payload that does not decode
    (too deeply nested: ``RecursionError``; not JSON, or not of the stored shape) is this one
    job's fault, so it is raised as ``UnsendableJobError`` naming the job, never as a failure
    of the whole batch."""
    try:
        return decode_payload(job.payload)
    except (RecursionError, ValueError, TypeError, AttributeError) as exc:
        raise UnsendableJobError(
            job.id, f"its stored arguments do not decode ({type(exc).__name__}: {exc})"[:300]
        ) from exc


def built_for_send(build: Callable[[ClaimedJob], T], job: ClaimedJob) -> T:
    """``build(job)``, a fast path's message for one claimed job: when it fails because the
    payload does not decode, that is this job's own fault, raised as ``UnsendableJobError``
    naming it (the release backs it off alone), never as a failure of the whole batch."""
    try:
        return build(job)
    except (RecursionError, ValueError, TypeError, AttributeError):
        decode_for_send(job)  # raises UnsendableJobError when the payload is at fault
        raise


def always() -> bool:
    return True


def lease_lost() -> LeaseLost:
    return LeaseLost("the lock lease ran out before the rest of the batch was sent")


class BatchDispatchError(DispatchError):
    """A batch hand-off stopped part-way: the first ``sent`` jobs were sent, the rest were not,
    except, when ``cause`` is an ``UnsendableJobError`` (for the job at place ``sent``), the jobs
    after it that its ``taken_after`` names."""

    def __init__(self, sent: int, cause: BaseException) -> None:
        super().__init__(f"dispatch failed after {sent} job(s): {type(cause).__name__}: {cause}")
        self.sent = sent
        self.cause = cause

    def sent_places(self, jobs: Sequence[ClaimedJob]) -> list[int]:
        """The places in ``jobs``, the batch this error stopped, of the jobs that were sent, in
        ascending order."""
        places = list(range(min(self.sent, len(jobs))))
        if isinstance(self.cause, UnsendableJobError) and self.cause.taken_after:
            taken = self.cause.taken_after
            places += [i for i in range(self.sent + 1, len(jobs)) if jobs[i].id in taken]
        return places


@runtime_checkable
class Dispatcher(Protocol):
    """What the scheduler hands due jobs to: any object with ``dispatch`` and ``dispatch_many``.

    A dispatcher sends; it never touches storage. The scheduler marks a job Enqueued only after
    the dispatcher returned, so a dispatcher that raises leaves the job Scheduled, to be sent
    again. ``CallableDispatcher`` wraps a plain function; Celery's dispatchers
    (``CeleryDispatcher`` and the fast publishers) live in ``parallel_scheduler.celery.publish``.
    Pass one to ``DelayedJobScheduler(storage, dispatcher)``.

    Example, a dispatcher that prints each job::

        class Printer:
            def dispatch(self, job):
                print(job.id, job.task)

            def dispatch_many(self, jobs, keep_going=lambda: True):
                for job in jobs:
                    if keep_going():
                        self.dispatch(job)
    """

    def dispatch(self, job: ClaimedJob) -> None:
        """Hand one job to the worker system, or raise.

        :param job: the claimed job: its id (the task id to send it under), task name and
            serialised payload.
        :raises Exception: any error means the job was not taken; it stays Scheduled.
        """

    def dispatch_many(self, jobs: Sequence[ClaimedJob], keep_going: KeepGoing = always) -> None:
        """Hand jobs over in order; on failure raise ``BatchDispatchError`` saying how many went.

        ``keep_going()`` is asked before each send (once, before an all-or-nothing send of the
        whole batch); when it says no, stop with ``BatchDispatchError(sent, LeaseLost(...))``.
        One job that cannot be sent stops the batch as ``BatchDispatchError(its place,
        UnsendableJobError(its id, reason, taken_after=...))``: the jobs before it went, and of
        those after it, the ones ``taken_after`` names went too (the rest are sent again).
        """


def metrics_label(dispatcher: object) -> str:
    """The metrics path label of a chunk released through ``dispatcher`` in batch mode:
    ``fast_publish`` for one that hands a chunk to the broker in one round trip (its class says
    so with ``publishes_chunks = True``), else ``batch``. Asked of the dispatcher in use, not of
    the ``fast_publish`` setting, which a broker without a fast path turns into ``send_task``.
    Not a ``Dispatcher`` member: any object with the two methods stays a dispatcher."""
    return "fast_publish" if getattr(dispatcher, "publishes_chunks", False) is True else "batch"


def publish_description(dispatcher: object) -> str:
    """How ``dispatcher`` hands jobs over, as the start-up line names it: ``RedisPublisher, one
    round trip per chunk`` or ``CeleryDispatcher, one job at a time``."""
    how = (
        "one round trip per chunk"
        if metrics_label(dispatcher) == "fast_publish"
        else "one job at a time"
    )
    return f"{type(dispatcher).__name__}, {how}"


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
    """Serves any worker system: calls ``fn(task, args, kwargs, options, job_id)`` per job.

    ``fn`` gets the job's task name, its decoded positional and keyword arguments, the options
    it was scheduled with (``queue``, ``priority``, ...) and the job id; it must raise when the
    worker system did not take the job, which then stays Scheduled and is sent again later.

    :param fn: the function that sends one job.

    Example, a dispatcher that appends to a list::

        sent = []
        dispatcher = CallableDispatcher(
            lambda task, args, kwargs, options, job_id: sent.append((job_id, task, args))
        )
        DelayedJobScheduler(storage, dispatcher).run_once()
    """

    publishes_chunks = False  # one call per job (see ``metrics_label``)

    def __init__(self, fn: Callable[[str, list[Any], dict[str, Any], dict[str, Any], str], None]):
        self._fn = fn

    def dispatch(self, job: ClaimedJob) -> None:
        """Decode ``job``'s payload and call the function with it.

        :param job: the claimed job to send.
        :raises UnsendableJobError: the job's stored arguments do not decode (this job alone is
            tried again later).
        :raises Exception: whatever the function raised: the job stays Scheduled.
        """
        args, kwargs, options = decode_for_send(job)
        self._fn(job.task, args, kwargs, options, job.id)

    def dispatch_many(self, jobs: Sequence[ClaimedJob], keep_going: KeepGoing = always) -> None:
        """Send ``jobs`` in order, one call each, asking ``keep_going()`` before each.

        :param jobs: the claimed jobs, in the order to send them.
        :param keep_going: asked before each send; ``False`` stops the batch.
        :raises BatchDispatchError: a send failed or ``keep_going`` said no; its ``sent`` says
            how many jobs went before it stopped.
        """
        dispatch_each(self, jobs, keep_going)
