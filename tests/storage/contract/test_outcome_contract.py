"""Execution outcomes in the storage contract (``OutcomeStore``), run against every adapter kind:
a batch is stored once however often it is sent, a job's timeline reads in the order things
happened, pages of final outcomes walk newest first without gaps or repeats, the counts follow
every write, and retention deletes a job's outcomes with the job."""

from __future__ import annotations

import pytest

from devtools.waiting import wait_until
from storage_adapters import (
    InvalidArgumentError,
    InvalidIdentifierError,
    InvalidRecordError,
    JobState,
    NewJob,
    OutcomeEvent,
    OutcomeQuery,
    OutcomeState,
    Storage,
)
from storage_adapters.checks.outcomes import FINAL_OUTCOMES

S = OutcomeState


def run(job_id: str, start: float, final: OutcomeState, task: str = "t") -> list[OutcomeEvent]:
    """One run's events on worker ``w1``: received, started, then ``final`` after 0.5 s."""
    return [
        OutcomeEvent(job_id, task, S.RECEIVED, start, "w1"),
        OutcomeEvent(job_id, task, S.STARTED, start + 0.1, "w1"),
        OutcomeEvent(
            job_id,
            task,
            final,
            start + 0.6,
            "w1",
            runtime=0.5,
            error="RuntimeError: boom" if final is S.FAILED else None,
        ),
    ]


def test_a_batch_is_stored_once_however_often_it_is_sent(storage: Storage) -> None:
    # Given one run's events
    events = run("job-1", 1000.0, S.SUCCEEDED)
    # When the batch is written twice (a retried write)
    assert storage.record_outcomes(events) == 3
    assert storage.record_outcomes(events) == 0
    # Then the timeline holds each event once, in the order they happened, fields intact
    assert storage.outcome_history("job-1") == events
    assert storage.outcome_counts() == {"t": {**dict.fromkeys(FINAL_OUTCOMES, 0), S.SUCCEEDED: 1}}


def test_a_timeline_reads_in_time_order_and_ties_in_the_order_states_happen(
    storage: Storage,
) -> None:
    # Given events written out of order, two of them at the same instant
    events = [
        OutcomeEvent("job-1", "t", S.SUCCEEDED, 10.0, "w1", runtime=0.0),
        OutcomeEvent("job-1", "t", S.STARTED, 10.0, "w1"),
        OutcomeEvent("job-1", "t", S.RECEIVED, 9.0, "w1"),
    ]
    storage.record_outcomes(events)
    # Then they read received, started, succeeded
    assert [e.state for e in storage.outcome_history("job-1")] == [
        S.RECEIVED,
        S.STARTED,
        S.SUCCEEDED,
    ]
    assert storage.outcome_history("nobody") == []


def test_a_retry_links_the_stored_retry_and_runs_again_under_the_same_id(
    storage: Storage,
) -> None:
    # Given a run that retried into a stored retry, then a second run that succeeded
    retried = OutcomeEvent(
        "job-1", "t", S.RETRIED, 5.0, "w1", runtime=0.2, error="Retry: in 60s", retry_id="x:r-1"
    )
    storage.record_outcomes([*run("job-1", 4.0, S.STARTED)[:2], retried])
    storage.record_outcomes(run("job-1", 70.0, S.SUCCEEDED))
    # Then the timeline holds both runs, and the latest outcome is the success
    history = storage.outcome_history("job-1")
    ran = [S.RECEIVED, S.STARTED]
    assert [e.state for e in history] == [*ran, S.RETRIED, *ran, S.SUCCEEDED]
    assert history[2] == retried
    assert storage.latest_outcomes(["job-1"])["job-1"].state is S.SUCCEEDED


def test_latest_outcomes_answers_for_the_ids_that_have_one(storage: Storage) -> None:
    # Given jobs spread over every shard, each at another point of its run
    storage.record_outcomes(run("a", 1.0, S.SUCCEEDED) + run("b", 2.0, S.FAILED))
    storage.record_outcomes(run("c", 3.0, S.REVOKED)[:1])
    # When their latest outcomes are asked, with one unknown id and a repeat
    latest = storage.latest_outcomes(["c", "zz", "a", "b", "a"])
    # Then each known job gets its last event, in the order asked
    assert list(latest) == ["c", "a", "b"]
    assert [latest[i].state for i in latest] == [S.RECEIVED, S.SUCCEEDED, S.FAILED]
    assert latest["b"].error == "RuntimeError: boom"
    assert storage.latest_outcomes([]) == {}


