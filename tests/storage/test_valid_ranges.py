"""One documented range for due times, refused the same way at every door (issue 9, item 5).

The same bad inputs go to every entry point that stores a job: ``Client.schedule``,
``Client.schedule_many``, ``Client.reschedule``, the Celery plugin (``task.schedule`` and an
above-threshold ``apply_async``) and the command line, on every storage. Each must be refused with
an error that names the value, and the store must be exactly as before. A row that is already bad
(written before the range was checked, or by hand) must never break ``list``, ``get`` or
``counts``: it is shown, flagged.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from celery import Celery

from parallel_scheduler import Client, InvalidJobError, JobSpec, JobState
from parallel_scheduler.cli import main
from parallel_scheduler.jobs import display_instant
from parallel_scheduler.ranges import MAX_INSTANT, MIN_INSTANT
from storage_adapters import NewJob, Storage, list_jobs
from tests.storage.entry_points import EntryPoints, opened, producer

FAR_ETA = datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-5)))


@dataclass(frozen=True)
class Bad:
    """One bad input: the call's keyword arguments, the CLI's words, and what the error quotes."""

    task: str = "tasks.ok"
    eta: Any = None
    countdown: Any = None
    queue: str | None = None
    cli: tuple[str, ...] = ()
    quoted: tuple[str, ...] = ()  # the error names at least one of these spellings of the value

    @property
    def is_time(self) -> bool:
        return self.eta is not None or self.countdown is not None

    def when(self) -> dict[str, Any]:
        """The due time of the call; a harmless countdown when the bad part is elsewhere."""
        if self.eta is not None:
            return {"eta": self.eta}
        return {"countdown": 60 if self.countdown is None else self.countdown}

    def options(self) -> dict[str, Any]:
        return {} if self.queue is None else {"queue": self.queue}


BAD = {
    "eta far, with an offset": Bad(
        eta=FAR_ETA, cli=("--eta=9999-12-31T23:00:00-05:00",), quoted=("9999-12-31T23:00:00-05:00",)
    ),
    "eta 1e20": Bad(eta=1e20, cli=("--eta=1e20",), quoted=("1e+20", "1e20")),
    "eta -1e12": Bad(eta=-1e12, cli=("--eta=-1e12",), quoted=("-1000000000000.0", "-1e12")),
    "countdown 1e15": Bad(
        countdown=1e15, cli=("--countdown=1e15",), quoted=("1000000000000000.0", "1e15")
    ),
    "countdown 1e300": Bad(countdown=1e300, cli=("--countdown=1e300",), quoted=("1e+300",)),
    "countdown inf": Bad(countdown=math.inf, cli=("--countdown=inf",), quoted=("inf",)),
    "countdown nan": Bad(countdown=math.nan, cli=("--countdown=nan",), quoted=("nan",)),
    "task with a newline": Bad(task="a\nb", quoted=("'a\\nb'",)),
    "empty queue": Bad(queue="", cli=("--queue=",), quoted=("queue ''",)),
}


@dataclass
class Target:
    url: str
    prefix: str
    storage: Storage

    def snapshot(self) -> tuple[dict[JobState, int], list[tuple[str, float]]]:
        """Everything a refused call could have changed: counts, and every job's due time."""
        rows = list_jobs(self.storage, None, 1000)
        return self.storage.count_by_state(), [(r.id, r.due_at) for r in rows]


@pytest.fixture
def target(adapter_kind: str, tmp_path: Path) -> Iterator[Target]:
    yield from opened(Target, adapter_kind, tmp_path)


def _names_the_value(message: str, bad: Bad) -> bool:
    return any(spelling in message for spelling in bad.quoted)


# -- the entry points: each makes one call with ``bad`` and returns the error's text ----------


def _client_schedule(target: Target, bad: Bad) -> str:
    with pytest.raises(InvalidJobError) as error:
        Client(target.storage).schedule(bad.task, [1], **bad.when(), **bad.options())
    return str(error.value)


def _client_schedule_many(target: Target, bad: Bad) -> str:
    good = JobSpec("tasks.ok", countdown=5)
    spec = JobSpec(bad.task, options=bad.options(), **bad.when())
    with pytest.raises(InvalidJobError) as error:
        Client(target.storage).schedule_many([good, spec])  # the good one is not written either
    return str(error.value)


def _client_reschedule(target: Target, bad: Bad) -> str:
    client = Client(target.storage)
    job_id = client.schedule("tasks.ok", countdown=3600).job_id
    before = target.snapshot()
    with pytest.raises(InvalidJobError) as error:
        client.reschedule(job_id, **bad.when())
    assert target.snapshot() == before
    return str(error.value)


def _plugin_task(app: Celery, name: str) -> Any:
    @app.task(name=name, shared=False)  # type: ignore[untyped-decorator]
    def task(*args: Any) -> None:
        raise AssertionError("never runs here")

    return task


def _plugin_schedule(target: Target, bad: Bad) -> str:
    task = _plugin_task(producer("ranges", target), bad.task)
    with pytest.raises(InvalidJobError) as error:
        task.schedule([1], {}, **bad.when(), **bad.options())
    return str(error.value)


