"""Redis-only behaviour the shared contract cannot see: key layout, exact floats, error mapping.

Runs against the real server from ``PARALLEL_SCHEDULER_TEST_REDIS_URL``; every test works under
its own prefix and removes its keys.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from redis.crc import key_slot

from storage_adapters import (
    ClaimedJob,
    Firing,
    InvalidArgumentError,
    InvalidStorageURLError,
    JobState,
    LockLease,
    NewJob,
    NewRecurring,
    RecordExistsError,
    RecordNotFoundError,
    StorageError,
    StorageUnavailableError,
    list_jobs,
)
from storage_adapters.redis.storage import RedisStorage
from tests.conftest import REDIS_URL, require_server, unique_prefix
from tests.storage.due_jobs import fire_one

pytestmark = pytest.mark.redis

LOCK = "delayed-scheduler"


@pytest.fixture
def raw() -> Iterator[redis.Redis]:
    require_server("redis")
    client = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def prefix() -> str:
    return unique_prefix()


@pytest.fixture
def store(raw: redis.Redis, prefix: str) -> Iterator[RedisStorage]:
    storage = RedisStorage(REDIS_URL, prefix=prefix)
    storage.setup()
    yield storage
    storage.close()
    for key in keys_of(raw, prefix):
        raw.unlink(key)


def keys_of(raw: redis.Redis, prefix: str) -> list[str]:
    return list(raw.scan_iter(match=f"*{prefix}*", count=1000))


def add_due(store: RedisStorage, count: int) -> list[str]:
    now = store.now()
    ids = [f"j{i:05d}" for i in range(count)]
    store.add_jobs([NewJob(i, "tasks.t", "{}", now - 100 + n * 0.001) for n, i in enumerate(ids)])
    return ids


def test_every_key_carries_the_prefix_hash_tag(
    store: RedisStorage, raw: redis.Redis, prefix: str
) -> None:
    # Given a store that went through every kind of write
    lock = store.acquire_lock(LOCK, "a", 30)
    assert lock is not None
    ids = add_due(store, 4)
    claims = store.claim_due(4, lock, 30)
    store.mark_enqueued(claims[:1])
    store.unclaim(claims[1:2], "boom")
    store.expire(claims[2:3], "late")
    store.cancel(ids[1])
    # Then every key it made is "{prefix}:…", so all of them hash to one cluster slot
    keys = keys_of(raw, prefix)
    assert keys
    assert all(key.startswith(f"{{{prefix}}}:") for key in keys)
    assert {key_slot(key.encode()) for key in keys} == {key_slot(prefix.encode())}


def test_times_round_trip_exactly(store: RedisStorage) -> None:
    # Given a due time with more digits than Lua's tostring keeps
    due = store.now() - 0.123456789
    store.add_jobs([NewJob("a", "tasks.t", "{}", due)])
    # Then every read gives back the very same double
    assert store.next_due_at() == due
    record = store.get_job("a")
    assert record is not None and record.due_at == due
    lock = store.acquire_lock(LOCK, "a", 30)
    assert lock is not None
    claim = store.claim("a", lock, 30)
    assert claim is not None and claim.due_at == due
    assert store.unclaim([claim]) == ["a"]
    assert store.next_due_at() == due


def test_server_timestamps_keep_microseconds(
    store: RedisStorage, raw: redis.Redis, prefix: str
) -> None:
    # Given jobs accepted one call at a time (so each reads the clock anew)
    for n in range(20):
        store.add_jobs([NewJob(f"j{n}", "tasks.t", "{}", store.now())])
    # Then their stamps keep TIME's microseconds, not the 14 digits of Lua's tostring
    stamps = [str(raw.hget(f"{{{prefix}}}:job:j{n}", "created_at")) for n in range(20)]
    fractions = [repr(float(stamp)).partition(".")[2] for stamp in stamps]
    assert any(len(f) > 4 for f in fractions)


def test_settle_checks_each_claims_own_token(store: RedisStorage) -> None:
    # Given two jobs claimed under two successive leases of the lock, and a forged claim
    first_id, second_id, third_id = add_due(store, 3)
    first_lock = store.acquire_lock(LOCK, "a", 30)
    assert first_lock is not None
    first = store.claim(first_id, first_lock, 30)
    assert store.release_lock(first_lock)
    second_lock = store.acquire_lock(LOCK, "a", 30)
    assert second_lock is not None
    second = store.claim(second_id, second_lock, 30)
    third = store.claim(third_id, second_lock, 30)
    assert first is not None and second is not None and third is not None
    assert first.token != second.token
    wrong = ClaimedJob(third.id, third.task, third.payload, third.due_at, 1, first.token)
    # When all of them are acknowledged in one call
    acked = store.mark_enqueued([first, second, wrong])
    # Then each claim was checked against its own token
    assert sorted(acked) == [first_id, second_id]
    record = store.get_job(third_id)
    assert record is not None and record.state is JobState.CLAIMED


def test_claim_due_takes_thousands_in_one_script(store: RedisStorage) -> None:
    ids = add_due(store, 5000)
    lock = store.acquire_lock(LOCK, "a", 30)
    assert lock is not None
    claims = store.claim_due(5000, lock, 30)
    assert [c.id for c in claims] == ids
    assert sorted(store.mark_enqueued(claims)) == ids
    assert store.count_by_state()[JobState.ENQUEUED] == 5000


def test_lock_key_expires_by_itself(store: RedisStorage, raw: redis.Redis, prefix: str) -> None:
    lock = store.acquire_lock(LOCK, "a", 2.5)
    assert lock is not None
    ttl = raw.pttl(f"{{{prefix}}}:lock:{LOCK}")
    assert 0 < ttl <= 2500
    # The fencing counter has no TTL: tokens must keep growing after the lock key is gone
    assert raw.ttl(f"{{{prefix}}}:fence:{LOCK}") == -1


def test_drop_removes_only_its_own_prefix(raw: redis.Redis, prefix: str) -> None:
    # Given two stores whose prefixes share a beginning
    short, longer = (
        RedisStorage(REDIS_URL, prefix=prefix),
        RedisStorage(REDIS_URL, prefix=prefix + "x"),
    )
    try:
        for storage in (short, longer):
            storage.setup()
            storage.add_jobs([NewJob("a", "tasks.t", "{}", storage.now())])
        # When one is dropped
        short.drop()
        # Then its keys are gone and the other's are untouched
        assert not [k for k in keys_of(raw, prefix) if k.startswith(f"{{{prefix}}}")]
        assert longer.get_job("a") is not None
    finally:
        longer.drop()
        short.close()
        longer.close()


@pytest.mark.parametrize(
    "url",
    [
        "redis://user:s3cr3t-pw@127.0.0.1:1/0",
        "unix:///nonexistent/redis.sock?db=0&password=s3cr3t-pw",
    ],
)
def test_unreachable_server_is_unavailable_and_the_password_stays_hidden(url: str) -> None:
    storage = RedisStorage(url, prefix=unique_prefix())
    try:
        with pytest.raises(StorageUnavailableError) as caught:
            storage.now()
    finally:
        storage.close()
    message = str(caught.value)
    assert "s3cr3t-pw" not in message
    assert "***" in message
    assert "s3cr3t-pw" not in repr(storage)


def test_other_redis_errors_are_storage_errors(
    store: RedisStorage, raw: redis.Redis, prefix: str
) -> None:
    # Given the due set's key clobbered with a value of the wrong type
    raw.set(f"{{{prefix}}}:schedule", "not a sorted set")
    # Then the script's WRONGTYPE error is a StorageError, not "unavailable" (retrying won't help)
    with pytest.raises(StorageError) as caught:
        store.add_jobs([NewJob("a", "tasks.t", "{}", store.now())])
    assert not isinstance(caught.value, StorageUnavailableError)
    assert "WRONGTYPE" in str(caught.value)


def test_a_closed_store_refuses_work(store: RedisStorage) -> None:
    store.close()
    store.close()
    with pytest.raises(StorageError, match="closed"):
        store.now()


def test_keys_from_a_newer_schema_are_refused(
    store: RedisStorage, raw: redis.Redis, prefix: str
) -> None:
    raw.set(f"{{{prefix}}}:version", 99)
    with pytest.raises(StorageError, match="newer"):
        store.setup()


def test_malformed_url_options_are_rejected_up_front() -> None:
    with pytest.raises(InvalidStorageURLError):
        RedisStorage("redis://127.0.0.1:6379/0?socket_timeout=soon")


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.claim_due(0, LockLease(LOCK, "a", 1, 0.0), 30),
        lambda s: s.claim("a", LockLease(LOCK, "a", 1, 0.0), -1),
        lambda s: s.acquire_lock(LOCK, "a", 0),
        lambda s: s.acquire_lock(LOCK, "a", float("nan")),
        lambda s: s.recover_expired_claims(-1),
        lambda s: list_jobs(s, None, 10, offset=-1),
        lambda s: s.reschedule("a", float("inf")),
    ],
)
def test_bad_numbers_are_value_errors(store: RedisStorage, call: object) -> None:
    with pytest.raises(InvalidArgumentError):  # a ValueError of the storage tree
        call(store)  # type: ignore[operator]


# -- recurring jobs -------------------------------------------------------------------------


def recurring(rid: str, next_run_at: float | None, enabled: bool = True) -> NewRecurring:
    return NewRecurring(rid, "tasks.report", "{}", '{"cron": "* * * * *"}', enabled, next_run_at)


def test_a_recurring_job_paused_before_pause_notes_reads_none_and_resume_deletes_the_fields(
    store: RedisStorage, raw: redis.Redis, prefix: str
) -> None:
    # Given a recurring hash paused as a version before pause notes wrote it (no such fields)
    store.save_recurring(recurring("r", None, enabled=False), "create")
    key = f"{{{prefix}}}:rec:r"
    assert raw.hget(key, "paused_at") is None
    old = store.get_recurring("r")
    assert old is not None and (old.pause_note, old.paused_by, old.paused_at) == (None, None, None)
    # When it is paused with a note, then resumed
    assert store.set_recurring_enabled("r", False, None, "why", "who")
    assert raw.hmget(key, ["pause_note", "paused_by"]) == ["why", "who"]
    assert store.set_recurring_enabled("r", True, None)
    # Then the resume leaves none of the pause's fields in the hash
    assert raw.hmget(key, ["pause_note", "paused_by", "paused_at"]) == [None, None, None]


def test_recurring_keys_carry_the_hash_tag_and_drop_removes_them(
    store: RedisStorage, raw: redis.Redis, prefix: str
) -> None:
    # Given a recurring job that was saved, paused, resumed and fired
    now = store.now()
    store.save_recurring(recurring("r", now - 1), "create")
    store.set_recurring_enabled("r", False, now - 1)
    store.set_recurring_enabled("r", True, now - 1)
    lock = store.acquire_lock(LOCK, "a", 30)
    assert lock is not None
    version = store.get_recurring("r").version  # type: ignore[union-attr]
    job = NewJob("r@1", "tasks.report", "{}", now - 1)
    assert fire_one(store, "r", version, lock, Firing(now + 60, now - 1, "[]", (job,)))
    # Then every key shares the prefix's slot, and drop leaves none behind
    keys = keys_of(raw, prefix)
    assert {f"{{{prefix}}}:rec:r", f"{{{prefix}}}:rec_ids", f"{{{prefix}}}:rec_due"} <= set(keys)
    assert {key_slot(key.encode()) for key in keys} == {key_slot(prefix.encode())}
    store.drop()
    assert keys_of(raw, prefix) == []


def test_recurring_times_round_trip_exactly(store: RedisStorage) -> None:
    # Given times with more digits than Lua's tostring keeps
    next_run_at = store.now() - 0.123456789
    last_run_at = next_run_at - 59.987654321
    store.save_recurring(recurring("r", next_run_at), "create")
    lock = store.acquire_lock(LOCK, "a", 30)
    assert lock is not None
    (due,) = store.fetch_due_recurring(10)
    assert due.next_run_at == next_run_at
    # When it fires with new times
    firing = Firing(next_run_at + 60.000000001, last_run_at, "[]", ())
    assert fire_one(store, "r", due.version, lock, firing) == []
    # Then each read gives back the very same doubles
    record = store.get_recurring("r")
    assert record is not None
    assert (record.next_run_at, record.last_run_at) == (firing.next_run_at, last_run_at)


def test_the_due_index_holds_exactly_the_enabled_ones_with_a_next_run(
    store: RedisStorage, raw: redis.Redis, prefix: str
) -> None:
    now = store.now()
    due_key = f"{{{prefix}}}:rec_due"
    store.save_recurring(recurring("a", now + 5), "create")
    store.save_recurring(recurring("b", now + 5, enabled=False), "create")
    store.save_recurring(recurring("c", None), "create")
    assert raw.zrange(due_key, 0, -1) == ["a"]
    store.save_recurring(recurring("b", now + 5), "update")
    store.set_recurring_enabled("a", False, now + 5)
    assert raw.zrange(due_key, 0, -1) == ["b"]
    lock = store.acquire_lock(LOCK, "a", 30)
    assert lock is not None
    version = store.get_recurring("b").version  # type: ignore[union-attr]
    assert fire_one(store, "b", version, lock, Firing(None, now, "[]", ())) == []
    store.remove_recurring("c")
    assert raw.zcard(due_key) == 0
    assert raw.zrange(f"{{{prefix}}}:rec_ids", 0, -1) == ["a", "b"]


def test_a_refused_save_writes_nothing(store: RedisStorage, raw: redis.Redis, prefix: str) -> None:
    now = store.now()
    store.save_recurring(recurring("a", now + 5), "create")
    before = raw.hgetall(f"{{{prefix}}}:rec:a")
    with pytest.raises(RecordExistsError, match="already exists"):
        store.save_recurring(recurring("a", now + 99, enabled=False), "create")
    with pytest.raises(RecordNotFoundError, match="does not exist"):
        store.save_recurring(recurring("b", now), "update")
    assert raw.hgetall(f"{{{prefix}}}:rec:a") == before
    assert not raw.exists(f"{{{prefix}}}:rec:b")
    assert raw.zrange(f"{{{prefix}}}:rec_ids", 0, -1) == ["a"]


def test_a_firing_adds_thousands_of_jobs_in_one_script(store: RedisStorage) -> None:
    now = store.now()
    store.save_recurring(recurring("r", now - 1), "create")
    store.add_jobs([NewJob("r@00000", "tasks.report", "{}", now - 1)])
    lock = store.acquire_lock(LOCK, "a", 30)
    assert lock is not None
    jobs = tuple(NewJob(f"r@{n:05d}", "tasks.report", "{}", now - 1) for n in range(3000))
    created = fire_one(store, "r", 1, lock, Firing(now + 60, now - 1, "[]", jobs))
    assert created == [False] + [True] * 2999
    assert store.count_by_state()[JobState.SCHEDULED] == 3000


def test_other_script_errors_are_not_key_errors(
    store: RedisStorage, raw: redis.Redis, prefix: str
) -> None:
    raw.set(f"{{{prefix}}}:rec_ids", "not a sorted set")
    with pytest.raises(StorageError, match="WRONGTYPE"):
        store.save_recurring(recurring("a", store.now()), "create")


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.save_recurring(recurring("a", 1.0), "replace"),
        lambda s: s.save_recurring(recurring("a", float("nan")), "create"),
        lambda s: s.save_recurring(NewRecurring("a", "", "{}", "{}", True, 1.0), "create"),
        lambda s: s.save_recurring(NewRecurring("a", "t", "{}", None, True, 1.0), "create"),  # type: ignore[arg-type]
        lambda s: s.save_recurring(recurring("a", 1.0, enabled=1), "create"),  # type: ignore[arg-type]
        lambda s: s.set_recurring_enabled("a", True, float("inf")),
        lambda s: s.list_recurring(10, offset=-1),
        lambda s: s.fetch_due_recurring(0),
        lambda s: fire_one(s, "a", True, LockLease(LOCK, "a", 1, 0.0), Firing(1, 1, "", ())),
    ],
)
def test_bad_recurring_input_is_a_value_error(
    store: RedisStorage, raw: redis.Redis, prefix: str, call: object
) -> None:
    with pytest.raises(InvalidArgumentError):  # a ValueError of the storage tree
        call(store)  # type: ignore[operator]
    assert keys_of(raw, prefix) == [f"{{{prefix}}}:version"]


# -- releasing straight onto a Redis-list broker on the same server ---------------------------


def _list_db(raw: redis.Redis) -> int:
    """A database other than the store's, as a broker beside the store would use."""
    return (int(raw.connection_pool.connection_kwargs.get("db") or 0) + 3) % 16