def test_pages_of_final_outcomes_walk_newest_first_without_gaps(storage: Storage) -> None:
    # Given 25 runs, some at the same instant, ending in every final outcome
    finals = list(FINAL_OUTCOMES)
    events: list[OutcomeEvent] = []
    for n in range(25):
        events += run(f"job-{n:02d}", 100.0 + n // 3, finals[n % 4], task=f"t{n % 2}")
    storage.record_outcomes(events)
    expected = sorted(
        (e for e in events if e.state.is_final), key=lambda e: (e.at, e.job_id), reverse=True
    )
    # When every page of 4 is read, each after the last row of the one before
    walked: list[OutcomeEvent] = []
    query = OutcomeQuery()
    while True:
        page = storage.outcomes_page(query, 4)
        walked += page
        if len(page) < 4:
            break
        query = OutcomeQuery(before=(page[-1].at, page[-1].job_id))
    # Then every final outcome came once, newest first, and no received or started one
    assert walked == expected
    # And one state, or one task, pages the same way
    failed = storage.outcomes_page(OutcomeQuery(state=S.FAILED), 100)
    assert failed == [e for e in expected if e.state is S.FAILED]
    odd = storage.outcomes_page(OutcomeQuery(task="t1"), 3)
    assert odd == [e for e in expected if e.task == "t1"][:3]
    after = storage.outcomes_page(OutcomeQuery(task="t1", before=(odd[-1].at, odd[-1].job_id)), 100)
    assert odd + after == [e for e in expected if e.task == "t1"]


def test_counts_are_per_task_and_final_state(storage: Storage) -> None:
    storage.record_outcomes(run("a", 1.0, S.SUCCEEDED) + run("b", 2.0, S.FAILED, task="u"))
    storage.record_outcomes(run("c", 3.0, S.SUCCEEDED) + run("d", 4.0, S.STARTED)[:2])
    zero = dict.fromkeys(FINAL_OUTCOMES, 0)
    assert storage.outcome_counts() == {
        "t": {**zero, S.SUCCEEDED: 2},
        "u": {**zero, S.FAILED: 1},
    }


def test_retention_purges_a_jobs_outcomes_with_the_job(storage: Storage) -> None:
    # Given two released-looking jobs (cancelled here, a finished state) with outcomes, and
    # outcomes of a job that stays scheduled
    now = storage.now()
    jobs = [NewJob(i, "t", "{}", now + 3600) for i in ("gone-1", "gone-2", "kept")]
    storage.add_jobs(jobs)
    assert storage.cancel("gone-1") and storage.cancel("gone-2")
    storage.record_outcomes(run("gone-1", 1.0, S.SUCCEEDED) + run("gone-2", 2.0, S.FAILED))
    storage.record_outcomes(run("kept", 3.0, S.SUCCEEDED))
    mark = storage.now()
    wait_until(lambda: storage.now() > mark, timeout=5)
    # When the finished jobs are purged
    assert storage.purge_finished([JobState.CANCELLED], storage.now(), 10) == 2
    # Then their outcomes left the timelines, the pages and the counts; the other job's stayed
    assert storage.outcome_history("gone-1") == storage.outcome_history("gone-2") == []
    assert [e.job_id for e in storage.outcomes_page(OutcomeQuery(), 100)] == ["kept"]
    assert storage.outcomes_page(OutcomeQuery(state=S.FAILED), 100) == []
    assert storage.outcome_counts() == {"t": {**dict.fromkeys(FINAL_OUTCOMES, 0), S.SUCCEEDED: 1}}
    assert len(storage.outcome_history("kept")) == 3


@pytest.mark.untouched
@pytest.mark.parametrize(
    ("events", "problem"),
    [
        ([OutcomeEvent("a", "t", "running", 1.0)], "unknown outcome"),  # type: ignore[arg-type]
        ([OutcomeEvent("a b", "t", S.STARTED, 1.0)], "whitespace"),
        ([OutcomeEvent("a", "", S.STARTED, 1.0)], "task"),
        ([OutcomeEvent("a", "t", S.STARTED, float("nan"))], "at"),
        ([OutcomeEvent("a", "t", S.FAILED, 1.0, runtime=-1.0)], "runtime"),
        ([OutcomeEvent("a", "t", S.FAILED, 1.0, error="x" * 501)], "error"),
        ([OutcomeEvent("a", "t", S.STARTED, 1.0)] * 1001, "limit"),
    ],
)
def test_a_batch_with_a_bad_event_is_refused_whole(
    storage: Storage, events: list[OutcomeEvent], problem: str
) -> None:
    good = OutcomeEvent("fine", "t", S.SUCCEEDED, 1.0)
    with pytest.raises(
        (InvalidRecordError, InvalidArgumentError, InvalidIdentifierError), match=problem
    ):
        storage.record_outcomes([good, *events])
    assert storage.outcome_history("fine") == []
    assert storage.outcome_counts() == {}


@pytest.mark.untouched
@pytest.mark.parametrize(
    ("query", "limit", "problem"),
    [
        (OutcomeQuery(state=S.STARTED), 10, "final outcome"),
        (OutcomeQuery(state="gone"), 10, "unknown outcome"),  # type: ignore[arg-type]
        (OutcomeQuery(before=(1.0,)), 10, "before"),  # type: ignore[arg-type]
        (OutcomeQuery(task=""), 10, "task"),
        (OutcomeQuery(), 0, "limit"),
        (OutcomeQuery(), 1001, "limit"),
    ],
)
def test_bad_page_arguments_are_refused(
    storage: Storage, query: OutcomeQuery, limit: int, problem: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=problem):
        storage.outcomes_page(query, limit)
