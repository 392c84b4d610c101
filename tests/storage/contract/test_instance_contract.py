"""The liveness part of the storage contract (``InstanceStore``), run against every adapter."""

from __future__ import annotations

import dataclasses
import math

import pytest

from devtools.waiting import wait_until
from storage_adapters import InstanceRecord, Storage
from storage_adapters.errors import InvalidArgumentError, InvalidIdentifierError


def instance(instance_id: str, details: str = '{"locks": []}', pid: int = 4242) -> InstanceRecord:
    return InstanceRecord(
        id=instance_id,
        host="host-a",
        pid=pid,
        version="1.2.3",
        started_at=1_700_000_000.25,
        heartbeat_at=0.0,  # ignored: storage stamps its own clock
        details=details,
    )


def test_register_stamps_the_storage_clock_and_lists_by_id(storage: Storage) -> None:
    before = storage.now()
    storage.register_instance(instance("b:1"))
    storage.register_instance(instance("a:1", details='{"x": 1}'))
    after = storage.now()
    listed = storage.list_instances()
    assert [i.id for i in listed] == ["a:1", "b:1"]
    first = listed[0]
    assert (first.host, first.pid, first.version, first.details) == (
        "host-a",
        4242,
        "1.2.3",
        '{"x": 1}',
    )
    assert first.started_at == 1_700_000_000.25
    assert before - 0.01 <= first.heartbeat_at <= after + 0.01


def test_register_again_replaces_the_record(storage: Storage) -> None:
    storage.register_instance(instance("a", pid=1))
    storage.register_instance(instance("a", pid=2, details="{}"))
    (only,) = storage.list_instances()
    assert (only.pid, only.details) == (2, "{}")


def test_heartbeat_moves_the_stamp_and_replaces_details(storage: Storage) -> None:
    storage.register_instance(instance("a"))
    (registered,) = storage.list_instances()
    assert storage.heartbeat_instance("a", '{"beat": 2}')
    (beaten,) = storage.list_instances()
    assert beaten.details == '{"beat": 2}'
    assert beaten.heartbeat_at >= registered.heartbeat_at
    assert (beaten.host, beaten.pid, beaten.started_at) == ("host-a", 4242, 1_700_000_000.25)


def test_heartbeat_of_a_missing_instance_writes_nothing(storage: Storage) -> None:
    assert not storage.heartbeat_instance("gone", "{}")
    assert storage.list_instances() == []


def test_remove_older_than_is_bounded_and_keeps_fresh_ones(storage: Storage) -> None:
    for name in ("a", "b", "c"):
        storage.register_instance(instance(name))
    cutoff = storage.now() + 0.001  # every heartbeat so far is older
    assert storage.remove_instances_older_than(cutoff - 3600) == 0
    assert storage.remove_instances_older_than(cutoff, limit=2) == 2
    assert len(storage.list_instances()) == 1
    assert storage.remove_instances_older_than(cutoff, limit=2) == 1
    assert storage.list_instances() == []


def test_remove_older_than_spares_a_record_that_beat_after_the_cutoff(storage: Storage) -> None:
    storage.register_instance(instance("old"))
    storage.register_instance(instance("fresh"))
    cutoff = max(i.heartbeat_at for i in storage.list_instances()) + 0.001

    def fresh_beat_after_cutoff() -> bool:
        assert storage.heartbeat_instance("fresh", "{}")
        return next(i for i in storage.list_instances() if i.id == "fresh").heartbeat_at > cutoff

    wait_until(fresh_beat_after_cutoff, timeout=5)
    assert storage.remove_instances_older_than(cutoff) == 1
    assert [i.id for i in storage.list_instances()] == ["fresh"]


def test_remove_one(storage: Storage) -> None:
    storage.register_instance(instance("a"))
    storage.register_instance(instance("b"))
    assert storage.remove_instance("a")
    assert not storage.remove_instance("a")
    assert [i.id for i in storage.list_instances()] == ["b"]
    assert not storage.heartbeat_instance("a", "{}")


@pytest.mark.untouched
@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({"id": ""}, InvalidIdentifierError, "non-empty"),
        ({"id": "has space"}, InvalidIdentifierError, "whitespace"),
        ({"id": "x" * 201}, InvalidIdentifierError, "limit is 200"),
        ({"pid": -1}, InvalidArgumentError, "pid"),
        ({"pid": "12"}, InvalidArgumentError, "pid"),
        ({"host": "h" * 256}, InvalidArgumentError, "host"),
        ({"version": None}, InvalidArgumentError, "version"),
        ({"started_at": math.nan}, InvalidArgumentError, "started_at"),
        ({"details": None}, InvalidArgumentError, "details"),
    ],
)
def test_bad_records_are_refused_and_nothing_is_written(
    storage: Storage, change: dict[str, object], error: type[Exception], match: str
) -> None:
    bad = dataclasses.replace(instance("ok"), **change)  # type: ignore[arg-type]
    with pytest.raises(error, match=match):
        storage.register_instance(bad)
    assert storage.list_instances() == []


def test_bad_arguments_are_refused(storage: Storage) -> None:
    storage.register_instance(instance("a"))
    with pytest.raises(InvalidArgumentError, match="cutoff"):
        storage.remove_instances_older_than(math.inf)
    with pytest.raises(InvalidArgumentError, match="limit"):
        storage.remove_instances_older_than(storage.now() + 1, limit=0)
    with pytest.raises(InvalidIdentifierError):
        storage.heartbeat_instance("bad id", "{}")
    assert [i.id for i in storage.list_instances()] == ["a"]
