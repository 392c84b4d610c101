"""Calendars of excluded dates (issue 25, §5) through the real firing path on every adapter: a
recurring job whose due time is set back to 1 March 2026 fires, in one scheduler pass under
``run_all``, exactly the ticks a brute-force oracle lists (every minute of local wall time in
Europe/Berlin matched against the cron fields by hand, through the March and October DST
changes, by the documented DST rules), minus those whose local date *in each calendar's own
zone* is excluded. Never croniter, never the code under test. Also: the saving door refuses a
calendar that does not exist; a calendar removed later excludes nothing, with a warning; bad
input is refused by the client, the command line and the API alike, writing nothing."""

from __future__ import annotations

import json
import logging
from datetime import date, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from parallel_scheduler import CallableDispatcher, Client, InvalidJobError, Settings
from parallel_scheduler.cli import main
from parallel_scheduler.dashboard import create_app
from parallel_scheduler.opening_storage import open_storage
from parallel_scheduler.process.service import SchedulerService
from storage_adapters import InvalidArgumentError, JobState, Storage, list_jobs
from tests.conftest import storage_url, unique_prefix
from tests.dashboard.conftest import csrf_token
from tests.recording_dispatcher import Recorder
from tests.scheduler.test_recurring import run_pass
from tests.storage.entry_points import Store, opened

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
START = datetime(2026, 3, 1, tzinfo=timezone.utc).timestamp()
#: Berlin dates, and New York dates (a Berlin 02:30 tick is the evening before in New York)
HOLIDAYS = ["2026-03-30", "2026-04-03..2026-04-06", "2026-05-01", "2026-10-26"]
US_DAYS = ["2026-07-03", "2026-10-31", "2026-11-26"]


def _matches(wall: datetime, minute: int, hour: int, weekdays: set[int] | None) -> bool:
    """A cron ``M H * * D`` matched on a wall time by hand (cron weekdays: 0 = Sunday)."""
    cron_weekday = (wall.weekday() + 1) % 7
    return (
        wall.minute == minute
        and wall.hour == hour
        and (weekdays is None or cron_weekday in weekdays)
    )


def _instant(wall: datetime) -> float:
    """Where a wall time fires (``triggers.py``'s rules, found by brute force): its first
    occurrence, or for a wall time in a spring-forward gap the first minute after the gap."""
    for fold in (0, 1):
        aware = wall.replace(tzinfo=BERLIN, fold=fold)
        back = datetime.fromtimestamp(aware.timestamp(), BERLIN).replace(tzinfo=None)
        if back == wall:
            return min(
                w.timestamp()
                for w in (wall.replace(tzinfo=BERLIN, fold=0), wall.replace(tzinfo=BERLIN, fold=1))
                if datetime.fromtimestamp(w.timestamp(), BERLIN).replace(tzinfo=None) == wall
            )
    moment = wall.replace(tzinfo=BERLIN, fold=1).timestamp()  # an instant before the gap
    while datetime.fromtimestamp(moment, BERLIN).replace(tzinfo=None) < wall:
        moment += 60
    return moment


def _dates(words: list[str]) -> set[date]:
    found: set[date] = set()
    for word in words:
        first, _, last = word.partition("..")
        day, end = date.fromisoformat(first), date.fromisoformat(last or first)
        while day <= end:
            found.add(day)
            day += timedelta(days=1)
    return found


def oracle(
    minute: int,
    hour: int,
    weekdays: set[int] | None,
    low: float,
    high: float,
    exclude: bool = True,
) -> list[float]:
    """Every tick in ``[low, high]`` by brute force, minus (``exclude``) the excluded local
    dates."""
    berlin_days, us_days = _dates(HOLIDAYS), _dates(US_DAYS)
    wall = datetime.fromtimestamp(low, BERLIN).replace(tzinfo=None, second=0, microsecond=0)
    wall -= timedelta(hours=3)
    last = datetime.fromtimestamp(high, BERLIN).replace(tzinfo=None) + timedelta(hours=3)
    ticks: set[float] = set()
    while wall <= last:
        if _matches(wall, minute, hour, weekdays):
            ticks.add(_instant(wall))
        wall += timedelta(minutes=1)
    return sorted(
        t
        for t in ticks
        if low <= t <= high
        and not (
            exclude
            and (
                datetime.fromtimestamp(t, BERLIN).date() in berlin_days
                or datetime.fromtimestamp(t, NEW_YORK).date() in us_days
            )
        )
    )


