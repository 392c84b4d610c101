"""Rate limits as only the SQL adapters can show them: the schema step that brings them to an
older database, the table dropped with the others, a hand-written row of another kind, the
statements that bind only parameters, and PostgreSQL's one-transaction release deferring jobs
and carrying their queue inside its chunk's transaction."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from storage_adapters import ChunkSettlement, ClaimedJob, JobState, NewJob, PauseKind, Storage
from storage_adapters.sql.postgresql import PostgreSQLStorage
from storage_adapters.sql.storage import SQLStorage
from storage_adapters.sql.tables import MIGRATIONS, build_tables
from tests.storage.due_jobs import take_lock
from tests.storage.sql_helpers import add_as_released, released_before

MakeStorage = Callable[..., Storage]
QUEUE, TASK = PauseKind.QUEUE, PauseKind.TASK
RATE_LIMITS_STEP = next(m.version for m in MIGRATIONS if "rate limits" in m.description)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)])
def adapter_kind(request: pytest.FixtureRequest) -> str:
    """Overrides the shared fixture: these tests concern the SQL adapters only."""
    return str(request.param)


postgresql_only = pytest.mark.parametrize(
    "adapter_kind", [pytest.param("postgresql", marks=pytest.mark.postgresql)]
)


@pytest.fixture
def older(
    adapter_kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SQLStorage]:
    """A prefix set up by the release just before rate limits, holding a due job."""
    with released_before(adapter_kind, tmp_path, monkeypatch, RATE_LIMITS_STEP) as store:
        add_as_released(store, "mail", store.now() - 1, task="tasks.mail")
        yield store


def test_the_release_before_rate_limits_upgrades_on_setup(older: SQLStorage) -> None:
    # When this release sets up a database of the release before
    older.setup()
    # Then every step ran once and the table is the one build_tables describes
    with older._engine.connect() as conn:
        versions = conn.execute(sa.select(older._tables.schema_version.c.version)).scalars()
        assert sorted(versions) == [m.version for m in MIGRATIONS]
    expected = build_tables(older._prefix).rate_limits
    inspector = sa.inspect(older._engine)
    columns = {c["name"]: c["nullable"] for c in inspector.get_columns(expected.name)}
    assert columns == {c.name: c.nullable for c in expected.columns}
    primary = inspector.get_pk_constraint(expected.name)["constrained_columns"]
    assert primary == ["kind", "name"]
    # And limits work on it, beside the old job
    older.set_rate_limit(TASK, "tasks.mail", 1, 1.0, 1, "ops")
    reservation = older.reserve_release_slots(TASK, "tasks.mail", 2)
    assert reservation is not None and len(reservation.slots) == 2
    assert older.fetch_due_ids(10) == ["mail"]


def test_drop_removes_the_rate_limits_table(make_storage: MakeStorage) -> None:
    store = make_storage()
    assert isinstance(store, SQLStorage)
    store.set_rate_limit(QUEUE, "emails", 1, 1.0, 1, "")
    store.drop()
    assert not sa.inspect(store._engine).has_table(store._tables.rate_limits.name)
    store.setup()  # the fixture drops it again at the end
    assert store.list_rate_limits() == []


def test_a_hand_written_limit_of_another_kind_never_makes_the_listing_crash(
    storage: Storage,
) -> None:
    assert isinstance(storage, SQLStorage)
    storage.set_rate_limit(QUEUE, "emails", 5, 1.0, 1, "ops")
    with storage._engine.begin() as conn:
        conn.execute(
            storage._tables.rate_limits.insert().values(
                kind="topic", name="x", count=1, period=1.0, burst=1, set_by="", set_at=0.0
            )
        )
    assert [(r.name, r.count) for r in storage.list_rate_limits()] == [("emails", 5)]


def test_names_that_look_like_sql_are_only_bound_values(storage: Storage) -> None:
    name = "emails'); DROP TABLE x; --"
    storage.set_rate_limit(QUEUE, name, 2, 1.0, 1, "o'brien")
    assert [(r.name, r.set_by) for r in storage.list_rate_limits()] == [(name, "o'brien")]
    assert storage.reserve_release_slots(QUEUE, name, 1) is not None
    now = storage.now()
    storage.add_jobs([NewJob("it's", "tasks.t", "{}", now - 1, queue=name)])
    (claim,) = storage.claim_due(1, take_lock(storage), lease=30)
    assert claim.queue == name
    assert storage.defer([claim], [now + 60], "a 'quoted' note") == ["it's"]


@postgresql_only
def test_the_transactional_release_defers_inside_its_chunk(storage: Storage) -> None:
    # Given due jobs of two queues, one of them paused, released in one transaction
    assert isinstance(storage, PostgreSQLStorage)
    now = storage.now()
    storage.add_jobs(
        [
            NewJob("sent", "tasks.t", "{}", now - 4, queue="emails"),
            NewJob("waits", "tasks.t", "{}", now - 3, queue="emails"),
            NewJob("held", "tasks.t", "{}", now - 2, queue="paused"),
            NewJob("plain", "tasks.t", "{}", now - 1),
        ]
    )
    # a pause's row written by hand, which holds no job yet: as a pause that came while the jobs
    # were on their way (a real one waits for the chunk's transaction, see sql/pauses.py)
    with storage._engine.begin() as conn:
        conn.execute(
            storage._tables.pauses.insert().values(
                kind="queue", name="paused", note="", paused_by="", paused_at=now
            )
        )
    lock = take_lock(storage)
    seen: list[ClaimedJob] = []

    def send(claims: list[ClaimedJob], settlement: ChunkSettlement) -> None:
        seen.extend(claims)
        by_id = {claim.id: claim for claim in claims}
        settlement.defer(
            [by_id["waits"], by_id["held"], by_id["plain"]],
            [now + 60, now + 70, now + 80],
            "rate limited",
        )

    ids = ["sent", "waits", "held", "plain"]
    released = storage.release_in_transaction(ids, lock, send)
    # Then the claims carried their queues, and the commit settled each as it was told
    assert [(c.id, c.queue) for c in released] == [
        ("sent", "emails"),
        ("waits", "emails"),
        ("held", "paused"),
        ("plain", None),
    ]
    assert seen == released
    sent = storage.get_job("sent")
    assert sent is not None and sent.state is JobState.ENQUEUED and sent.attempts == 1
    given_back = (
        ("waits", now + 60, JobState.SCHEDULED),
        ("held", now + 70, JobState.HELD),
        ("plain", now + 80, JobState.SCHEDULED),
    )
    for job_id, due_at, state in given_back:
        record = storage.get_job(job_id)
        assert record is not None
        assert (record.state, record.attempts, record.last_error) == (state, 0, "rate limited")
        assert record.due_at == pytest.approx(due_at, abs=1e-3)
    assert storage.fetch_due_ids(10) == []
