"""What every dispatcher says of a batch, and what happens to the jobs it could not send: what it
reports sent (a return: all of them; ``BatchDispatchError``: its ``sent_places``) is exactly what
reached the broker; a job that cannot be sent by its own fault is named (``UnsendableJobError``)
and does not hold back the others; a lost lease stops the batch (``parallel_scheduler/
dispatchers.py``, the ``Dispatcher`` protocol). A scheduler pass over real storage shows the
release's side of it: every other job Enqueued and on the broker once, the bad one Scheduled again
with the reason."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from devtools.broker_messages import job_ids
from parallel_scheduler import DelayedJobScheduler, JobSpec, JobState, Settings
from parallel_scheduler.dispatchers import BatchDispatchError
from parallel_scheduler.errors import LeaseLost, UnsendableJobError
from storage_adapters import ClaimedJob, JobRecord, NewJob
from tests.conftest import set_up_storage
from tests.dispatch.contract.conftest import TASK, UnderTest, claims, jobs

#: Stored payloads a dispatcher cannot make a message of: not JSON, not of the stored shape, and
#: nested past what the JSON decoder can read (``dispatchers.decode_for_send``).
UNDECODABLE = {
    "not-json": "not json {",
    "not-the-stored-shape": '{"args":5,"kwargs":{},"options":{}}',
    "too-deep": '{"args":' + "[" * 100_000 + "]" * 100_000 + ',"kwargs":{},"options":{}}',
}


def undecodable(job_id: str, payload: str) -> ClaimedJob:
    (good,) = claims([JobSpec(TASK, id=job_id)])
    return ClaimedJob(good.id, good.task, payload, good.due_at, 1, 1)


def outcome(batch: Sequence[ClaimedJob], raised: BaseException | None) -> tuple[list[str], str]:
    """The ids a dispatcher reports sent of ``batch``, and the id of the job it names as one that
    cannot be sent (``""`` for none), read as the release reads them: a bare
    ``UnsendableJobError`` stops the batch before its first job, any other error is a failure of
    the whole batch, with nothing sent."""
    if raised is None:
        return [job.id for job in batch], ""
    if isinstance(raised, BatchDispatchError):
        named = raised.cause.job_id if isinstance(raised.cause, UnsendableJobError) else ""
        return [batch[i].id for i in raised.sent_places(batch)], named
    if isinstance(raised, UnsendableJobError):
        return [], raised.job_id
    return [], ""


def around_undecodable(
    under_test: UnderTest, payload: str
) -> tuple[str, list[ClaimedJob], list[ClaimedJob], list[ClaimedJob]]:
    """A queue of the test's own and a batch for it: five good jobs (``before``), one job ``bad``
    whose stored ``UNDECODABLE[payload]`` cannot be decoded, five good jobs (``after``)."""
    queue = under_test.queues.queue()
    before, after = jobs(5, "before"), jobs(5, "after")
    return queue, before, after, [*before, undecodable("bad", UNDECODABLE[payload]), *after]


def dispatched(under_test: UnderTest, queue: str, batch: Sequence[ClaimedJob]) -> BaseException:
    """The error ``dispatch_many`` raised for ``batch`` (the test fails when it raised none)."""
    with pytest.raises(Exception) as raised:
        under_test.dispatcher(queue).dispatch_many(batch)
    return raised.value


# -- what is reported sent is what reached the broker --------------------------------------------


@pytest.mark.parametrize("payload", list(UNDECODABLE), ids=list(UNDECODABLE))
def test_what_is_reported_sent_around_an_undecodable_job_is_what_reached_the_broker(
    under_test: UnderTest, payload: str
) -> None:
    # Given a batch with one job whose stored arguments cannot be decoded, among good ones
    queue, _, _, batch = around_undecodable(under_test, payload)
    # When it is dispatched, it stops at that job (or fails as a whole)
    sent, _ = outcome(batch, dispatched(under_test, queue, batch))
    # Then exactly the jobs it reports sent are on the broker, each once, the bad one never
    assert "bad" not in sent
    assert Counter(job_ids(under_test.queues.take(queue))) == Counter(sent)


@pytest.mark.parametrize("answers", [0, 2], ids=["at-once", "after-two"])
def test_what_is_reported_sent_when_the_lease_runs_out_is_what_reached_the_broker(
    under_test: UnderTest, answers: int
) -> None:
    # Given a lease that says "keep going" ``answers`` times, then no more
    queue = under_test.queues.queue()
    batch = jobs(10, "lease")
    asked: list[bool] = []

    def keep_going() -> bool:
        asked.append(len(asked) < answers)
        return asked[-1]

    # When a batch is dispatched under it
    raised: BaseException | None = None
    try:
        under_test.dispatcher(queue).dispatch_many(batch, keep_going)
    except BatchDispatchError as exc:
        raised = exc
        assert isinstance(exc.cause, LeaseLost)
    # Then it stopped when told (asked before each send, or once before an all-or-nothing one),
    # and what it reports sent is exactly what the broker holds
    assert asked[-1] is (raised is None)
    sent, named = outcome(batch, raised)
    assert named == ""
    assert job_ids(under_test.queues.take(queue)) == sent
    if answers == 0:
        assert sent == []


def test_a_lost_lease_stops_the_batch_with_nothing_published(under_test: UnderTest) -> None:
    queue = under_test.queues.queue()
    dispatcher = under_test.dispatcher(queue)
    asked: list[int] = []

    def lease_gone() -> bool:
        asked.append(1)
        return False

    with pytest.raises(BatchDispatchError) as raised:
        dispatcher.dispatch_many(jobs(50, "lease"), lease_gone)
    assert raised.value.sent == 0
    assert isinstance(raised.value.cause, LeaseLost)
    assert asked == [1]
    assert under_test.queues.take(queue) == []
    # And the dispatcher stays usable
    dispatcher.dispatch_many(jobs(5, "after"))
    assert job_ids(under_test.queues.take(queue)) == [f"after-{i}" for i in range(5)]


# -- a job that cannot be sent does not hold back the others -------------------------------------


@pytest.mark.parametrize("payload", list(UNDECODABLE), ids=list(UNDECODABLE))
def test_an_undecodable_job_is_named_and_the_others_go_once(
    under_test: UnderTest, payload: str
) -> None:
    # Given a batch with one job whose stored arguments cannot be decoded, among good ones
    queue, before, after, batch = around_undecodable(under_test, payload)
    # When it is dispatched, then that job is named, saying why
    raised = dispatched(under_test, queue, batch)
    sent, named = outcome(batch, raised)
    assert named == "bad"
    assert "do not decode" in str(raised)
    # And the others not yet sent go with the next call (as the release sends them): every good
    # job reaches the broker once
    under_test.dispatcher(queue).dispatch_many([j for j in batch if j.id not in {*sent, "bad"}])
    assert Counter(job_ids(under_test.queues.take(queue))) == Counter(
        job.id for job in [*before, *after]
    )


def release_pass(
    under_test: UnderTest, tmp_path: Path, mode: str, bad_payload: Callable[[str], str]
) -> tuple[Counter[str], list[JobSpec], JobRecord]:
    """One scheduler pass (``mode``) on SQLite over 20 due jobs for a queue of the test's and a
    job ``bad`` due among them, its stored payload ``bad_payload(that queue)``: the ids that
    arrived in the queue, the good jobs (each asserted Enqueued), and the bad job's record
    afterwards. The pass must release every good job and back the bad one off."""
    queue = under_test.queues.queue()
    _, storage = set_up_storage(f"sqlite:///{tmp_path / 'store.db'}")
    now = storage.now()
    good = [
        JobSpec(TASK, args=[i], options={"queue": queue}, id=f"good-{i}", eta=now - 30 + i)
        for i in range(20)
    ]
    odd = NewJob("bad", TASK, bad_payload(queue), now - 20.5)  # good-9 < it < good-10
    storage.add_jobs([*(spec.encode(now) for spec in good[:10]), odd])
    storage.add_jobs([spec.encode(now) for spec in good[10:]])
    scheduler = DelayedJobScheduler(
        storage, under_test.dispatcher(queue), Settings(release_mode=mode)
    )
    try:
        stats = scheduler.run_once()
        arrived = Counter(job_ids(under_test.queues.take(queue)))
        for spec in good:
            stored = storage.get_job(str(spec.id))
            assert stored is not None and stored.state is JobState.ENQUEUED, spec.id
        assert (stats.released, stats.backed_off, stats.failed) == (len(good), 1, 0)
        record = storage.get_job("bad")
        assert record is not None
        return arrived, good, record
    finally:
        scheduler.close()
        storage.drop()
        storage.close()


@pytest.mark.parametrize("mode", ["batch", "per_job"])
def test_a_pass_sends_the_others_and_keeps_an_undecodable_job_scheduled_with_the_reason(
    under_test: UnderTest, tmp_path: Path, mode: str
) -> None:
    # Given due jobs in storage, one of them with stored arguments that cannot be decoded
    def bad_payload(queue: str) -> str:
        return UNDECODABLE["not-json"]

    # When a scheduler pass releases them through the dispatcher
    arrived, good, record = release_pass(under_test, tmp_path, mode, bad_payload)
    # Then every good job is on the broker once, and the bad one is Scheduled again, saying why
    assert arrived == Counter(str(spec.id) for spec in good)
    assert record.state is JobState.SCHEDULED and record.attempts == 1
    assert record.last_error is not None and "do not decode" in record.last_error


# -- a job for an exchange the broker does not have (RabbitMQ) ------------------------------------


def missing_exchange(under_test: UnderTest) -> str:
    """An exchange name nobody declared (the test's run id keeps it unique)."""
    return f"ps-dispatch-{under_test.queues.run}-no-such-exchange"


@pytest.mark.parametrize("place", ["middle", "last"])
def test_a_job_for_a_missing_exchange_is_unsendable_and_only_the_jobs_before_it_count_as_sent(
    on_rabbitmq: UnderTest, place: str
) -> None:
    # Given a batch with one job routed to an exchange that does not exist, after good ones
    queue, exchange = on_rabbitmq.queues.queue(), missing_exchange(on_rabbitmq)
    dispatcher = on_rabbitmq.dispatcher(queue)
    before = jobs(10, "before", queue=queue)
    after = jobs(10, "after", queue=queue) if place == "middle" else []
    (bad,) = jobs(1, "bad", queue=queue, exchange=exchange, routing_key="some-key")
    # When it is dispatched (send_task does not wait for the broker, which closes the channel
    # later; a fast path publishes the batch in one go)
    with pytest.raises(BatchDispatchError) as raised:
        dispatcher.dispatch_many([*before, bad, *after])
    # Then the jobs before it count as sent, and it is named, with the exchange: none of the
    # jobs after it (lost with the closed channel) is counted, wherever the error surfaced
    assert raised.value.sent == len(before)
    assert raised.value.sent_places([*before, bad, *after]) == list(range(len(before)))
    cause = raised.value.cause
    assert isinstance(cause, UnsendableJobError) and cause.job_id == bad.id
    assert cause.reason == f"no exchange {exchange!r} on the broker"
    # And the rest goes with the next call, and a later batch whole, on a channel opened afresh:
    # every good job is in the queue, the bad one nowhere
    dispatcher.dispatch_many(after)
    dispatcher.dispatch_many(later := jobs(5, "later", queue=queue))
    arrived = Counter(job_ids(on_rabbitmq.queues.take(queue)))
    expected = Counter(job.id for job in [*before, *after, *later])
    if on_rabbitmq.kind.may_repeat_after_a_closed_channel:
        assert set(arrived) == set(expected)  # those not acked when the channel closed went again
    else:
        assert arrived == expected


def test_one_job_for_a_missing_exchange_is_unsendable(on_rabbitmq: UnderTest) -> None:
    queue, exchange = on_rabbitmq.queues.queue(), missing_exchange(on_rabbitmq)
    dispatcher = on_rabbitmq.dispatcher(queue)
    (bad,) = jobs(1, "alone", queue=queue, exchange=exchange, routing_key="some-key")
    with pytest.raises(UnsendableJobError) as raised:
        dispatcher.dispatch(bad)
    assert raised.value.job_id == bad.id
    assert raised.value.reason == f"no exchange {exchange!r} on the broker"
    dispatcher.dispatch((good := jobs(1, "good", queue=queue))[0])
    assert job_ids(on_rabbitmq.queues.take(queue)) == [good[0].id]


@pytest.mark.parametrize("mode", ["batch", "per_job"])
def test_a_pass_keeps_a_job_for_a_missing_exchange_scheduled_with_the_reason(
    on_rabbitmq: UnderTest, tmp_path: Path, mode: str
) -> None:
    # Given due jobs in storage, one of them routed to an exchange that does not exist
    exchange = missing_exchange(on_rabbitmq)

    def bad_payload(queue: str) -> str:
        options = {"queue": queue, "exchange": exchange, "routing_key": "k"}
        return JobSpec(TASK, options=options).encode(0.0).payload

    # When a scheduler pass releases them through the dispatcher
    arrived, good, record = release_pass(on_rabbitmq, tmp_path, mode, bad_payload)
    # Then every good job is Enqueued and in the queue (once, but where the dispatcher may send
    # again what was in doubt when the channel closed) ...
    if on_rabbitmq.kind.may_repeat_after_a_closed_channel:
        assert set(arrived) == {str(spec.id) for spec in good}
    else:
        assert arrived == Counter(str(spec.id) for spec in good)
    # ... and the bad one is not marked Enqueued: it stays Scheduled, saying why
    assert record.state is JobState.SCHEDULED
    assert record.last_error is not None
    assert f"no exchange {exchange!r} on the broker" in record.last_error