@pytest.mark.parametrize(
    ("cron", "minute", "hour", "weekdays"),
    [("30 2 * * *", 30, 2, None), ("0 9 * * 1-5", 0, 9, {1, 2, 3, 4, 5})],
)
def test_fired_ticks_are_the_oracles_minus_the_excluded_dates(
    storage: Storage, cron: str, minute: int, hour: int, weekdays: set[int] | None
) -> None:
    # Given two calendars in two zones, and a job excluding both, due since 1 March 2026
    client = Client(storage)
    client.put_calendar("holidays-de", HOLIDAYS, timezone="Europe/Berlin")
    client.put_calendar("us-days", US_DAYS, timezone="America/New_York")
    client.recurring.save(
        "job", "t.job", cron, timezone="Europe/Berlin", misfire_policy="run_all",
        misfire_cap=10_000, exclude=["holidays-de", "us-days"],
    )  # fmt: skip
    assert storage.set_recurring_enabled("job", True, START)
    # When one scheduler pass runs
    before = storage.now()
    stats = run_pass(storage)
    after = storage.now()
    # Then it fired the oracle's ticks, and counted no excluded tick as missed
    fired = sorted(job.due_at for job in list_jobs(storage, None, 1000))
    assert fired in (oracle(minute, hour, weekdays, START, before),
                     oracle(minute, hour, weekdays, START, after))  # fmt: skip
    assert stats.missed == len(fired)  # every tick fired was a missed one; no excluded one
    # And the next run is the next tick not excluded
    saved = client.recurring.get("job")
    assert saved is not None and saved.next_run_at is not None
    upcoming = oracle(minute, hour, weekdays, after, after + 40 * 86_400)
    assert saved.next_run_at.timestamp() == upcoming[0]


def test_the_next_run_at_save_skips_excluded_dates(storage: Storage) -> None:
    client = Client(storage)
    now = datetime.fromtimestamp(storage.now(), BERLIN)
    days = [(now.date() + timedelta(days=k)).isoformat() for k in range(0, 4)]
    client.put_calendar("soon", days, timezone="Europe/Berlin")
    job = client.recurring.save(
        "d", "t.d", "0 12 * * *", timezone="Europe/Berlin", exclude=["soon"]
    )
    assert job.next_run_at is not None
    assert job.next_run_at.astimezone(BERLIN).date() == now.date() + timedelta(days=4)
    assert client.recurring.get("d").to_dict()["exclude"] == ["soon"]  # type: ignore[union-attr]


