"""``import-django-celery-beat`` against real django-celery-beat rows on SQLite and PostgreSQL.

The oracle for every imported schedule is django-celery-beat's own schedule object
(``PeriodicTask.schedule``: a Celery ``crontab`` with its zone, or a Celery ``schedule``), walked
forward from a fixed instant with Celery's own arithmetic (``remaining_delta`` /
``remaining_estimate``); the ten ticks it names must be the ten ticks our stored job fires
(``triggers.next_tick``, what the scheduler plans with).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.test import override_settings

from parallel_scheduler.client import Client
from parallel_scheduler.contrib.django import conf
from parallel_scheduler.contrib.django.beat_import_command import run
from parallel_scheduler.recurring.triggers import next_tick

UTC = timezone.utc
#: The fixed instant every walk starts from (before the 2026 spring-forward in Europe/Berlin
#: and America/New_York, so ten ticks of a daily or hourly crontab cross it).
START = datetime(2026, 3, 5, 12, 0, tzinfo=UTC)


@pytest.fixture(params=["default", "postgresql"])
def database(request: pytest.FixtureRequest, django_db: tuple[str, ...]) -> Iterator[str]:
    """A Django database alias, its django-celery-beat tables emptied after the test."""
    from django_celery_beat import models

    alias = str(request.param)
    yield alias
    for model in (
        models.PeriodicTask,
        models.CrontabSchedule,
        models.IntervalSchedule,
        models.ClockedSchedule,
        models.SolarSchedule,
    ):
        model.objects.using(alias).all().delete()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Client]:
    """A fresh scheduler store for this test, as ``conf.get_client()`` gives it."""
    with override_settings(PARALLEL_SCHEDULER={"storage_url": f"sqlite:///{tmp_path}/s.db"}):
        conf.reset()
        client = conf.get_client()
        client.setup()
        yield client
        conf.reset()


def command(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = run(list(argv), out, err)
    return status, out.getvalue(), err.getvalue()


def crontab(alias: str, zone: str = "UTC", **fields: str) -> Any:
    from django_celery_beat.models import CrontabSchedule

    return CrontabSchedule.objects.using(alias).create(timezone=ZoneInfo(zone), **fields)


def periodic(alias: str, name: str, **fields: Any) -> Any:
    from django_celery_beat.models import PeriodicTask

    fields.setdefault("task", "proj.tasks.work")
    task = PeriodicTask(name=name, **fields)
    task.save(using=alias)
    return task


def celery_ticks(beat_schedule: Any, start: datetime, count: int = 10) -> list[float]:
    """The next ``count`` instants Celery's own schedule object names after ``start``, each
    from the one before (as beat walks after an on-time run)."""
    ticks: list[float] = []
    moment = start
    for _ in range(count):
        beat_schedule.nowfun = lambda moment=moment: moment
        if hasattr(beat_schedule, "remaining_delta"):
            last, delta, _now = beat_schedule.remaining_delta(moment)
            moment = last + delta
        else:
            moment = moment + beat_schedule.remaining_estimate(moment)
        ticks.append(moment.timestamp())
    return ticks


def our_ticks(client: Client, recurring_id: str, start: datetime, count: int = 10) -> list[float]:
    job = client.recurring.get(recurring_id)
    assert job is not None and job.problem is None
    ticks: list[float] = []
    moment = start.timestamp()
    for _ in range(count):
        tick = next_tick(job.schedule, moment)
        assert tick is not None
        ticks.append(tick)
        moment = tick
    return ticks


def shown(ticks: list[float]) -> list[str]:
    return [datetime.fromtimestamp(t, UTC).isoformat() for t in ticks]


CRONTABS = [
    # (zone, fields): DST in both directions, day-of-week numbering, steps, ranges, lists
    ("Europe/Berlin", {"minute": "0", "hour": "2"}),  # 02:00 is the gap's first minute
    ("Europe/Berlin", {"minute": "30", "hour": "1,3"}),
    ("Europe/Berlin", {"minute": "0", "hour": "*"}),
    ("America/New_York", {"minute": "*/15", "hour": "9-17", "day_of_week": "1-5"}),
    ("America/New_York", {"minute": "45", "hour": "3", "day_of_week": "0,6"}),
    ("America/New_York", {"minute": "0", "hour": "*/6", "day_of_week": "sun,wed"}),
    ("Europe/Berlin", {"minute": "5", "hour": "0", "day_of_month": "1,15,28-31"}),
    ("UTC", {"minute": "10", "hour": "4", "month_of_year": "*/4", "day_of_month": "1"}),
    ("Australia/Sydney", {"minute": "0", "hour": "2,3", "day_of_week": "0"}),
]


@pytest.mark.parametrize(("zone", "fields"), CRONTABS)
def test_crontab_ticks_match_django_celery_beat(
    database: str, store: Client, zone: str, fields: dict[str, str]
) -> None:
    # Given a crontab PeriodicTask
    task = periodic(database, "cron-task", crontab=crontab(database, zone, **fields))
    # When it is imported
    status, out, err = command("--database", database)
    # Then our ten ticks are Celery's ten, in every zone and across DST
    assert (status, err) == (0, ""), out
    for start in (START, datetime(2026, 10, 20, tzinfo=UTC)):
        assert shown(our_ticks(store, "cron-task", start)) == shown(
            celery_ticks(task.schedule, start.astimezone(ZoneInfo(zone)))
        )


@pytest.mark.parametrize(
    ("every", "period"),
    [(90, "seconds"), (7, "minutes"), (5, "hours"), (2, "days"), (1500000, "microseconds")],
)
def test_interval_ticks_match_django_celery_beat(
    database: str, store: Client, every: int, period: str
) -> None:
    from django_celery_beat.models import IntervalSchedule

    # Given an interval PeriodicTask that last ran at a known instant
    interval = IntervalSchedule.objects.using(database).create(every=every, period=period)
    last = datetime(2026, 3, 28, 23, 59, 1, tzinfo=UTC)
    task = periodic(database, "interval-task", interval=interval, last_run_at=last)
    # When it is imported
    status, out, _ = command("--database", database)
    # Then it ticks where beat would, from its last run
    assert status == 0, out
    assert shown(our_ticks(store, "interval-task", last)) == shown(
        celery_ticks(task.schedule, last)
    )


def test_options_and_fields_are_kept(database: str, store: Client) -> None:
    # Given a task with every option django-celery-beat sends
    expires = datetime(2031, 1, 1, tzinfo=UTC)
    start = datetime(2027, 1, 1, tzinfo=UTC)
    periodic(
        database,
        "full",
        task="proj.tasks.report",
        crontab=crontab(database, "Europe/Berlin", minute="0", hour="6"),
        args=json.dumps([1, "two"]),
        kwargs=json.dumps({"k": [3]}),
        queue="reports",
        exchange="ex",
        routing_key="rk",
        priority=7,
        headers=json.dumps({"h": "v"}),
        expires=expires,
        start_time=start,
        enabled=False,
    )
    # When it is imported
    assert command("--database", database)[0] == 0
    # Then the recurring job carries them all, paused
    job = store.recurring.get("full")
    assert job is not None
    assert (job.task, job.args, job.kwargs) == ("proj.tasks.report", [1, "two"], {"k": [3]})
    assert job.options["queue"] == "reports"
    assert (job.options["exchange"], job.options["routing_key"]) == ("ex", "rk")
    assert job.options["priority"] == 7
    assert job.options["headers"] == {"h": "v", "periodic_task_name": "full"}
    assert job.options["expires"] == expires.timestamp()
    assert (job.schedule.cron, job.schedule.timezone) == ("0 6 * * *", "Europe/Berlin")
    assert job.schedule.start_at == start.timestamp()
    assert job.schedule.end_at is not None and job.schedule.end_at < expires.timestamp()
    assert job.enabled is False


def test_clocked_becomes_one_delayed_job(database: str, store: Client) -> None:
    from django_celery_beat.models import ClockedSchedule

    # Given a clocked one-off task
    at = datetime(2030, 5, 1, 8, 30, tzinfo=UTC)
    clocked = ClockedSchedule.objects.using(database).create(clocked_time=at)
    periodic(database, "once", clocked=clocked, one_off=True, queue="q1")
    # When it is imported twice
    first = command("--database", database)
    second = command("--database", database)
    # Then one delayed job waits for that instant, created once
    assert first[0] == 0 and second[0] == 0
    job = store.get("once")
    assert job is not None and job.due_at == at and job.options["queue"] == "q1"
    assert "create" in first[1] and "unchanged" in second[1]
    assert store.counts().get("scheduled") == 1


def test_solar_and_inexact_are_refused_and_listed(database: str, store: Client) -> None:
    from django_celery_beat.models import IntervalSchedule, SolarSchedule

    # Given a solar task, a crontab restricting both days, one in a DST gap, expire_seconds,
    # and one good task
    solar = SolarSchedule.objects.using(database).create(
        event="sunrise", latitude="52.52", longitude="13.40"
    )
    periodic(database, "sun", solar=solar)
    periodic(database, "both-days", crontab=crontab(database, day_of_month="1-7", day_of_week="1"))
    periodic(database, "in-gap", crontab=crontab(database, "Europe/Berlin", minute="30", hour="2"))
    every = IntervalSchedule.objects.using(database).create(every=10, period="minutes")
    periodic(database, "relative-expiry", interval=every, expire_seconds=30)
    periodic(database, "good", interval=every)
    # When it is imported
    status, out, _ = command("--database", database)
    # Then exit status 1, each refusal listed with its reason, and only the good one written
    assert status == 1
    lines = {line.split()[0]: line for line in out.splitlines()[1:] if line.strip()}
    assert "refused: solar schedule" in lines["sun"]
    assert "both restricted" in lines["both-days"]
    assert "spring-forward gap of Europe/Berlin" in lines["in-gap"]
    assert "expire_seconds=30" in lines["relative-expiry"]
    assert "create" in lines["good"]
    assert [job.id for job in store.recurring.list()] == ["good"]


def test_dry_run_writes_nothing_and_prints_the_table(database: str, store: Client) -> None:
    every = crontab(database, minute="*/5")
    periodic(database, "five", crontab=every, queue="fast")
    # When a dry run is made
    status, out, _ = command("--dry-run", "--database", database)
    # Then the table shows the plan, and nothing was written anywhere
    assert status == 0
    header, row = out.splitlines()[:2]
    assert header.split() == ["NAME", "ID", "TASK", "SCHEDULE", "ZONE", "QUEUE", "ACTION"]
    assert row.split() == [
        "five",
        "five",
        "proj.tasks.work",
        "0,5,10,15,20,25,30,35,40,45,50,55",
        "*",
        "*",
        "*",
        "*",
        "UTC",
        "fast",
        "create",
    ]
    assert "nothing written" in out
    assert store.recurring.list() == []


def test_twice_nothing_doubles(database: str, store: Client) -> None:
    periodic(database, "a", crontab=crontab(database, minute="1"))
    periodic(database, "b name with spaces", crontab=crontab(database, minute="2"))
    # When imported twice
    assert command("--database", database)[0] == 0
    status, out, _ = command("--database", database)
    # Then the second run changes nothing; the unsafe name is mapped and shown
    assert status == 0 and "imported 2 unchanged" in out
    ids = [job.id for job in store.recurring.list()]
    assert len(ids) == 2 and "a" in ids
    mapped = next(i for i in ids if i != "a")
    assert mapped.startswith("b_name_with_spaces-") and mapped in out


def test_disable_source_disables_exactly_the_imported(database: str, store: Client) -> None:
    from django_celery_beat.models import PeriodicTask, PeriodicTasks, SolarSchedule

    solar = SolarSchedule.objects.using(database).create(
        event="sunset", latitude="40.7", longitude="-74.0"
    )
    periodic(database, "kept", crontab=crontab(database, minute="3"))
    periodic(database, "sun", solar=solar)
    marker = PeriodicTasks.objects.using(database).filter(ident=1).first()
    before = marker.last_update if marker else datetime(2000, 1, 1, tzinfo=UTC)
    # When imported with --disable-source
    status, _, _ = command("--disable-source", "--database", database)
    # Then the imported task is disabled at the source, the refused one is not, and beat is told
    assert status == 1
    enabled = dict(PeriodicTask.objects.using(database).values_list("name", "enabled"))
    assert enabled == {"kept": False, "sun": True}
    assert PeriodicTasks.objects.using(database).get(ident=1).last_update > before
    assert [job.id for job in store.recurring.list()] == ["kept"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--database"], "argument --database: expected one argument"),
        (["--database", "nope"], "no Django database 'nope'"),
    ],
)
def test_bad_option_exits_2_with_one_line(
    database: str, store: Client, argv: list[str], message: str
) -> None:
    periodic(database, "x", crontab=crontab(database, minute="4"))
    status, out, err = command(*argv)
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and message in err
    assert err.startswith("manage.py parallel_scheduler import-django-celery-beat: error:")
    assert store.recurring.list() == []


def test_one_off_crontab_becomes_one_delayed_job_at_its_next_tick(
    database: str, store: Client
) -> None:
    task = periodic(database, "one", crontab=crontab(database, minute="0", hour="3"), one_off=True)
    assert command("--database", database)[0] == 0
    job = store.get("one")
    now = datetime.now(UTC)
    expected = celery_ticks(task.schedule, now, 1)[0]
    assert job is not None and job.due_at.timestamp() == expected
    assert store.recurring.list() == []


def test_help_lists_the_options_and_exits_0() -> None:
    import io

    from parallel_scheduler.contrib.django.beat_import_command import run

    out, err = io.StringIO(), io.StringIO()
    assert run(["--help"], out, err) == 0
    assert "--disable-source" in out.getvalue() and "--dry-run" in out.getvalue()
    assert err.getvalue() == ""
