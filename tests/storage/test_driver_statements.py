"""The per-job hot statements on a connection each thread keeps (``SQLPlumbing._driver_rows``).

A kept connection must behave like a fresh one from the pool for the next job: a statement that
failed (on the server, or because the connection was lost) must not poison the thread's next
claim, and closing the storage must give every kept connection back. PostgreSQL only: it is where
a server error and a killed backend can be caused on demand.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
import sqlalchemy as sa

from devtools.waiting import wait_until
from storage_adapters import LockLease, Storage, StorageError, StorageUnavailableError
from tests.conftest import POSTGRESQL_URL
from tests.storage.due_jobs import add_due, take_lock

MakeStorage = Callable[..., Storage]

pytestmark = pytest.mark.parametrize(
    "adapter_kind", [pytest.param("postgresql", marks=pytest.mark.postgresql)]
)


def backends_running(table: str) -> list[int]:
    """Server processes (other than ours) whose last statement was a write to ``table``."""
    engine = sa.create_engine(POSTGRESQL_URL.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
                    "AND query LIKE :pattern"
                ),
                {"pattern": f"UPDATE {table} %"},
            )
            return [int(pid) for (pid,) in rows]
    finally:
        engine.dispose()


def terminate(pids: list[int]) -> None:
    engine = sa.create_engine(POSTGRESQL_URL.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.connect() as conn:
            for pid in pids:
                conn.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    finally:
        engine.dispose()


def test_a_server_error_does_not_poison_the_threads_next_claim(
    make_storage: MakeStorage,
) -> None:
    storage = make_storage()
    first, second = add_due(storage, 2)
    lock = take_lock(storage)
    out_of_range = LockLease(lock.name, lock.owner, 2**63, lock.expires_at)  # past BIGINT
    with pytest.raises(StorageError, match="out of range"):
        storage.claim(first, out_of_range, 30)
    claim = storage.claim(first, lock, 30)
    assert claim is not None and claim.id == first
    assert storage.mark_enqueued([claim]) == [first]
    assert storage.claim(second, lock, 30) is not None


def test_a_lost_connection_is_replaced_for_the_next_claim(make_storage: MakeStorage) -> None:
    storage = make_storage()
    first, second = add_due(storage, 2)
    lock = take_lock(storage)
    claim = storage.claim(first, lock, 30)  # this thread now keeps a connection
    assert claim is not None
    table = f"{storage._prefix}_jobs"  # type: ignore[attr-defined]
    kept = backends_running(table)
    assert kept, "the claim's connection should still be open"
    terminate(kept)
    wait_until(lambda: not backends_running(table), timeout=10)
    with pytest.raises(StorageUnavailableError):
        storage.mark_enqueued([claim])
    assert storage.mark_enqueued([claim]) == [first]  # a new connection, the same claim
    assert storage.claim(second, lock, 30) is not None


def test_close_gives_back_every_threads_connection(make_storage: MakeStorage) -> None:
    storage = make_storage(pool_size=4)
    ids = add_due(storage, 4)
    lock = take_lock(storage)

    def claim(job_id: str) -> None:
        assert storage.claim(job_id, lock, 30) is not None

    threads = [threading.Thread(target=claim, args=(job_id,)) for job_id in ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    table = f"{storage._prefix}_jobs"  # type: ignore[attr-defined]
    assert backends_running(table), "each thread should keep its claim's connection"
    storage.close()
    wait_until(lambda: not backends_running(table), timeout=10)


def test_a_thread_that_ends_gives_its_connection_back(make_storage: MakeStorage) -> None:
    """Two connections in all (pool 1 + overflow 1): without the give-back, the third
    short-lived thread would wait for a free connection until the pool's timeout."""
    storage = make_storage(pool_size=1)
    ids = add_due(storage, 6)
    lock = take_lock(storage)
    claimed: list[str] = []

    def claim(job_id: str) -> None:
        claim = storage.claim(job_id, lock, 30)
        assert claim is not None
        claimed.append(claim.id)

    for job_id in ids:
        thread = threading.Thread(target=claim, args=(job_id,))
        thread.start()
        thread.join(timeout=20)
        assert not thread.is_alive(), "a claim waited for a connection the ended threads kept"
    assert claimed == ids


def test_threads_beyond_the_pool_size_still_claim_while_the_others_keep_theirs(
    make_storage: MakeStorage,
) -> None:
    """Pool 1 + overflow 1: one thread keeps a connection, the others (all alive at once) take
    one per call from the overflow. Were every thread to keep its own, the third would wait for
    a free connection until the pool's timeout."""
    storage = make_storage(pool_size=1)
    ids = add_due(storage, 4)
    lock = take_lock(storage)
    all_claimed = threading.Barrier(len(ids) + 1)
    claimed: list[str] = []

    def claim(job_id: str) -> None:
        claim = storage.claim(job_id, lock, 30)
        assert claim is not None
        claimed.append(claim.id)
        all_claimed.wait(timeout=30)  # stay alive: an ended thread gives its connection back

    threads = [threading.Thread(target=claim, args=(job_id,)) for job_id in ids]
    for thread in threads:
        thread.start()
    all_claimed.wait(timeout=20)  # broken (BrokenBarrierError) if a claim waited that long
    for thread in threads:
        thread.join()
    assert sorted(claimed) == ids