def test_a_missing_calendar_is_refused_at_save_and_ignored_once_removed(
    storage: Storage, caplog: pytest.LogCaptureFixture
) -> None:
    client = Client(storage)
    with pytest.raises(InvalidJobError, match="no calendar named 'nope'"):
        client.recurring.save("r", "t.r", "0 * * * *", exclude=["nope"])
    with pytest.raises(InvalidJobError, match="no calendar named 'nope'"):
        client.recurring.save_many([{"id": "r", "task": "t.r", "every": 60, "exclude": ["nope"]}])
    assert storage.count_recurring() == 0
    # A calendar excluding every day of 2026, then removed: the job fires as if it were empty
    client.put_calendar("all-year", ["2026-01-01..2026-12-31"])
    client.recurring.save("r", "t.r", "0 * * * *", misfire_policy="run_all", exclude=["all-year"])
    assert client.remove_calendar("all-year") is True
    hour = (storage.now() // 3600) * 3600
    assert storage.set_recurring_enabled("r", True, hour - 2 * 3600)
    with caplog.at_level(logging.WARNING):
        run_pass(storage)
    assert (
        len(list_jobs(storage, JobState.SCHEDULED, 100)) + len(list_jobs(storage, None, 100)) >= 3
    )
    assert "all-year" in caplog.text and "do not exist" in caplog.text
    assert client.recurring.get("r") is not None


def test_bad_calendars_are_refused_by_the_client(storage: Storage) -> None:
    client = Client(storage)
    for dates, zone, words in (
        (["2026-13-01"], "UTC", "ISO date"),
        (["2026-12-26..2026-12-25"], "UTC", "ends before"),
        (["2026-12-25"], "Nowhere/City", "time zone"),
    ):
        with pytest.raises(InvalidArgumentError, match=words):
            client.put_calendar("bad", dates, timezone=zone)
    with pytest.raises(InvalidArgumentError, match="calendar name"):
        client.put_calendar("has space", ["2026-12-25"])
    assert client.calendars() == []


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--dates", "2026-12-32"], "ISO date"),
        (["--range", "2026-12-26..2026-12-25"], "ends before"),
        (["--dates", "2026-12-25", "--timezone", "Nowhere/City"], "time zone"),
    ],
)
def test_the_command_line_refuses_bad_calendars(
    adapter_kind: str,
    tmp_path: Any,
    args: list[str],
    words: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for target in opened(Store, adapter_kind, tmp_path):
        capsys.readouterr()
        code = main(["--storage-url", target.url, "--prefix", target.prefix,
                     "calendar", "add", "bad", *args])  # fmt: skip
        err = capsys.readouterr().err
        assert code == 2 and "Traceback" not in err and words in err, err
        assert target.storage.list_calendars() == []


def test_the_command_line_adds_imports_lists_and_removes(
    adapter_kind: str, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    ics = tmp_path / "h.ics"
    ics.write_text(
        "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20261225\r\n"
        "DTEND;VALUE=DATE:20261227\r\nSUMMARY:Christmas\r\nEND:VEVENT\r\nBEGIN:VEVENT\r\n"
        "DTSTART;TZID=Europe/Berlin:20260501T100000\r\nDTEND;TZID=Europe/Berlin:2026050\r\n"
        " 1T120000\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
    )
    for target in opened(Store, adapter_kind, tmp_path):
        base = ["--storage-url", target.url, "--prefix", target.prefix]
        assert (
            main(
                [
                    *base,
                    "calendar",
                    "add",
                    "de",
                    "--dates",
                    "2026-12-25,2026-12-26",
                    "--range",
                    "2026-12-30..2026-12-31",
                    "--timezone",
                    "Europe/Berlin",
                ]
            )
            == 0
        )
        assert main([*base, "calendar", "import", "ics", str(ics),
                     "--timezone", "Europe/Berlin"]) == 0  # fmt: skip
        assert main([*base, "recurring", "add", "r", "t.r", "--cron", "0 9 * * *",
                     "--exclude", "de,ics"]) == 0  # fmt: skip
        capsys.readouterr()
        assert main([*base, "calendar", "list", "--json"]) == 0
        views = {v["name"]: v for v in json.loads(capsys.readouterr().out)}
        assert views["de"]["ranges"] == [["2026-12-25", "2026-12-26"], ["2026-12-30", "2026-12-31"]]
        assert views["ics"]["ranges"] == [
            ["2026-05-01", "2026-05-01"],
            ["2026-12-25", "2026-12-26"],
        ]
        assert main([*base, "recurring", "list", "--json"]) == 0
        listed = json.loads(capsys.readouterr().out)
        assert listed[0]["exclude"] == ["de", "ics"]
        assert main([*base, "calendar", "remove", "de"]) == 0
        assert "1 recurring job(s) still name it" in capsys.readouterr().out
        assert [c.name for c in target.storage.list_calendars()] == ["ics"]


def test_the_api_keeps_calendars_with_the_same_refusals(storage: Storage) -> None:
    app = create_app(Client(storage))
    app.testing = True
    web = app.test_client()
    auth = {"Authorization": "Bearer x"}
    bad = web.put("/api/v1/calendars/bad", json={"dates": ["2026-12-32"]}, headers=auth)
    assert bad.status_code == 400 and "ISO date" in bad.get_json()["error"]["message"]
    assert storage.list_calendars() == []
    body = {"dates": ["2026-12-25", "2026-12-24..2026-12-26"], "timezone": "Europe/Berlin"}
    put = web.put("/api/v1/calendars/de", json=body, headers=auth)
    assert put.status_code == 200, put.get_json()
    assert put.get_json()["ranges"] == [["2026-12-24", "2026-12-26"]]
    listed = web.get("/api/v1/calendars", headers=auth).get_json()
    assert [c["name"] for c in listed["calendars"]] == ["de"]
    made = web.post(
        "/api/v1/recurring",
        json={"id": "r", "task": "t.r", "cron": "0 9 * * *", "exclude": ["de"]},
        headers=auth,
    )
    assert made.status_code in (200, 201), made.get_json()
    assert web.get("/api/v1/recurring/r", headers=auth).get_json()["exclude"] == ["de"]
    missing = web.post(
        "/api/v1/recurring",
        json={"id": "q", "task": "t.r", "cron": "0 9 * * *", "exclude": ["nope"]},
        headers=auth,
    )
    assert missing.status_code == 400 and "no calendar" in missing.get_json()["error"]["message"]
    assert web.delete("/api/v1/calendars/de", headers=auth).status_code == 200
    assert storage.list_calendars() == []


def test_the_dashboard_form_creates_shows_and_edits_the_excluded_calendars(
    storage: Storage,
) -> None:
    client = Client(storage)
    client.put_calendar("de", ["2026-12-25"], timezone="Europe/Berlin")
    client.put_calendar("fr", ["2026-07-14"], timezone="Europe/Paris")
    app = create_app(client)
    app.testing = True
    web = app.test_client()
    form = {"csrf_token": csrf_token(web, "/recurring/new"), "id": "r", "task": "t.r",
            "cron": "0 9 * * *", "exclude": "de, nope", "confirm": "yes"}  # fmt: skip
    refused = web.post("/recurring/new", data=form)
    text = refused.get_data(as_text=True)
    assert refused.status_code == 400 and "no calendar named" in text and "nope" in text
    assert storage.count_recurring() == 0
    assert web.post("/recurring/new", data={**form, "exclude": "de"}).status_code in (302, 303)
    page = web.get("/recurring/edit?id=r").get_data(as_text=True)
    assert 'id="recurring-exclude"' in page and "de" in page
    edit = {"id": "r", "confirm": "yes", "csrf_token": csrf_token(web, "/recurring/edit?id=r"),
            "timezone": "UTC", "cron": "0 9 * * *", "exclude": "de,fr"}  # fmt: skip
    assert web.post("/recurring/edit", data=edit).status_code == 303
    saved = client.recurring.get("r")
    assert saved is not None and saved.schedule.exclude == ("de", "fr")


def test_every_shard_plans_with_the_calendars_kept_on_shard_0(tmp_path: Any) -> None:
    # Given a sharded store whose calendar (on shard 0) excludes every day of 2026, and hourly
    # jobs spread over its shards, all due since 1 December 2026
    url = storage_url("sqlite", tmp_path)
    settings = Settings(storage_url=url, prefix=unique_prefix(), shards=4)
    client = Client(settings=settings)
    client.setup()
    try:
        client.put_calendar("all-2026", ["2026-01-01..2026-12-31"], timezone="Europe/Berlin")
        ids = [f"job-{i}" for i in range(12)]
        for recurring_id in ids:
            client.recurring.save(
                recurring_id, "t.h", "0 * * * *", timezone="Europe/Berlin",
                misfire_policy="run_all", exclude=["all-2026"],
            )  # fmt: skip
            assert client.storage.set_recurring_enabled(recurring_id, True, START + 275 * 86_400)
        service = SchedulerService.build(
            open_storage(settings), CallableDispatcher(Recorder()), settings, owns_storage=True
        )
        try:
            # When every shard's recurring scheduler runs a pass
            results = [scheduler.run_once() for scheduler in service.recurring_shards]
        finally:
            service.close()
        # Then nothing fired and nothing was missed, on any shard, and each next run is 2027's
        assert sum(stats.fetched for stats in results) == len(ids)
        assert sum(stats.created for stats in results) == 0
        assert sum(stats.missed for stats in results) == 0
        new_year = datetime(2027, 1, 1, tzinfo=BERLIN).timestamp()
        for recurring_id in ids:
            saved = client.recurring.get(recurring_id)
            assert saved is not None and saved.next_run_at is not None
            assert saved.next_run_at.timestamp() == new_year
    finally:
        client.storage.drop()
        client.close()
