"""What the profile releases, and where to: deterministic jobs, and dispatchers that keep count.

Jobs are made from ``--seed`` alone (ids, payloads), so two runs with one seed release the same
jobs; the storage prefix and broker queue are unique per run, so runs never collide. Every
dispatcher records each id it handed over, which is how a repetition proves that no job was lost
or sent twice before its time is kept.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from typing import Any

from parallel_scheduler.celery.publish.send_task import CeleryDispatcher
from parallel_scheduler.dispatchers import BatchDispatchError, Dispatcher, KeepGoing, always
from parallel_scheduler.jobs import JobSpec
from parallel_scheduler.profiling.errors import ProfileError, scrub
from storage_adapters import ClaimedJob, NewJob, mask_url

__all__ = ["BrokerQueue", "CountingDispatcher", "RecordingDispatcher", "make_jobs"]

TASK = "parallel_scheduler.profile.noop"
QUEUE_SETTLE_SECONDS = 30.0


def make_jobs(
    seed: int, batch_size: int, parallelism: int, repetition: int, due_at: float, queue: str | None
) -> list[NewJob]:
    """``batch_size`` due jobs for one repetition of one cell; the same for the same arguments."""
    rng = random.Random(f"{seed}:{batch_size}:{parallelism}:{repetition}")
    options = {"queue": queue} if queue else {}
    jobs = []
    for index in range(batch_size):
        job_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        spec = JobSpec(
            TASK,
            args=[index, rng.randrange(1_000_000)],
            kwargs={"repetition": repetition},
            options=options,
            id=job_id,
            eta=due_at,
        )
        jobs.append(spec.encode(due_at))
    return jobs


class _Recorder:
    """The ids a dispatcher handed over, safe to update from the pool's threads."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._ids: list[str] = []

    def record(self, jobs: Sequence[ClaimedJob]) -> None:
        with self._guard:
            self._ids.extend(job.id for job in jobs)

    def take(self) -> Counter[str]:
        """How often each id was handed over since the last call; starts a new count."""
        with self._guard:
            ids, self._ids = self._ids, []
        return Counter(ids)


class CountingDispatcher(_Recorder):
    """``--broker none``: hands nothing anywhere, so the figures are scheduler + storage alone."""

    def dispatch(self, job: ClaimedJob) -> None:
        self.record([job])

    def dispatch_many(self, jobs: Sequence[ClaimedJob], keep_going: KeepGoing = always) -> None:
        self.record(jobs)


class RecordingDispatcher(_Recorder):
    """Wraps a real dispatcher; records a job only once that dispatcher has returned for it."""

    def __init__(self, inner: Dispatcher) -> None:
        super().__init__()
        self._inner = inner

    def dispatch(self, job: ClaimedJob) -> None:
        self._inner.dispatch(job)
        self.record([job])

    def dispatch_many(self, jobs: Sequence[ClaimedJob], keep_going: KeepGoing = always) -> None:
        try:
            self._inner.dispatch_many(jobs, keep_going)
        except BatchDispatchError as exc:
            self.record([jobs[i] for i in exc.sent_places(jobs)])
            raise
        self.record(jobs)


class BrokerQueue:
    """A Celery app on ``broker_url`` sending to one queue of its own, removed by ``close()``.

    After each repetition ``drain(n)`` waits until the broker holds exactly the ``n`` messages
    the scheduler sent, then purges them: the broker's side of "every job released once".
    """

    def __init__(self, broker_url: str, run_id: str) -> None:
        from parallel_scheduler.celery import app_for_broker

        self.url = broker_url
        self.name = f"parallel_scheduler_profile_{run_id}"
        self.app = app_for_broker(broker_url)
        self._declared = False

    def describe(self) -> str:
        return mask_url(self.url)

    def dispatcher(self) -> RecordingDispatcher:
        return RecordingDispatcher(CeleryDispatcher(self.app))

    def _queue(self, channel: Any) -> Any:
        from kombu import entity

        # The queue and exchange Celery creates for an unknown queue name (create_missing_queues).
        exchange = entity.Exchange(self.name, type="direct")  # type: ignore[no-untyped-call]
        queue = entity.Queue(self.name, exchange, routing_key=self.name)  # type: ignore[no-untyped-call]
        return queue(channel)

    def check(self) -> None:
        """Connect and declare the queue now, so an unreachable broker fails before the sweep."""
        try:
            with self.app.connection_for_write() as connection:
                connection.ensure_connection(max_retries=1, timeout=10)
                self._queue(connection.default_channel).declare()
                self._declared = True
        except Exception as exc:
            raise ProfileError(
                f"cannot use broker {self.describe()!r}: {scrub(exc, self.url)}"
            ) from None

    def drain(self, expected: int) -> int:
        """Wait (bounded) for ``expected`` messages in the queue, purge it; returns how many."""
        with self.app.connection_for_write() as connection:
            queue = self._queue(connection.default_channel)
            deadline = time.monotonic() + QUEUE_SETTLE_SECONDS
            while True:
                count = int(queue.queue_declare(passive=True).message_count)
                if count >= expected or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            purged = queue.purge()
        return max(count, int(purged or 0))

    def close(self) -> None:
        """Delete the queue and its exchange, and close the app's connections."""
        try:
            if self._declared:
                with self.app.connection_for_write() as connection:
                    queue = self._queue(connection.default_channel)
                    queue.declare()  # a virtual transport forgets bindings between channels
                    queue.delete()
                    queue.exchange.delete()
        finally:
            self.app.close()
