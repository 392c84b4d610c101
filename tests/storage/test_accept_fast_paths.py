"""The bulk accept checks the usual job shapes with quick exact-type checks first and anything else
with the general checks. These tests hold the quick path to the general one on real storage:
what it accepts is stored exactly as before (the same payload text and due time), and what it
refuses gets the general check's error, with nothing written."""

from __future__ import annotations

import json
import math
from collections import UserDict, UserList
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from types import MappingProxyType
from typing import Any

import pytest

from parallel_scheduler import Client, InvalidJobError, JobSpec
from parallel_scheduler.job_checks import check_task_name
from parallel_scheduler.ranges import MAX_INSTANT
from storage_adapters import NewJob, Storage, validate_job_id
from storage_adapters.errors import InvalidArgumentError, InvalidIdentifierError, StorageError

NOW = 1_900_000_000.0
#: The payload's one encoding, written out: what the general path produced.
REFERENCE = json.JSONEncoder(allow_nan=False, separators=(",", ":"), ensure_ascii=False)


def total(storage: Storage) -> int:
    return sum(storage.count_by_state().values())


def refused(storage: Storage, spec: JobSpec) -> str:
    """The error a bulk accept of a good job and ``spec`` raises; nothing may be written."""
    with pytest.raises(InvalidJobError) as caught:
        Client(storage).schedule_many([JobSpec("tasks.ok", id="ok"), spec])
    assert total(storage) == 0
    return str(caught.value)


def general_error(check: Callable[[], object], error: type[Exception] = InvalidJobError) -> str:
    with pytest.raises(error) as caught:
        check()
    return str(caught.value)


@pytest.mark.parametrize(
    "task",
    ["", " ", "  ", " t", "t ", "t\n", "\tt", "t\x00", "t\u00a0", "x" * 256, 123, None, b"t"],
)
def test_a_bad_task_name_gets_the_general_error(storage: Storage, task: Any) -> None:
    assert refused(storage, JobSpec(task)) == general_error(lambda: check_task_name(task))


@pytest.mark.parametrize(
    "job_id",
    ["", "a b", "a\tb", "a\nb", "a\u00a0b", "a\u2028b", "x" * 201, "r@2026-11-30T02:00:00Z"],
)
def test_a_bad_job_id_gets_the_general_error(storage: Storage, job_id: str) -> None:
    message = refused(storage, JobSpec("t", id=job_id))
    if "@" in job_id:
        assert "reserved for recurring firings" in message
    else:
        assert message == general_error(lambda: validate_job_id(job_id), InvalidIdentifierError)


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"queue": ""}, "queue '' is empty or blank"),
        ({"queue": " q"}, "queue ' q' has leading or trailing whitespace"),
        ({"queue": "q\n"}, "queue 'q\\n' has leading or trailing whitespace"),
        ({"queue": "a\x07b"}, "queue 'a\\x07b' contains the control character '\\x07'"),
        ({"queue": 5}, "queue must be a string, not 5"),
        ({"routing_key": " "}, "routing_key ' ' is empty or blank"),
        ({"queue": "q", "colour": "red"}, "unknown option(s) ['colour']"),
        ({"queue": "q", "priority": 300}, "priority must be an integer 0-255, not 300"),
        ({"queue": "q", "headers": [1]}, "headers must be a mapping, not list"),
        ({"queue": "q", "expires": math.nan}, "expires nan is outside the valid range"),
    ],
)
def test_bad_options_get_the_general_error(
    storage: Storage, options: dict[str, Any], problem: str
) -> None:
    assert problem in refused(storage, JobSpec("t", options=options))


@pytest.mark.parametrize(
    "countdown",
    [math.nan, math.inf, -math.inf, -1, -0.5, True, "60", MAX_INSTANT, 10**400],
)
def test_a_bad_countdown_is_refused_and_nothing_is_written(
    storage: Storage, countdown: Any
) -> None:
    client = Client(storage)
    with pytest.raises((InvalidJobError, OverflowError)) as caught:
        client.schedule_many([JobSpec("tasks.ok", id="ok"), JobSpec("t", countdown=countdown)])
    assert total(storage) == 0
    if not isinstance(countdown, int) or countdown < 10**300:
        assert isinstance(caught.value, InvalidJobError)
        assert "countdown" in str(caught.value)


@pytest.mark.parametrize(
    ("spec", "args", "kwargs", "options"),
    [
        (JobSpec("t", args=[1, "é", None]), [1, "é", None], {}, {}),
        (JobSpec("t", args=(1, 2)), [1, 2], {}, {}),
        (JobSpec("t", args=UserList([1])), [1], {}, {}),
        (JobSpec("t", args=range(3)), [0, 1, 2], {}, {}),
        (JobSpec("t", kwargs=MappingProxyType({"k": 1})), [], {"k": 1}, {}),
        (JobSpec("t", kwargs=UserDict({"k": "\u2028"})), [], {"k": "\u2028"}, {}),
        (JobSpec("t", options={"queue": "q", "routing_key": ""}), [], {}, {
            "queue": "q", "routing_key": ""}),
        (JobSpec("t", options={"queue": None, "exchange": ""}), [], {}, {
            "queue": None, "exchange": ""}),
        (JobSpec("t", options=MappingProxyType({"queue": "q"})), [], {}, {"queue": "q"}),
        (JobSpec("t", options={"priority": 3, "ignore_result": True}), [], {}, {
            "priority": 3, "ignore_result": True}),
        (JobSpec("t", options={"expires": datetime(2030, 1, 1, tzinfo=timezone.utc)}), [], {}, {
            "expires": datetime(2030, 1, 1, tzinfo=timezone.utc).timestamp()}),
    ],
)  # fmt: skip
def test_every_shape_is_stored_as_the_general_path_wrote_it(
    storage: Storage,
    spec: JobSpec,
    args: list[Any],
    kwargs: dict[str, Any],
    options: dict[str, Any],
) -> None:
    [result] = Client(storage).schedule_many([spec])
    stored = storage.get_job(result.job_id)
    assert stored is not None
    assert stored.payload == REFERENCE.encode({"args": args, "kwargs": kwargs, "options": options})


