"""Browsing in the storage contract (``BrowseStore``), run against every adapter: keyset pages
under every combination of filters yield exactly the matching jobs in ``(due_at, id)`` order, with
no duplicate and no gap across pages (ties on ``due_at`` included), and finish counts per bucket
count the jobs that reached a state in each bucket."""

from __future__ import annotations

import itertools
import math

import pytest

from devtools.waiting import wait_until
from storage_adapters import (
    InvalidArgumentError,
    JobQuery,
    JobRecord,
    JobState,
    NewJob,
    PauseKind,
    Storage,
    list_jobs,
)

TASKS = ("t.a", "t.b", "t.c")


def every_state(storage: Storage, count: int) -> float:
    """``count`` jobs spread over every state and three tasks, with ``due_at`` values shared by
    several jobs (ties) whose ids sort otherwise than they were added; returns their base due
    time. Ids like j9 and j10 order the same bytewise and under any collation."""
    base = storage.now() - 500.25
    ids = [f"j{n}" for n in range(count)]
    storage.add_jobs(
        [
            NewJob(
                id=job_id,
                task=TASKS[n % 3],
                payload="{}",
                due_at=base + (n * 7) % 5,
                queue="q.paused" if n % 15 == 2 else None,
            )
            for n, job_id in enumerate(ids)
        ]
    )
    lock = storage.acquire_lock("delayed-scheduler", "a", 30)
    assert lock is not None
    claims = {c.id: c for c in storage.claim_due(count, lock, 300)}
    assert len(claims) == count
    picked = {n: claims[job_id] for n, job_id in enumerate(ids)}
    assert len(storage.mark_enqueued([c for n, c in picked.items() if n % 5 == 0])) > 0
    assert len(storage.expire([c for n, c in picked.items() if n % 5 == 1], "late")) > 0
    assert len(storage.unclaim([c for n, c in picked.items() if n % 5 in (2, 3)])) > 0
    for n in range(count):
        if n % 5 == 3:
            assert storage.cancel(ids[n])
    # n % 5 == 4 stays claimed, but every third of those is set aside as failed
    assert len(storage.fail([c for n, c in picked.items() if n % 15 == 4], "unsendable")) > 0
    # and every third job given back is held, its queue paused
    assert storage.pause(PauseKind.QUEUE, "q.paused", "", "") > 0
    return base


def stored(storage: Storage) -> list[JobRecord]:
    """Every job, read through the offset listing (not the method under test)."""
    jobs = list_jobs(storage, None, 1000)
    assert len(jobs) < 1000
    return jobs


def matches(job: JobRecord, query: JobQuery) -> bool:
    return (
        (query.state is None or job.state is query.state)
        and (query.task is None or job.task == query.task)
        and (query.due_from is None or job.due_at >= query.due_from)
        and (query.due_to is None or job.due_at <= query.due_to)
    )


def paged(storage: Storage, query: JobQuery, limit: int) -> list[JobRecord]:
    """Every page of ``query`` in turn, each starting after the last row of the one before."""
    rows: list[JobRecord] = []
    while True:
        page = storage.list_jobs_page(query, limit)
        assert len(page) <= limit
        rows += page
        if len(page) < limit:
            return rows
        last = page[-1]
        query = JobQuery(
            query.state, query.task, query.due_from, query.due_to, (last.due_at, last.id)
        )


def test_pages_under_every_filter_yield_exactly_the_matching_jobs_in_order(
    storage: Storage,
) -> None:
    # Given 60 jobs in every state and task, many sharing a due time
    base = every_state(storage, 60)
    jobs = stored(storage)
    assert {job.state for job in jobs} == set(JobState)
    assert len({job.due_at for job in jobs}) == 5
    # When each combination of filters is paged through, three jobs at a time
    for state, task, due_from, due_to in itertools.product(
        [None, *JobState], [None, "t.b"], [None, base + 1], [None, base + 3]
    ):
        query = JobQuery(state=state, task=task, due_from=due_from, due_to=due_to)
        expected = sorted((j for j in jobs if matches(j, query)), key=lambda j: (j.due_at, j.id))
        # Then the pages hold exactly the matching jobs, in (due_at, id) order, each once
        assert [j.id for j in paged(storage, query, 3)] == [j.id for j in expected], query
        # And one big page is the same, with the records as stored
        assert storage.list_jobs_page(query, 1000) == expected, query