def _list_broker(raw: redis.Redis) -> tuple[int, redis.Redis]:
    """The broker's database beside the store's, and a client of it."""
    db = _list_db(raw)
    return db, _broker(raw, db)


def _broker(raw: redis.Redis, db: int) -> redis.Redis:
    """A client of database ``db`` on the store's server (a URL's own /db would win over db=)."""
    kwargs = raw.connection_pool.connection_kwargs
    return redis.Redis(
        host=kwargs.get("host", "localhost"),
        port=kwargs.get("port", 6379),
        password=kwargs.get("password"),
        db=db,
        decode_responses=True,
    )


def test_release_to_lists_moves_enveloped_jobs_and_claims_the_rest(
    store: RedisStorage, raw: redis.Redis, prefix: str
) -> None:
    # Given due jobs: two with envelopes for two lists, one without, one not yet due
    db, broker = _list_broker(raw)
    first, second = f"{prefix}-q1", f"{prefix}-q2"
    now = store.now()
    store.add_jobs(
        [
            NewJob("a", "t", '{"a":1}', now - 3, f"{first}\nmessage-a"),
            NewJob("plain", "t", "{}", now - 2),
            NewJob("b", "t", "{}", now - 1, f"{second}\nmessage-b\nwith a newline"),
            NewJob("later", "t", "{}", now + 3600, f"{first}\nmessage-later"),
        ]
    )
    lock = store.acquire_lock(LOCK, "me", 30)
    assert lock is not None
    try:
        # When the batch is released
        moved, claimed = store.release_to_lists(10, lock, 30, db)
        # Then the enveloped jobs are in their lists and Enqueued, and the other is claimed
        assert [(j.id, j.payload, j.attempts) for j in moved] == [
            ("a", "", 1),
            ("b", "", 1),
        ]
        assert [(j.id, j.envelope) for j in claimed] == [("plain", None)]
        assert broker.lrange(first, 0, -1) == ["message-a"]
        assert broker.lrange(second, 0, -1) == ["message-b\nwith a newline"]
        states = {i: store.get_job(i).state for i in ("a", "b", "plain", "later")}  # type: ignore[union-attr]
        assert states == {
            "a": JobState.ENQUEUED,
            "b": JobState.ENQUEUED,
            "plain": JobState.CLAIMED,
            "later": JobState.SCHEDULED,
        }
        assert store.count_by_state()[JobState.ENQUEUED] == 2
        assert not raw.hget(f"{{{prefix}}}:job:a", "envelope")  # not kept once sent
        # And nothing is released twice
        assert store.release_to_lists(10, lock, 30, db) == ([], [])
    finally:
        broker.delete(first, second)
        broker.close()


