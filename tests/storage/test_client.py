"""The client API over every adapter: schedule, idempotency, cancel, reschedule, get, list."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parallel_scheduler import Client, InvalidJobError, JobSpec, JobState
from storage_adapters import NewJob, Storage

bad_input = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def total(storage: Storage) -> int:
    return sum(storage.count_by_state().values())


def test_schedule_with_countdown_and_read_back(storage: Storage) -> None:
    client = Client(storage)
    before = storage.now()
    result = client.schedule("tasks.add", [1, 2], {"x": "ü"}, countdown=60, queue="math")
    assert result.created
    job = client.get(result.job_id)
    assert job is not None
    assert (job.task, job.args, job.kwargs, job.options) == (
        "tasks.add", [1, 2], {"x": "ü"}, {"queue": "math"},
    )  # fmt: skip
    assert job.state is JobState.SCHEDULED
    assert before + 59 <= job.due_at.timestamp() <= storage.now() + 61
    assert job.due_at.tzinfo is not None


def test_an_eta_in_the_past_means_due_now(storage: Storage) -> None:
    client = Client(storage)
    result = client.schedule("tasks.x", eta=datetime(2000, 1, 1, tzinfo=timezone.utc))
    assert storage.fetch_due_ids(10) == [result.job_id]


def test_scheduling_an_existing_id_changes_nothing_and_says_so(storage: Storage) -> None:
    client = Client(storage)
    first = client.schedule("tasks.a", [1], job_id="invoice-42", countdown=60)
    again = client.schedule("tasks.b", [2], job_id="invoice-42", countdown=1)
    assert (first.created, again.created) == (True, False)
    job = client.get("invoice-42")
    assert job is not None and (job.task, job.args) == ("tasks.a", [1])
    # The result reports the due time storage holds, not the one this call asked for.
    assert again.due_at == first.due_at == job.due_at


def test_cancel_and_reschedule(storage: Storage) -> None:
    client = Client(storage)
    a = client.schedule("tasks.a", countdown=3600).job_id
    b = client.schedule("tasks.b", countdown=3600).job_id
    # a due time in the past, not countdown=0: "now" from the client's clock estimate may be a
    # few milliseconds ahead of the server's (half a round trip at most), which is correct
    assert client.reschedule(a, eta=datetime(2000, 1, 1, tzinfo=timezone.utc))
    assert storage.fetch_due_ids(10) == [a]
    assert client.cancel(b)
    assert not client.cancel(b)
    job = client.get(b)
    assert job is not None and job.state is JobState.CANCELLED
    assert client.counts()["cancelled"] == 1


def test_list_by_state_name(storage: Storage) -> None:
    client = Client(storage)
    ids = [r.job_id for r in client.schedule_many([JobSpec("t", countdown=i) for i in range(5)])]
    assert [j.id for j in client.list("scheduled", limit=3)] == ids[:3]
    with pytest.raises(InvalidJobError, match="unknown state"):
        client.list("lost")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (JobSpec(""), "task name"),
        (JobSpec(123), "task name"),  # type: ignore[arg-type]
        (JobSpec("t", args="abc"), "args"),
        (JobSpec("t", kwargs=[1]), "kwargs"),  # type: ignore[arg-type]
        (JobSpec("t", args=[object()]), "not JSON"),
        (JobSpec("t", args=[math.nan]), "not JSON"),
        (JobSpec("t", countdown=math.nan), "countdown"),
        (JobSpec("t", countdown=math.inf), "countdown"),
        (JobSpec("t", countdown=-1), "countdown"),
        (JobSpec("t", eta=datetime(2030, 1, 1)), "no time zone"),
        (JobSpec("t", eta=1.0, countdown=1.0), "not both"),
        (JobSpec("t", id="x" * 201), "200"),
        (JobSpec("t", id="has space"), "whitespace"),
        (JobSpec("t", options={"colour": "red"}), "unknown option"),
        (JobSpec("t", options={"priority": 999}), "priority"),
        (JobSpec("t", args=["x" * 600_000]), "limit"),
    ],
)
def test_bad_input_is_refused_and_nothing_is_written(
    storage: Storage, spec: JobSpec, message: str
) -> None:
    client = Client(storage)
    with pytest.raises(InvalidJobError, match=message):
        client.schedule_many([JobSpec("tasks.ok"), spec])
    assert total(storage) == 0


def test_duplicate_ids_in_one_call_are_refused(storage: Storage) -> None:
    with pytest.raises(InvalidJobError, match="twice"):
        Client(storage).schedule_many([JobSpec("t", id="a"), JobSpec("t", id="a")])
    assert total(storage) == 0


@bad_input
@given(
    countdown=st.one_of(
        st.floats(max_value=-1e-9), st.just(math.nan), st.just(math.inf), st.text(), st.none()
    ),
    job_id=st.one_of(st.text(max_size=300), st.none()),
    args=st.one_of(st.lists(st.integers(), max_size=3), st.text(max_size=5), st.integers()),
)
def test_fuzzed_input_is_either_stored_or_refused_cleanly(
    storage: Storage, countdown: object, job_id: str | None, args: object
) -> None:
    client = Client(storage)
    before = total(storage)
    spec = JobSpec("tasks.fuzz", args=args, id=job_id, countdown=countdown)  # type: ignore[arg-type]
    try:
        result = client.schedule_many([spec])
    except InvalidJobError:
        assert total(storage) == before
    else:
        assert total(storage) == before + (1 if result[0].created else 0)


def test_reschedule_needs_a_time(storage: Storage) -> None:
    with pytest.raises(InvalidJobError, match="eta or countdown"):
        Client(storage).reschedule("x")


def test_countdown_accepts_timedelta(storage: Storage) -> None:
    result = Client(storage).schedule("t", countdown=timedelta(minutes=2))
    assert result.due_at.timestamp() == pytest.approx(storage.now() + 120, abs=5)


class _QueueByTask:
    """An ``EnvelopeMaker`` that builds a message for some tasks only, as a real one may."""

    def envelope(self, job: NewJob) -> str | None:
        return None if job.task == "tasks.slow" else f"{job.task}\nmessage for {job.id}"


def test_envelopes_are_built_at_accept_and_come_back_with_the_claim(storage: Storage) -> None:
    client = Client(storage, envelopes=_QueueByTask())
    past = datetime(2000, 1, 1, tzinfo=timezone.utc)
    fast = client.schedule("tasks.fast", eta=past, job_id="f").job_id
    slow = client.schedule("tasks.slow", eta=past + timedelta(seconds=1), job_id="s").job_id
    lock = storage.acquire_lock("delayed-scheduler", "me", 30)
    assert lock is not None
    claims = storage.claim_due(10, lock, 30)
    assert [(c.id, c.envelope) for c in claims] == [
        (fast, "tasks.fast\nmessage for f"),
        (slow, None),
    ]


def test_a_job_spec_takes_only_its_task_by_position() -> None:
    # Given the arguments of a job in the order of its fields
    # When they are passed by position, Then the constructor refuses: each must be named
    with pytest.raises(TypeError, match="positional"):
        JobSpec("t", [1], {"n": 1}, {}, "an-id")  # type: ignore[call-arg]
    spec = JobSpec("t", args=[1], kwargs={"n": 1}, id="an-id")
    assert (spec.task, spec.args, spec.kwargs, spec.id) == ("t", [1], {"n": 1}, "an-id")
