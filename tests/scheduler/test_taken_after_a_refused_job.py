"""A dispatcher whose broker refused one job of a chunk yet took jobs after it says so
(``UnsendableJobError.taken_after``): the release marks those Enqueued and never sends them
again, sends again only the ones it did not name, and backs off the refused job alone.

The dispatcher here is a small broker of the test's own that keeps every job id it took, the way
RabbitMQ keeps the messages after one it nacks or sends back; the fast path's own cases run
against a real RabbitMQ in tests/celery_integration/test_amqp_publisher.py.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest

from parallel_scheduler import DelayedJobScheduler, JobState, Settings
from parallel_scheduler.dispatchers import BatchDispatchError, KeepGoing, always, lease_lost
from parallel_scheduler.errors import UnsendableJobError
from storage_adapters import ClaimedJob, NewJob, Storage

BEFORE = 12
AFTER = 13
BAD = "m-bad"
REASON = "the broker refused the message (nack)"


def due_jobs(now: float) -> list[NewJob]:
    """Good jobs due before the bad one and after it, so it sits in the middle of the chunk."""
    payload = '{"args":[],"kwargs":{},"options":{}}'
    before = [NewJob(f"a-{i:02d}", "tasks.t", payload, now - 100 + i) for i in range(BEFORE)]
    after = [NewJob(f"c-{i:02d}", "tasks.t", payload, now - 50 + i) for i in range(AFTER)]
    return [*before, NewJob(BAD, "tasks.t", payload, now - 60), *after]


class TakingPastARefusal:
    """A broker that refuses ``BAD`` and takes the other jobs of the chunk, the ones after it
    too; it names as ``taken_after`` all of those (``every=1``) or only every ``every``-th one
    (the others are in doubt to the release, so it does not keep them: they must come again)."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.taken: list[str] = []
        self.calls: list[list[str]] = []

    def dispatch(self, job: ClaimedJob) -> None:
        self.dispatch_many([job])

    def dispatch_many(self, jobs: Sequence[ClaimedJob], keep_going: KeepGoing = always) -> None:
        self.calls.append([job.id for job in jobs])
        ids = [job.id for job in jobs]
        for sent, job_id in enumerate(ids):
            if not keep_going():
                raise BatchDispatchError(sent, lease_lost())
            if job_id == BAD:
                named = ids[sent + 1 :: self.every]
                self.taken += named
                raise BatchDispatchError(sent, UnsendableJobError(BAD, REASON, taken_after=named))
            self.taken.append(job_id)


@pytest.mark.parametrize("every", [1, 2], ids=["all-after-taken", "some-after-in-doubt"])
@pytest.mark.parametrize("attempts", [5, 1], ids=["backs-off", "set-aside"])
def test_jobs_taken_after_a_refused_one_are_enqueued_and_not_sent_again(
    storage: Storage, every: int, attempts: int
) -> None:
    # Given a chunk of due jobs with one the broker refuses in its middle
    storage.add_jobs(due_jobs(storage.now()))
    broker = TakingPastARefusal(every)
    settings = Settings(release_mode="batch", max_send_attempts=attempts)
    scheduler = DelayedJobScheduler(storage, broker, settings)
    # When a pass releases it, and the broker names the jobs after the bad one it took
    try:
        stats = scheduler.run_once()
    finally:
        scheduler.close()
    # Then the chunk went as one call, the bad job in its middle
    first = broker.calls[0]
    assert len(first) == BEFORE + 1 + AFTER and first.index(BAD) == BEFORE
    # And every other job reached the broker exactly once: only the ones not named went again
    good = [job_id for job_id in first if job_id != BAD]
    assert Counter(broker.taken) == Counter(good)
    named = first[BEFORE + 1 :: every]
    assert broker.calls[1:] == (
        [[i for i in first[BEFORE + 1 :] if i not in named]] if every > 1 else []
    )
    # And all of them are Enqueued, counted released, the pass not failed
    for job_id in good:
        stored = storage.get_job(job_id)
        assert stored is not None and stored.state is JobState.ENQUEUED, job_id
    assert stats.released == len(good) and stats.failed == 0 and stats.stopped == 0
    # And the bad one alone backs off (or, at its last attempt, is set aside), saying why
    bad = storage.get_job(BAD)
    assert bad is not None and bad.last_error is not None and REASON in bad.last_error
    if attempts == 1:
        assert bad.state is JobState.FAILED and stats.set_aside == 1
    else:
        assert bad.state is JobState.SCHEDULED and stats.backed_off == 1