def test_release_to_lists_keeps_due_order_within_a_list(
    store: RedisStorage, raw: redis.Redis, prefix: str
) -> None:
    db, broker = _list_broker(raw)
    queue = f"{prefix}-q"
    now = store.now()
    store.add_jobs(
        [NewJob(f"j{i:04d}", "t", "{}", now - 10 + i / 1000, f"{queue}\nm{i}") for i in range(2500)]
    )
    lock = store.acquire_lock(LOCK, "me", 30)
    assert lock is not None
    try:
        moved, claimed = store.release_to_lists(5000, lock, 30, db)
        assert (len(moved), claimed) == (2500, [])
        # a Redis-list consumer pops from the right: the earliest due comes out first
        popped = [broker.rpop(queue) for _ in range(2500)]
        assert popped == [f"m{i}" for i in range(2500)]
    finally:
        broker.delete(queue)
        broker.close()


def test_release_to_lists_refuses_a_stale_lease_and_writes_nothing(
    store: RedisStorage, raw: redis.Redis, prefix: str
) -> None:
    db = _list_db(raw)
    queue = f"{prefix}-q"
    store.add_jobs([NewJob("a", "t", "{}", store.now() - 1, f"{queue}\nm")])
    stale = LockLease(LOCK, "me", 999, store.now() + 30)
    assert store.release_to_lists(10, stale, 30, db) == ([], [])
    assert _broker(raw, db).llen(queue) == 0
    assert store.get_job("a").state is JobState.SCHEDULED  # type: ignore[union-attr]