@pytest.mark.parametrize(
    ("countdown", "offset"),
    [(0, 0.0), (-0.0, 0.0), (60, 60.0), (2.5, 2.5), (timedelta(minutes=1), 60.0), (None, 0.0)],
)
def test_the_due_time_is_the_general_one(
    countdown: float | timedelta | None, offset: float
) -> None:
    job = JobSpec("t", id="a", countdown=countdown).encode(NOW)
    assert job.due_at == NOW + offset
    assert type(job.due_at) is float


def test_a_str_subclass_task_name_and_plain_edge_names_are_accepted(storage: Storage) -> None:
    class Name(str):
        pass

    specs = [
        JobSpec(Name("tasks.sub"), id="sub"),
        JobSpec("x" * 255, id="x" * 200),
        JobSpec("t", id="user@example.com-welcome"),
    ]
    results = Client(storage).schedule_many(specs)
    assert [r.created for r in results] == [True, True, True]
    assert total(storage) == 3


def test_ids_made_by_the_client_are_stored(storage: Storage) -> None:
    results = Client(storage).schedule_many([JobSpec("t"), JobSpec("t")])
    assert len({r.job_id for r in results}) == 2
    assert all(storage.get_job(r.job_id) is not None for r in results)


def test_results_show_each_jobs_own_due_time(storage: Storage) -> None:
    eta = datetime(2031, 5, 6, 7, 8, 9, tzinfo=timezone.utc)
    specs = [JobSpec("t", id="a", countdown=60), JobSpec("t", id="b", eta=eta)]
    first, second = Client(storage).schedule_many(specs)
    assert second.due_at == eta
    assert first.due_at != eta
    # an id that exists shows its stored due time, not the requested one
    again = Client(storage).schedule_many([JobSpec("t", id="b", countdown=5)])
    assert again[0].created is False
    assert again[0].due_at == eta


# -- storage's own checks (``check_new_jobs``) on the same quick path -----------------------


def new_job(**fields: Any) -> NewJob:
    base: dict[str, Any] = {"id": "j", "task": "t", "payload": "{}", "due_at": NOW}
    return NewJob(**{**base, **fields})


@pytest.mark.parametrize(
    ("job", "error", "problem"),
    [
        (new_job(id="a b"), InvalidIdentifierError, "has whitespace"),
        (new_job(id="a\u3000b"), InvalidIdentifierError, "has whitespace"),
        (new_job(id=""), InvalidIdentifierError, "non-empty"),
        (new_job(due_at=math.nan), InvalidArgumentError, "due_at must be a finite number"),
        (new_job(due_at=math.inf), InvalidArgumentError, "due_at must be a finite number"),
        (new_job(due_at=True), InvalidArgumentError, "due_at must be a finite number"),
        (new_job(due_at="1.0"), InvalidArgumentError, "due_at must be a finite number"),
        (new_job(task=""), StorageError, "task name of 1-255"),
        (new_job(payload=b"{}"), StorageError, "payload must be a str"),
        (new_job(envelope=""), StorageError, "envelope must be a non-empty str or None"),
    ],
)
def test_storage_refuses_a_bad_new_job_and_writes_nothing(
    storage: Storage, job: NewJob, error: type[Exception], problem: str
) -> None:
    with pytest.raises(error, match=problem):
        storage.add_jobs([new_job(id="good"), job])
    assert total(storage) == 0


def test_storage_refuses_an_id_twice_in_one_call(storage: Storage) -> None:
    with pytest.raises(StorageError, match="appears twice"):
        storage.add_jobs([new_job(id="a"), new_job(id="b"), new_job(id="a")])
    assert total(storage) == 0


def test_storage_takes_an_integer_due_time_and_stores_what_it_was_given(
    storage: Storage,
) -> None:
    jobs = [
        new_job(id="int", due_at=1_900_000_000),
        new_job(id="env", envelope='queue\n{"m": "é"}', payload='{"a":"\\"q\\""}'),
        new_job(id="none", task="t" * 255, payload=""),
    ]
    assert storage.add_jobs(jobs) == [True, True, True]
    assert storage.add_jobs([*jobs, new_job(id="new")]) == [False, False, False, True]
    for job in jobs:
        stored = storage.get_job(job.id)
        assert stored is not None
        assert (stored.task, stored.payload, stored.due_at) == (
            job.task,
            job.payload,
            float(job.due_at),
        )