def test_a_page_starts_strictly_after_a_tie_whose_job_is_gone(storage: Storage) -> None:
    # Given five jobs due at one time
    due = storage.now() + 100
    storage.add_jobs([NewJob(f"k{n}", "t", "{}", due) for n in (1, 3, 5, 7, 9)])

    # When a page starts after an id between two of them (the last row of a page that has
    # since been deleted), or after the last one, or before the first
    def ids(after: tuple[float, str]) -> list[str]:
        return [j.id for j in storage.list_jobs_page(JobQuery(after=after), 10)]

    # Then it starts at the next id of the tie, then at the next due time
    assert ids((due, "k4")) == ["k5", "k7", "k9"]
    assert ids((due, "k5")) == ["k7", "k9"]
    assert ids((due, "k9")) == []
    assert ids((due, "k")) == ["k1", "k3", "k5", "k7", "k9"]
    assert ids((due - 0.001, "z")) == ["k1", "k3", "k5", "k7", "k9"]
    assert ids((due + 0.001, "a")) == []


def test_a_rare_task_is_found_past_many_other_jobs(storage: Storage) -> None:
    # Given 5,000 jobs of one task and, after them, two of another
    due = storage.now() + 100
    storage.add_jobs([NewJob(f"m{n:05d}", "common", "{}", due + n) for n in range(5000)])
    storage.add_jobs([NewJob(f"r{n}", "rare", "{}", due + 6000 + n) for n in range(2)])
    # When the rare task is asked for, Then both are on the first page, and nothing after them
    page = storage.list_jobs_page(JobQuery(task="rare"), 10)
    assert [j.id for j in page] == ["r0", "r1"]
    assert storage.list_jobs_page(JobQuery(task="rare", after=(page[0].due_at, "r0")), 1) == [
        page[1]
    ]


@pytest.mark.untouched
@pytest.mark.parametrize("limit", [0, -1, 1001, True, 2.0, "5"])
def test_a_limit_outside_1_to_1000_is_refused(storage: Storage, limit: object) -> None:
    with pytest.raises(InvalidArgumentError, match="limit"):
        storage.list_jobs_page(JobQuery(), limit)  # type: ignore[arg-type]


@pytest.mark.untouched
@pytest.mark.parametrize(
    ("query", "named"),
    [
        (JobQuery(state="finished"), "query.state"),  # type: ignore[arg-type]
        (JobQuery(task=""), "query.task"),
        (JobQuery(task="t" * 256), "query.task"),
        (JobQuery(task=5), "query.task"),  # type: ignore[arg-type]
        (JobQuery(due_from=math.nan), "query.due_from"),
        (JobQuery(due_to="soon"), "query.due_to"),  # type: ignore[arg-type]
        (JobQuery(due_from=10.0, due_to=5.0), "query.due_from"),
        (JobQuery(after=(1.0,)), "query.after"),  # type: ignore[arg-type]
        (JobQuery(after=["1", "x"]), "query.after"),  # type: ignore[arg-type]
        (JobQuery(after=(math.inf, "x")), "query.after"),
        (JobQuery(after=(1.0, "a b")), "query.after"),
        (JobQuery(after=(1.0, "")), "query.after"),
    ],
)
def test_a_bad_query_is_refused_by_name(storage: Storage, query: JobQuery, named: str) -> None:
    with pytest.raises(InvalidArgumentError, match=named.replace(".", r"\.")):
        storage.list_jobs_page(query, 10)