def _plugin_apply_async(target: Target, bad: Bad) -> str:
    task = _plugin_task(producer("ranges", target), bad.task)
    with pytest.raises(InvalidJobError) as error:
        task.apply_async([1], **bad.when(), **bad.options())
    return str(error.value)


def _cli(target: Target, bad: Bad, capsys: pytest.CaptureFixture[str]) -> str:
    when = bad.cli if bad.is_time else ("--countdown=60",)
    extra = bad.cli if bad.queue is not None else ()
    argv = ["--storage-url", target.url, "--prefix", target.prefix, "schedule", bad.task]
    capsys.readouterr()
    try:
        code = main([*argv, *when, *extra])
    except SystemExit as exit_info:  # argparse refuses a malformed value itself
        code = int(exit_info.code or 0)
    err = capsys.readouterr().err
    assert code != 0
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1, err
    return errors[0]


def _applies(entry: str, bad: Bad) -> bool:
    """``reschedule`` moves a due time only (no task name or options); Celery defers only a
    datetime eta or a countdown (a float eta is not Celery's; a non-finite countdown is deferred
    so that it is refused by name instead of failing inside Celery)."""
    if entry == "Client.reschedule":
        return bad.is_time
    if entry == "plugin apply_async":
        return not isinstance(bad.eta, float)
    return True


ENTRY_POINTS = EntryPoints(
    {
        "Client.schedule": _client_schedule,
        "Client.schedule_many": _client_schedule_many,
        "Client.reschedule": _client_reschedule,
        "plugin task.schedule": _plugin_schedule,
        "plugin apply_async": _plugin_apply_async,
        "cli schedule": _cli,
    },
    cli=("cli schedule",),
    bad=BAD,
    applies=_applies,
)


