"""A PostgreSQL transaction ended by the server because this process stalled inside it is run
again, once, on a fresh connection: the caller sees its call succeed, exactly once.

Against the real server, on sessions with a 0.3 s ``idle_in_transaction_session_timeout`` (the
URL's own ``options``): a stall of 1 s is injected once, between two statements of the
transaction, the way a loaded machine or a long garbage collection pauses a process.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
import sqlalchemy as sa

import storage_adapters
from storage_adapters import JobState, NewJob, PauseKind, StorageUnavailableError
from storage_adapters.sql.postgresql import PostgreSQLStorage
from tests.conftest import POSTGRESQL_URL, require_server, unique_prefix

pytestmark = pytest.mark.postgresql

IDLE_LIMIT_MS = 300
STALL = 1.0
SHORT_IDLE_URL = f"{POSTGRESQL_URL}?options=" + quote(
    f"-c idle_in_transaction_session_timeout={IDLE_LIMIT_MS}"
)


@pytest.fixture
def pg() -> Iterator[PostgreSQLStorage]:
    require_server("postgresql")
    store = storage_adapters.from_url(SHORT_IDLE_URL, prefix=unique_prefix())
    assert isinstance(store, PostgreSQLStorage)
    store.setup()
    try:
        yield store
    finally:
        store.drop()
        store.close()


class Stall:
    """Sleeps ``STALL`` s before each of the first ``times`` statements whose SQL contains
    ``marker`` that run inside an open transaction; counts the statements with the marker."""

    def __init__(self, storage: PostgreSQLStorage, marker: str, times: int = 1) -> None:
        self.marker = marker
        self.seen = 0
        self.left = times
        sa.event.listen(storage._engine, "before_cursor_execute", self.before)

    def before(self, conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        if self.marker not in statement:
            return
        self.seen += 1
        in_transaction = conn.connection.dbapi_connection.info.transaction_status != 0
        if self.left and in_transaction:
            self.left -= 1
            time.sleep(STALL)

    @property
    def stalled(self) -> bool:
        return self.left == 0


def held(pg: PostgreSQLStorage) -> int:
    return pg.count_by_state().get(JobState.HELD, 0)


def test_a_pause_stalled_inside_its_transaction_is_run_again(
    pg: PostgreSQLStorage, caplog: pytest.LogCaptureFixture
) -> None:
    # Given three due jobs in queue "emails", and a process that will stall once inside the
    # pause's transaction, past the server's idle limit
    now = pg.now()
    pg.add_jobs([NewJob(f"j{n}", "t.send", "{}", now - 1, queue="emails") for n in range(3)])
    stall = Stall(pg, "pauses")
    caplog.set_level(logging.WARNING, logger="storage_adapters.sql.idle_rerun")
    # When the queue is paused
    moved = pg.pause(PauseKind.QUEUE, "emails", "smtp down", "ops")
    # Then the server ended the first try (it said so, and it was retried), and the second
    # held the three jobs once: one pause, noted once
    assert stall.stalled and stall.seen >= 2
    assert "pause: the server ended its transaction" in caplog.text
    assert moved == 3 and held(pg) == 3
    assert [(p.name, p.note) for p in pg.list_pauses()] == [("emails", "smtp down")]


def test_a_read_of_the_due_set_stalled_inside_its_transaction_is_run_again(
    pg: PostgreSQLStorage,
) -> None:
    # Given two due jobs, and a process that will stall once inside the due read's transaction
    now = pg.now()
    pg.add_jobs([NewJob("a", "t.x", "{}", now - 2), NewJob("b", "t.x", "{}", now - 1)])
    stall = Stall(pg, "SELECT")
    # When the due ids are read, then they are all there, the stalled try having been replaced
    assert pg.fetch_due_ids(10) == ["a", "b"]
    assert stall.stalled


def test_a_transaction_that_stalls_every_time_fails_as_unavailable_and_writes_nothing(
    pg: PostgreSQLStorage,
) -> None:
    # Given a due job, and a process that stalls inside every try of the pause's transaction
    pg.add_jobs([NewJob("a", "t.x", "{}", pg.now() - 1, queue="emails")])
    stall = Stall(pg, "pauses", times=2)
    # When the queue is paused, then the second try fails too, saying why, and nothing changed
    with pytest.raises(StorageUnavailableError, match="idle-in-transaction timeout"):
        pg.pause(PauseKind.QUEUE, "emails", "smtp down", "ops")
    assert stall.stalled
    assert held(pg) == 0 and pg.list_pauses() == []
