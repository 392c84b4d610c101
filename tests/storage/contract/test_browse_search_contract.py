"""Searching in the storage contract (``JobQuery.id_prefix``, ``task_prefix``, ``error_contains``),
run against every adapter: the text filters match characters exactly, case included, with no
wildcard (``%``, ``_``, ``/``, ``\\`` and ``*`` are themselves), alone and with every other filter,
across keyset pages; a rare match is found past many other jobs; bad text is refused by name.
On SQLite an id prefix is read either from the primary key or by the due-index walk: both give
the same pages."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import pytest

import storage_adapters
from storage_adapters import InvalidArgumentError, JobQuery, JobRecord, JobState, NewJob, Storage
from storage_adapters.sql import browse as sql_browse
from storage_adapters.sql.storage import SQLStorage
from tests.conftest import unique_prefix
from tests.storage.contract.test_browse_contract import paged, stored

#: Ids, tasks and errors where a LIKE wildcard, an escape character or a case would matter.
IDS = ["a%b-1", "a_b-2", "A_b-3", "ab-4", "a/b-5", "é-6", "a\\b-7", "ax-8", "b-9", "a%-10", "a*-11"]
TASKS = ["mail.send", "mail_send", "Mail.send", "mail%x", "mailbox", "report"]
ERRORS = [None, "Timeout: 50%_done", "timeout after 5 s", "a/x refused", "Timeout", "50 percent"]


def search_set(storage: Storage) -> float:
    """``IDS`` as jobs (tasks and errors spread over them, some due at one time), every third
    claimed and unclaimed with its error, so it stays scheduled with a ``last_error``, and two
    cancelled; returns the base due time."""
    base = storage.now() - 100.5
    jobs = [
        NewJob(id=job_id, task=TASKS[n % len(TASKS)], payload="{}", due_at=base + n % 4)
        for n, job_id in enumerate(IDS)
    ]
    storage.add_jobs(jobs)
    lock = storage.acquire_lock("delayed-scheduler", "a", 30)
    assert lock is not None
    claims = {c.id: c for c in storage.claim_due(len(IDS), lock, 300)}
    assert set(claims) == set(IDS)
    for n, job_id in enumerate(IDS):
        error = ERRORS[n % len(ERRORS)]
        storage.unclaim([claims[job_id]], error)
    assert storage.cancel(IDS[3]) and storage.cancel(IDS[6])
    return base


def matches(job: JobRecord, query: JobQuery) -> bool:
    return (
        (query.state is None or job.state is query.state)
        and (query.id_prefix is None or job.id.startswith(query.id_prefix))
        and (query.task_prefix is None or job.task.startswith(query.task_prefix))
        and (
            query.error_contains is None
            or (job.last_error is not None and query.error_contains in job.last_error)
        )
        and (query.due_from is None or job.due_at >= query.due_from)
    )


def test_text_filters_match_exactly_under_every_combination(storage: Storage) -> None:
    # Given jobs whose ids, tasks and errors hold wildcards, escapes and both cases
    base = search_set(storage)
    jobs = stored(storage)
    assert sum(1 for j in jobs if j.last_error) >= 6 and {j.state for j in jobs} == {
        JobState.SCHEDULED,
        JobState.CANCELLED,
    }
    id_prefixes = [None, "a", "a%", "a_", "A", "a/", "a\\", "é", "a*", "zz"]
    task_prefixes = [None, "mail.", "mail_", "Mail", "mail%", "m"]
    errors = [None, "50%", "%_d", "Timeout", "timeout", "a/x", "_"]
    for id_prefix, task_prefix, error in itertools.product(id_prefixes, task_prefixes, errors):
        for state, due_from in ((None, None), (JobState.SCHEDULED, base + 1)):
            query = JobQuery(
                state=state,
                due_from=due_from,
                id_prefix=id_prefix,
                task_prefix=task_prefix,
                error_contains=error,
            )
            expected = sorted(
                (j for j in jobs if matches(j, query)), key=lambda j: (j.due_at, j.id)
            )
            # Then one page holds exactly the matching jobs, in (due_at, id) order
            assert storage.list_jobs_page(query, 1000) == expected, query
    # And paged two at a time (the keyset carries the filters on), each once, none missed
    for query in (
        JobQuery(id_prefix="a"),
        JobQuery(task_prefix="mail"),
        JobQuery(error_contains="imeout"),
        JobQuery(state=JobState.SCHEDULED, id_prefix="a", task_prefix="mail"),
    ):
        expected = sorted((j for j in jobs if matches(j, query)), key=lambda j: (j.due_at, j.id))
        assert len(expected) >= 2, query
        assert [j.id for j in paged_all(storage, query, 2)] == [j.id for j in expected], query


def paged_all(storage: Storage, query: JobQuery, limit: int) -> list[JobRecord]:
    """``paged`` keeps the original filters only; this one keeps the text filters too."""
    rows: list[JobRecord] = []
    while True:
        page = storage.list_jobs_page(query, limit)
        rows += page
        if len(page) < limit:
            return rows
        query = replace(query, after=(page[-1].due_at, page[-1].id))


def test_the_text_filters_and_the_exact_task_hold_together(storage: Storage) -> None:
    search_set(storage)
    jobs = stored(storage)
    query = JobQuery(task="mail_send", task_prefix="mail")
    assert [j.id for j in storage.list_jobs_page(query, 100)] == [
        j.id for j in sorted(jobs, key=lambda j: (j.due_at, j.id)) if j.task == "mail_send"
    ]
    assert storage.list_jobs_page(JobQuery(task="mail_send", task_prefix="Mail"), 100) == []
    # the plain listing (paged, the contract's own helper) is unchanged by the new fields
    assert [j.id for j in paged(storage, JobQuery(), 4)] == [j.id for j in jobs]


def test_a_rare_match_is_found_past_many_other_jobs(storage: Storage) -> None:
    # Given 5,000 jobs and, due after them, two whose id, task and error are rare
    due = storage.now() - 7000
    storage.add_jobs([NewJob(f"m{n:05d}", "common", "{}", due + n) for n in range(5000)])
    storage.add_jobs([NewJob(f"rare-{n}", "odd.task", "{}", due + 6000 + n) for n in range(2)])
    lock = storage.acquire_lock("delayed-scheduler", "a", 30)
    assert lock is not None
    claimed = [c for c in storage.claim_due(5002, lock, 300) if c.id.startswith("rare-")]
    assert len(claimed) == 2
    storage.unclaim(claimed, "SMTPServerDisconnected: gone")
    # When each rare text is asked for, Then both are on the first page, nothing after them
    for query in (
        JobQuery(id_prefix="rare-"),
        JobQuery(task_prefix="odd."),
        JobQuery(error_contains="Disconnected"),
        JobQuery(state=JobState.SCHEDULED, id_prefix="rare", error_contains="SMTP"),
    ):
        page = storage.list_jobs_page(query, 10)
        assert [j.id for j in page] == ["rare-0", "rare-1"], query
        after = replace(query, after=(page[0].due_at, page[0].id))
        assert storage.list_jobs_page(after, 1) == [page[1]], query


BAD_TEXT = [
    (JobQuery(id_prefix=""), "query.id_prefix"),
    (JobQuery(id_prefix="a b"), "query.id_prefix"),
    (JobQuery(id_prefix="x" * 201), "query.id_prefix"),
    (JobQuery(id_prefix=7), "query.id_prefix"),  # type: ignore[arg-type]
    (JobQuery(task_prefix=""), "query.task_prefix"),
    (JobQuery(task_prefix="t\n"), "query.task_prefix"),
    (JobQuery(task_prefix="t" * 256), "query.task_prefix"),
    (JobQuery(error_contains=""), "query.error_contains"),
    (JobQuery(error_contains="nul\x00"), "query.error_contains"),
    (JobQuery(error_contains="e" * 501), "query.error_contains"),
]


@pytest.mark.untouched
@pytest.mark.parametrize(("query", "named"), BAD_TEXT, ids=[n for _, n in BAD_TEXT])
def test_bad_search_text_is_refused_by_name(storage: Storage, query: JobQuery, named: str) -> None:
    with pytest.raises(InvalidArgumentError, match=named):
        storage.list_jobs_page(query, 10)


def test_sqlite_reads_an_id_prefix_by_either_plan_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A few ids under a prefix: a range of the primary key, then sorted; many: the due-index
    walk, in order (no sort). Same pages either way."""
    store = storage_adapters.from_url(f"sqlite:///{tmp_path / 'ids.db'}", prefix=unique_prefix())
    assert isinstance(store, SQLStorage)
    try:
        store.setup()
        search_set(store)
        jobs = stored(store)
        p = store._prefix
        for at_most, plan_has in ((10_000, "sqlite_autoindex"), (2, f"{p}_jobs_due_all")):
            monkeypatch.setattr(sql_browse, "ID_RANGE_AT_MOST", at_most)
            for prefix in ("a", "a%", "a_", "é", "a\\", "zz"):
                query = JobQuery(id_prefix=prefix)
                expected = [j for j in jobs if j.id.startswith(prefix)]
                assert store.list_jobs_page(query, 100) == expected, (at_most, prefix)
                assert [j.id for j in paged_all(store, query, 1)] == [j.id for j in expected]
            few = store._few_ids("a")
            statement = sql_browse.page_statement(
                store._tables.jobs, JobQuery(id_prefix="a"), "sqlite", few
            )
            params = sql_browse.page_params(JobQuery(id_prefix="a"), 50, "sqlite", few)
            compiled = statement.compile(dialect=store._engine.dialect)
            values = {**compiled.params, **params}
            positional = tuple(values[name] for name in compiled.positiontup or ())
            with store._engine.connect() as conn:
                plan = "\n".join(
                    str(row[-1])
                    for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}", positional)
                )
            assert plan_has in plan, (at_most, plan)
            if not few:
                assert "TEMP B-TREE" not in plan, plan
    finally:
        store.drop()
        store.close()


def test_prefix_successors_and_like_escapes() -> None:
    assert sql_browse.prefix_end("ab") == "ac"
    assert sql_browse.prefix_end("a\U0010ffff") == "b"
    assert sql_browse.prefix_end("\U0010ffff") is None
    assert sql_browse.prefix_end("x\ud7ff") == "x\ue000"
    assert sql_browse.like_escaped("50%_a/b") == "50/%/_a//b"
