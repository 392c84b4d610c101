"""Every adapter refuses bad input with an error of the storage tree, never a bare ``ValueError``
or ``KeyError``, and writes nothing.

Each error is also the builtin it replaced (``InvalidArgumentError`` is a ``ValueError``,
``RecordNotFoundError`` a ``KeyError``), so a caller that caught the builtin keeps working; these
tests hold every adapter to the precise class, so a caller can rely on it.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from storage_adapters import (
    InvalidArgumentError,
    InvalidRecordError,
    NewJob,
    NewRecurring,
    RecordExistsError,
    RecordNotFoundError,
    SaveMode,
    Storage,
    StorageError,
    list_jobs,
)


def recurring(rid: str = "r", *, payload: object = "{}", enabled: object = True) -> NewRecurring:
    return NewRecurring(
        id=rid,
        task="tasks.report",
        payload=payload,  # type: ignore[arg-type]
        schedule='{"cron": "* * * * *", "timezone": "UTC"}',
        enabled=enabled,  # type: ignore[arg-type]
        next_run_at=None,
    )


def new_job(job_id: str = "a", *, task: str = "tasks.add", payload: object = "{}") -> NewJob:
    return NewJob(id=job_id, task=task, payload=payload, due_at=0.0)  # type: ignore[arg-type]


Call = Callable[[Storage], object]

#: A bad input, the error of the tree it must raise, and a word the message must hold.
BAD_INPUT: dict[str, tuple[Call, type[InvalidArgumentError], str]] = {
    "job offset": (lambda s: list_jobs(s, None, 10, offset=-1), InvalidArgumentError, "offset"),
    "job limit": (lambda s: list_jobs(s, None, 0), InvalidArgumentError, "limit"),
    "recurring offset": (lambda s: s.list_recurring(10, offset=-1), InvalidArgumentError, "offset"),
    "recurring limit": (lambda s: s.list_recurring(0), InvalidArgumentError, "limit"),
    "due limit": (lambda s: s.fetch_due_ids(0), InvalidArgumentError, "limit"),
    "lock lease": (lambda s: s.acquire_lock("l", "me", 0), InvalidArgumentError, "lease"),
    "save mode": (
        lambda s: s.save_recurring(recurring(), "replace"),  # type: ignore[arg-type]
        InvalidArgumentError,
        "mode",
    ),
    "enabled flag": (
        lambda s: s.set_recurring_enabled("r", 1, None),  # type: ignore[arg-type]
        InvalidArgumentError,
        "enabled",
    ),
    "due time": (lambda s: s.reschedule("a", float("nan")), InvalidArgumentError, "due_at"),
    "duplicate id": (
        lambda s: s.add_jobs([new_job("a"), new_job("a")]),
        InvalidRecordError,
        "twice",
    ),
    "empty task": (lambda s: s.add_jobs([new_job(task="")]), InvalidRecordError, "task name"),
    "job payload": (lambda s: s.add_jobs([new_job(payload=b"{}")]), InvalidRecordError, "payload"),
    "recurring payload": (
        lambda s: s.save_recurring(recurring(payload=1), "create"),
        InvalidRecordError,
        "payload",
    ),
    "recurring enabled": (
        lambda s: s.save_recurring(recurring(enabled=1), "create"),
        InvalidRecordError,
        "enabled",
    ),
}


@pytest.mark.untouched
@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_bad_input_raises_the_trees_value_error(storage: Storage, case: str) -> None:
    call, error, named = BAD_INPUT[case]
    # When an argument is out of range or a record breaks the contract
    with pytest.raises(error, match=named) as raised:
        call(storage)
    # Then the tree's precise error names it, is a StorageError and still the ValueError it was
    assert isinstance(raised.value, StorageError) and isinstance(raised.value, ValueError)
    # And nothing was written
    assert sum(storage.count_by_state().values()) == 0 and storage.count_recurring() == 0


@pytest.mark.parametrize(
    ("mode", "error", "existing"),
    [("update", RecordNotFoundError, False), ("create", RecordExistsError, True)],
)
def test_a_refused_save_mode_raises_a_record_error(
    storage: Storage, mode: SaveMode, error: type[KeyError], existing: bool
) -> None:
    # Given a recurring job that exists or not
    if existing:
        storage.save_recurring(recurring(), "create")
    # When the save's mode refuses
    with pytest.raises(error, match="recurring job 'r'") as raised:
        storage.save_recurring(recurring(payload='{"changed": 1}'), mode)
    # Then the error is of the tree and still a KeyError, and the row is unchanged
    assert isinstance(raised.value, StorageError) and isinstance(raised.value, KeyError)
    record = storage.get_recurring("r")
    assert (record is not None) == existing
    assert record is None or record.payload == "{}"
