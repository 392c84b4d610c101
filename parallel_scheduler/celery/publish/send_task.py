"""Celery's own publish path: ``app.send_task`` per job, with the job id as the task id.

The path every option and every broker supports; the fast publishers fall back to it for a chunk
holding a job they cannot carry.

On RabbitMQ (py-amqp) a publish does not wait, and a broker that has no such exchange closes the
channel some time later: the error then surfaces on a later job, or in the next chunk, and the
messages published between are lost. So each chunk ends with one round trip on its channel
(``_flush``), the exchange of each message is noted, and the job that named the missing exchange
is raised as ``UnsendableJobError`` with only the jobs before it counted as sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import amqp  # type: ignore[import-untyped]
from amqp.exceptions import NotFound  # type: ignore[import-untyped]

from parallel_scheduler.celery.publish.amqp_refusals import missing_exchange, no_exchange_reason
from parallel_scheduler.dispatchers import (
    BatchDispatchError,
    KeepGoing,
    always,
    decode_for_send,
    lease_lost,
)
from parallel_scheduler.errors import UnsendableJobError
from storage_adapters import ClaimedJob

__all__ = ["RELEASE_HEADER", "RELEASE_JOB_HEADER", "CeleryDispatcher", "celery_options"]

#: The header every release path adds to a job's message: the job's due time (epoch seconds, as
#: text; ``message_template.due_header``). It tells a worker's plugin that the task came from
#: storage, so its outcome is recorded (``celery/outcomes.py``), and when it was due (the
#: due -> started lateness). A plain Celery call never carries it.
RELEASE_HEADER = "parallel_scheduler_due_at"
#: The job id, on a released message whose task id is not its job's id (a stored retry keeps
#: its task's id: ``stored_retries.py``), so the worker records the run under the job released.
RELEASE_JOB_HEADER = "parallel_scheduler_job_id"


def celery_options(options: dict[str, Any]) -> dict[str, Any]:
    """Our stored routing options as ``send_task`` keyword arguments."""
    out = dict(options)
    expires = out.get("expires")
    if isinstance(expires, (int, float)):
        out["expires"] = datetime.fromtimestamp(expires, tz=timezone.utc)
    return out


class _Noting:
    """A kombu producer that notes the exchange of each message it publishes, in order."""

    def __init__(self, producer: Any) -> None:
        self._producer = producer
        self.exchanges: list[str] = []

    def publish(self, body: Any, *args: Any, **kwargs: Any) -> Any:
        exchange = kwargs.get("exchange")
        self.exchanges.append(str(getattr(exchange, "name", exchange) or ""))
        return self._producer.publish(body, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._producer, name)


def _flush(producer: Any) -> None:
    """One round trip on a py-amqp producer's channel: a channel the broker closed for an
    earlier publish raises its error here, not on the next use of the channel."""
    channel = getattr(producer, "channel", None)
    if isinstance(channel, amqp.Channel):
        channel.exchange_declare("amq.direct", "direct", passive=True)


class CeleryDispatcher:
    """Sends through ``app.send_task`` on the app's real broker, with the job id as the task id.

    So ``AsyncResult(job_id)`` works, and a second delivery of one job carries the same task id,
    which makes duplicates detectable (and skippable) on the worker side.

    Every job goes through Celery's own publish (its signals and publish retry included), one
    job at a time: the slow path, and the one that carries anything Celery can send. The plugin
    picks it when ``fast_publish`` is off or the broker has no fast path; pass it yourself to a
    ``DelayedJobScheduler`` to release to any Celery broker.

    :param app: the Celery app whose broker and routes the jobs are sent with.

    Example::

        scheduler = DelayedJobScheduler(storage, CeleryDispatcher(app))
    """

    publishes_chunks = False  # one publish per job (see ``dispatchers.metrics_label``)

    def __init__(self, app: Any) -> None:
        self.app = app

    def _send(self, job: ClaimedJob, producer: Any = None) -> None:
        args, kwargs, options = decode_for_send(job)
        sent = celery_options(options)
        # the release's mark (see message_template.RELEASE_HEADER), after the call's own headers
        headers = {**(sent.get("headers") or {}), RELEASE_HEADER: repr(float(job.due_at))}
        if headers.get("id", job.id) != job.id:
            headers[RELEASE_JOB_HEADER] = job.id
        sent["headers"] = headers
        self.app.send_task(
            job.task, args=args, kwargs=kwargs, task_id=job.id, producer=producer, **sent
        )

    def dispatch(self, job: ClaimedJob) -> None:
        """Send one job with ``app.send_task(task, args, kwargs, task_id=<job id>, ...)``.

        :param job: the claimed job to send.
        :raises UnsendableJobError: this job cannot be sent (its arguments do not decode, or
            the broker refused its route).
        :raises Exception: the broker did not take it (it stays Scheduled).
        """
        try:
            self.dispatch_many([job])
        except BatchDispatchError as exc:
            raise exc.cause from exc

    def dispatch_many(self, jobs: Sequence[ClaimedJob], keep_going: KeepGoing = always) -> None:
        """One producer (one broker connection) for the whole chunk instead of one per job; the
        chunk (or the part before a job that cannot be sent) ends with ``_flush``, so an error
        the broker answered to one of its publishes is told here, naming that job."""
        sent = 0
        try:
            with self.app.producer_or_acquire() as producer:
                noting = _Noting(producer)
                stopped: Exception | None = None
                try:
                    for job in jobs:
                        if not keep_going():
                            stopped = lease_lost()
                            break
                        try:
                            self._send(job, noting)
                        except UnsendableJobError as exc:  # once the jobs before it are known
                            stopped = exc
                            break
                        sent += 1
                    _flush(producer)
                except NotFound as exc:
                    raise _refused(exc, jobs, noting.exchanges) from exc
                if stopped is not None:
                    raise BatchDispatchError(sent, stopped)
        except BatchDispatchError:
            raise
        except Exception as exc:
            raise BatchDispatchError(sent, exc) from exc


def _refused(
    exc: BaseException, jobs: Sequence[ClaimedJob], exchanges: list[str]
) -> BatchDispatchError:
    """A channel the broker closed as the first job published to the exchange it has not, with
    the jobs before it sent (the broker handles a channel's publishes in order, and drops those
    after the one it closed the channel for); nothing counted as sent when it names none."""
    exchange = missing_exchange(exc)
    if exchange is None or exchange not in exchanges:
        return BatchDispatchError(0, exc)
    bad = exchanges.index(exchange)
    return BatchDispatchError(bad, UnsendableJobError(jobs[bad].id, no_exchange_reason(exchange)))