def test_a_list_key_of_another_type_sends_its_jobs_the_claim_way(
    store: RedisStorage, raw: redis.Redis, prefix: str
) -> None:
    db, broker = _list_broker(raw)
    queue = f"{prefix}-q"
    broker.set(queue, "not a list")
    store.add_jobs([NewJob("a", "t", "{}", store.now() - 1, f"{queue}\nm")])
    lock = store.acquire_lock(LOCK, "me", 30)
    assert lock is not None
    try:
        moved, claimed = store.release_to_lists(10, lock, 30, db)
        assert moved == [] and [(j.id, j.envelope) for j in claimed] == [("a", f"{queue}\nm")]
        assert broker.get(queue) == "not a list"
    finally:
        broker.delete(queue)
        broker.close()


def test_server_identity_names_the_server_process(store: RedisStorage, raw: redis.Redis) -> None:
    assert store.server_identity() == raw.info("server")["run_id"]


def test_wait_replicas_on_a_server_without_replicas_fails_writes_as_unavailable(
    raw: redis.Redis, prefix: str
) -> None:
    """``wait_replicas`` is this adapter's option, taken out of the URL before redis-py reads it:
    a write then waits for that many replicas, and none answering is reported, not hidden."""
    joiner = "&" if "?" in REDIS_URL else "?"
    store = RedisStorage(f"{REDIS_URL}{joiner}wait_replicas=1&wait_timeout_ms=20", prefix=prefix)
    try:
        store.setup()
        with pytest.raises(StorageUnavailableError, match="only 0 of 1 replicas"):
            store.add_jobs([NewJob("w", "t", "{}", store.now())])
        assert store.get_job("w") is not None  # done on the server, only not replicated
        assert store.fetch_due_ids(10) == ["w"]  # reads do not wait
    finally:
        store.close()
        for key in keys_of(raw, prefix):
            raw.unlink(key)
