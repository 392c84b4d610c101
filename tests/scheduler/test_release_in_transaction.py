"""The batch release on PostgreSQL: each chunk claimed, sent and settled in one transaction.

The scheduler's view of it, against the real server: the path is taken, a send over its time
budget gives the chunk's tail back instead of losing the whole transaction, a failing broker
leaves the unsent jobs Scheduled with the error, and a transaction lost after its send is
reported (its jobs may run twice) and never loses a job.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg
import pytest

from parallel_scheduler import (
    CallableDispatcher,
    Client,
    DelayedJobScheduler,
    JobSpec,
    JobState,
    Settings,
)
from storage_adapters import Storage
from storage_adapters.sql.postgresql import PostgreSQLStorage
from tests.conftest import POSTGRESQL_URL
from tests.recording_dispatcher import Recorder

pytestmark = pytest.mark.postgresql
LIBPQ_URL = POSTGRESQL_URL.replace("postgresql+psycopg://", "postgresql://")


@pytest.fixture
def pg(postgresql_storage: Storage) -> PostgreSQLStorage:
    assert isinstance(postgresql_storage, PostgreSQLStorage)
    return postgresql_storage


def due(storage: PostgreSQLStorage, count: int) -> list[str]:
    specs = [JobSpec("tasks.t", args=[i], id=f"j{i:04d}") for i in range(count)]
    return [r.job_id for r in Client(storage).schedule_many(specs)]


@contextmanager
def batch_release(
    storage: PostgreSQLStorage, hook: Callable[[str], object], parallelism: int = 1
) -> Iterator[tuple[DelayedJobScheduler, Recorder]]:
    """A scheduler releasing in batches (``parallelism`` chunks at once) through a recorder that
    calls ``hook`` with each job id as it is sent; closed afterwards."""
    sends = Recorder(hook=hook)
    settings = Settings(release_mode="batch", max_degree_of_parallelism=parallelism)
    s = DelayedJobScheduler(storage, CallableDispatcher(sends), settings)
    try:
        yield s, sends
    finally:
        s.close()


def states(storage: PostgreSQLStorage) -> dict[JobState, int]:
    return {s: n for s, n in storage.count_by_state().items() if n}


def test_a_chunk_is_sent_before_anyone_sees_it_claimed_and_enqueued_by_one_commit(
    pg: PostgreSQLStorage,
) -> None:
    ids = due(pg, 120)
    seen: list[JobState] = []

    def look(job_id: str) -> None:  # another session's view, during the send
        record = pg.get_job(job_id)
        assert record is not None
        seen.append(record.state)

    with batch_release(pg, look, parallelism=4) as (s, sends):
        stats = s.run_once()
    # Then nobody saw a Claimed row (the claim is not committed until the chunk is settled)
    assert set(seen) == {JobState.SCHEDULED} and len(seen) == 120
    assert (stats.fetched, stats.released) == (120, 120)
    assert sends.counts == Counter(dict.fromkeys(ids, 1))
    assert states(pg) == {JobState.ENQUEUED: 120}


def test_a_send_over_its_time_budget_gives_the_tail_back_and_the_next_pass_sends_it(
    pg: PostgreSQLStorage,
) -> None:
    ids = due(pg, 6)
    pg.send_budget = 0.25  # this storage's budget, shortened for the test
    with batch_release(pg, lambda job_id: time.sleep(0.1)) as (s, sends):
        first = s.run_once()
        # Then the chunk sent what fitted in its budget, and gave the rest back, saying why
        assert 1 <= first.released < 6 and first.released + first.not_claimed <= 6
        waiting = [i for i in ids if i not in sends.counts]
        record = pg.get_job(waiting[0])
        assert record is not None and record.state is JobState.SCHEDULED
        assert record.last_error is not None and "transaction ran out" in record.last_error
        # And later passes send the rest, each job exactly once
        for _ in range(10):
            if len(sends.counts) == 6:
                break
            s.run_once()
    assert sends.counts == Counter(dict.fromkeys(ids, 1))
    assert states(pg) == {JobState.ENQUEUED: 6}


def test_a_failing_broker_leaves_the_unsent_jobs_scheduled_with_the_error(
    pg: PostgreSQLStorage,
) -> None:
    ids = due(pg, 10)

    def broker(job_id: str) -> None:
        if job_id >= "j0003":
            raise ConnectionError("broker unreachable")

    with batch_release(pg, broker) as (s, sends):
        stats = s.run_once()
    assert (stats.released, stats.failed) == (3, 7)
    assert sorted(sends.counts) == ids[:3]
    record = pg.get_job("j0005")
    assert record is not None and record.state is JobState.SCHEDULED
    assert record.last_error is not None and "broker unreachable" in record.last_error
    assert states(pg) == {JobState.ENQUEUED: 3, JobState.SCHEDULED: 7}


def test_a_transaction_lost_after_its_send_is_reported_and_its_jobs_are_sent_again(
    pg: PostgreSQLStorage, caplog: pytest.LogCaptureFixture
) -> None:
    """The session ends between the send and the COMMIT (as when the server ends a stalled
    one): the chunk is Scheduled again, the pass says its jobs may run twice, and the next
    pass sends them; none is lost."""
    ids = due(pg, 5)
    ended: list[bool] = []

    def end_own_session(job_id: str) -> None:
        if ended:
            return
        with psycopg.connect(LIBPQ_URL, autocommit=True) as admin:
            rows = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE state = 'idle in transaction' AND query LIKE %s",
                (f"%{pg._tables.jobs.name}%",),
            ).fetchall()
        ended.append(rows == [(True,)])

    with batch_release(pg, end_own_session) as (s, sends):
        with caplog.at_level(logging.WARNING, logger="parallel_scheduler.delayed.sending"):
            first = s.run_once()
        assert ended == [True]
        assert first.fenced == 5 and first.released == 0
        assert "may run twice" in caplog.text and "j0000" in caplog.text
        assert states(pg) == {JobState.SCHEDULED: 5}
        second = s.run_once()
    assert second.released == 5
    assert sends.counts == Counter(dict.fromkeys(ids, 2))  # sent twice, never lost
    assert states(pg) == {JobState.ENQUEUED: 5}