@pytest.mark.parametrize(("entry", "case"), ENTRY_POINTS.cases())
def test_every_entry_point_refuses_the_value_by_name_and_writes_nothing(
    target: Target, entry: str, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    refused = ENTRY_POINTS.refuse(entry, case, target, capsys)
    assert _names_the_value(refused.message, refused.bad), refused.message
    if entry != "Client.reschedule":  # which wrote its own job first, and compared itself
        assert refused.after == refused.before


@pytest.mark.parametrize(
    ("when", "expected"),
    [
        ({"eta": datetime(2000, 1, 1, tzinfo=timezone.utc)}, 946684800.0),  # past: due now
        ({"eta": MIN_INSTANT}, MIN_INSTANT),
        ({"eta": MAX_INSTANT}, MAX_INSTANT),
    ],
)
def test_the_ends_of_the_range_are_accepted(
    target: Target, when: dict[str, Any], expected: float
) -> None:
    result = Client(target.storage).schedule("tasks.ok", **when)
    assert result.due_at.timestamp() == expected


@pytest.mark.parametrize(
    "options",
    [
        {"queue": " "},
        {"queue": "q\n"},
        {"queue": " q"},
        {"routing_key": " "},
        {"routing_key": "a\tb"},
        {"exchange": "  "},
        {"exchange": "ex\x00"},
        {"queue": 5},
        {"expires": 1e20},
        {"expires": FAR_ETA},
    ],
)
def test_bad_destinations_and_expiry_are_refused(target: Target, options: dict[str, Any]) -> None:
    before = target.snapshot()
    with pytest.raises(InvalidJobError) as error:
        Client(target.storage).schedule("tasks.ok", countdown=5, **options)
    assert next(iter(options)) in str(error.value)
    assert target.snapshot() == before


def test_the_amqp_default_exchange_and_an_empty_routing_key_are_accepted(target: Target) -> None:
    """Exactly "" means something in AMQP: the nameless default exchange, and the routing key
    of a fanout exchange (which ignores it); only a queue must have a name."""
    client = Client(target.storage)
    result = client.schedule("tasks.ok", countdown=5, exchange="", routing_key="", queue="q")
    job = client.get(result.job_id)
    assert job is not None and job.options == {"exchange": "", "routing_key": "", "queue": "q"}


@pytest.mark.parametrize("task", ["a\tb", "nul\x00", " tasks.x", "tasks.x ", "tasks.\x1b[31m", ""])
def test_task_names_with_control_characters_or_padding_are_refused(
    target: Target, task: str
) -> None:
    with pytest.raises(InvalidJobError, match="task name"):
        Client(target.storage).schedule(task, countdown=5)
    assert sum(target.storage.count_by_state().values()) == 0


# -- rows that are already bad ---------------------------------------------------------------


BAD_ROWS = [
    NewJob("far", "tasks.far", '{"args":[],"kwargs":{},"options":{}}', 1e20),
    NewJob("early", "tasks.early", '{"args":[],"kwargs":{},"options":{}}', -1e12),
    NewJob("unreadable", "tasks.u", "{not json", 100.0),
    NewJob("not-a-dict", "tasks.u", "[1, 2]", 200.0),
]


def test_a_bad_stored_row_is_listed_flagged_and_breaks_nothing(target: Target) -> None:
    client = Client(target.storage)
    good = client.schedule("tasks.good", countdown=60).job_id
    target.storage.add_jobs(BAD_ROWS)  # straight through the storage API, as an old version did

    jobs = {job.id: job for job in client.list()}
    assert set(jobs) == {"far", "early", "unreadable", "not-a-dict", good}
    assert jobs[good].problem is None
    assert jobs["far"].problem is not None and "1e+20" in jobs["far"].problem
    assert jobs["far"].due_at.timestamp() == MAX_INSTANT and jobs["far"].due_at_epoch == 1e20
    assert jobs["early"].problem is not None and "-1000000000000.0" in jobs["early"].problem
    assert jobs["early"].due_at.timestamp() == MIN_INSTANT
    for job_id in ("unreadable", "not-a-dict"):
        assert jobs[job_id].problem is not None and "payload" in jobs[job_id].problem
        assert jobs[job_id].raw_payload == next(r.payload for r in BAD_ROWS if r.id == job_id)
    for job in jobs.values():  # every row renders, in JSON too, and in any time zone
        json.dumps(job.to_dict(), allow_nan=False)
        job.due_at.astimezone(timezone(timedelta(hours=14))).isoformat()
        job.due_at.astimezone(timezone(timedelta(hours=-12))).isoformat()
    far = client.get("far")
    assert far is not None and far.to_dict()["due_at_epoch"] == 1e20
    assert client.counts()["scheduled"] == 5
    assert client.list("scheduled", limit=2)  # paging over them works too
    # ``status`` shows the earliest due time; a bad one is shown as a value, flagged
    assert (
        display_instant(target.storage.next_due_at())
        == "-1000000000000.0 (outside the valid range)"
    )


def test_a_released_bad_row_still_lists(target: Target) -> None:
    """The issue's case: ``list`` failed even after the job was released."""
    target.storage.add_jobs([BAD_ROWS[1]])  # -1e12 is due at once
    lock = target.storage.acquire_lock("delayed-scheduler", "me", 30)
    assert lock is not None
    claims = target.storage.claim_due(10, lock, 30)
    assert [c.id for c in claims] == ["early"]
    assert target.storage.mark_enqueued(claims) == ["early"]
    (job,) = Client(target.storage).list("enqueued")
    assert job.state is JobState.ENQUEUED and job.problem is not None


def _write_by_hand(target: Target, job_id: str) -> None:
    """Put a due time no client could write (NaN, or text) and a NaN creation time into a
    stored row, straight through the server's own client, as a broken tool might."""
    if target.url.startswith("redis"):
        import redis

        with redis.Redis.from_url(target.url) as server:
            key = f"{{{target.prefix}}}:job:{job_id}"
            assert server.hset(key, mapping={"due_at": "garbage", "created_at": "nan"}) == 0
        return
    import sqlalchemy as sa

    url = target.url.replace("postgresql://", "postgresql+psycopg://", 1)
    due_at = "'garbage'" if url.startswith("sqlite") else "'NaN'"  # SQLite keeps text as text
    created_at = "'NaN'" if url.startswith("postgresql") else "'not a time'"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        changed = conn.exec_driver_sql(
            f"UPDATE {target.prefix}_jobs SET due_at = {due_at}, created_at = {created_at} "
            f"WHERE id = '{job_id}'"
        ).rowcount
    engine.dispose()
    assert changed == 1


def test_a_row_edited_by_hand_is_listed_flagged(target: Target) -> None:
    client = Client(target.storage)
    client.schedule("tasks.ok", countdown=60, job_id="edited")
    _write_by_hand(target, "edited")
    (job,) = client.list()
    assert (
        job.problem is not None and "due_at nan" in job.problem and "created_at nan" in job.problem
    )
    assert math.isnan(job.due_at_epoch or 0.0)
    assert json.loads(json.dumps(job.to_dict(), allow_nan=False))["due_at_epoch"] == "nan"
    got = client.get("edited")
    assert got is not None and got.problem == job.problem
    assert client.counts()["scheduled"] == 1


def test_display_instant_never_fails() -> None:
    assert display_instant(None) == "-"
    assert display_instant(0.0) == "1970-01-01T00:00:00+00:00"
    assert display_instant(math.nan) == "nan (outside the valid range)"
    assert display_instant(math.inf) == "inf (outside the valid range)"
    assert display_instant(1e300) == "1e+300 (outside the valid range)"


@pytest.mark.parametrize("expires", [1e300, math.nan, -1e300])
def test_plugin_apply_async_refuses_an_expiry_past_any_date_by_name(
    target: Target, expires: float
) -> None:
    """A relative ``expires`` is made absolute at call time; one past any date used to fail
    there with a bare OverflowError before the job model could name it."""
    before = target.snapshot()
    task = _plugin_task(producer("ranges", target), "tasks.ok")
    with pytest.raises(InvalidJobError) as error:
        task.apply_async([1], countdown=120, expires=expires)
    assert "expires" in str(error.value)
    assert target.snapshot() == before