def test_a_state_given_by_its_value_is_accepted(storage: Storage) -> None:
    due = storage.now() + 100
    storage.add_jobs([NewJob("s1", "t", "{}", due)])
    page = storage.list_jobs_page(JobQuery(state="scheduled"), 10)  # type: ignore[arg-type]
    assert [j.id for j in page] == ["s1"]
    assert storage.list_jobs_page(JobQuery(state=JobState.ENQUEUED), 10) == []


# -- finish counts ----------------------------------------------------------------------------


def cancel_now(storage: Storage, ids: list[str]) -> list[float]:
    """Cancel ``ids`` (stored far ahead); their finish times on the storage clock."""
    storage.add_jobs([NewJob(i, "t", "{}", storage.now() + 3600) for i in ids])
    times = []
    for job_id in ids:
        assert storage.cancel(job_id)
        job = storage.get_job(job_id)
        assert job is not None
        times.append(job.updated_at)
    return times


def test_finish_counts_count_each_bucket_from_since(storage: Storage) -> None:
    # Given one job cancelled before a moment and three after it
    early = cancel_now(storage, ["early"])
    mark = storage.now()
    wait_until(lambda: storage.now() > mark, timeout=5)
    since = storage.now()
    times = cancel_now(storage, ["c1", "c2", "c3"])
    assert min(times) >= since
    # When they are counted in one wide bucket, Then the three after the moment are counted
    assert storage.finished_counts(JobState.CANCELLED, since, 3600) == [(since, 3)]
    # And in buckets of 2 s from 5 s before, every bucket up to now is there, zeros included,
    # each counting the jobs that finished in it
    start = since - 5.0
    counts = storage.finished_counts(JobState.CANCELLED, start, 2.0)
    assert len(counts) >= 3
    assert [at for at, _ in counts] == [start + 2.0 * k for k in range(len(counts))]
    expected = [0] * len(counts)
    for finished in early + times:
        if finished >= start:
            expected[math.floor((finished - start) / 2.0)] += 1
    assert [n for _, n in counts] == expected
    assert counts[0] == (start, 0) and sum(expected) >= 3
    # And no job reached another finished state
    assert storage.finished_counts(JobState.ENQUEUED, start, 2.0) == [(at, 0) for at, _ in counts]


def test_finish_counts_count_released_jobs(storage: Storage) -> None:
    # Given jobs in every state
    since = storage.now() - 1.0
    every_state(storage, 20)
    # When the jobs that reached each finished state are counted
    jobs = stored(storage)
    for state in (JobState.ENQUEUED, JobState.EXPIRED, JobState.CANCELLED):
        counts = storage.finished_counts(state, since, 3600)
        # Then each is the number of jobs in that state
        assert counts == [(since, sum(1 for j in jobs if j.state is state))], state


def test_finish_counts_since_the_future_are_empty(storage: Storage) -> None:
    assert storage.finished_counts(JobState.ENQUEUED, storage.now() + 60, 10) == []


@pytest.mark.untouched
@pytest.mark.parametrize(
    ("state", "since", "bucket", "named"),
    [
        (JobState.SCHEDULED, 0.0, 10.0, "finished state"),
        (JobState.CLAIMED, 0.0, 10.0, "finished state"),
        ("done", 0.0, 10.0, "state"),
        (JobState.ENQUEUED, math.nan, 10.0, "since"),
        (JobState.ENQUEUED, 1e9, 0.0, "bucket"),
        (JobState.ENQUEUED, 1e9, -1.0, "bucket"),
        (JobState.ENQUEUED, 1e9, "10", "bucket"),
        (JobState.ENQUEUED, 0.0, 1.0, "buckets"),
    ],
)
def test_bad_finish_count_arguments_are_refused_by_name(
    storage: Storage, state: object, since: object, bucket: object, named: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=named):
        storage.finished_counts(state, since, bucket)  # type: ignore[arg-type]
