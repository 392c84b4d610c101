"""Backfill (issue 25, item 5) on every adapter: every tick of a past range fired once, the
ticks listed by the brute-force ``zoneinfo`` oracle (across a DST change); a second backfill,
or one over ticks a scheduler already fired, creates nothing new; the jobs are released like
any due job; and a bad range is refused by name at every entry point, with nothing written."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from flask.testing import FlaskClient

from parallel_scheduler import CallableDispatcher, Client, InvalidJobError, JobState, Settings
from parallel_scheduler.cli import main
from parallel_scheduler.dashboard import create_app
from parallel_scheduler.delayed.scheduler import DelayedJobScheduler
from parallel_scheduler.recurring.backfill import BACKFILL_LIMIT
from parallel_scheduler.recurring.jobs import firing_id
from parallel_scheduler.recurring.scheduler import RecurringJobScheduler
from storage_adapters import Storage, list_jobs
from tests.dashboard.conftest import csrf_token
from tests.storage.entry_points import Store, opened
from tests.unit.test_dst_oracle import oracle

#: A week around Berlin's spring-forward (29 March 2026): 02:30 does not exist that night.
LOW = datetime(2026, 3, 25, tzinfo=timezone.utc)
HIGH = datetime(2026, 4, 2, tzinfo=timezone.utc)
BEARER = {"Authorization": "Bearer x"}


def nightly(storage: Storage) -> Client:
    client = Client(storage)
    client.recurring.save("nightly", "t.n", "30 2 * * *", timezone="Europe/Berlin")
    return client


def test_a_backfill_fires_each_tick_of_the_range_once(storage: Storage) -> None:
    client = nightly(storage)
    expected = oracle("30 2 * * *", "Europe/Berlin", int(LOW.timestamp()), int(HIGH.timestamp()))
    assert len(expected) == 8
    # When the week is backfilled
    done = client.recurring.backfill("nightly", LOW, HIGH)
    # Then one job per tick of the oracle, with the tick's firing id, due at the tick
    assert (done.ticks, done.created, done.existing) == (8, 8, 0)
    jobs = {job.id: job for job in list_jobs(storage, None, 100)}
    assert sorted(jobs) == sorted(firing_id("nightly", tick) for tick in expected)
    assert sorted(job.due_at for job in jobs.values()) == expected
    assert all(job.state is JobState.SCHEDULED for job in jobs.values())
    # Again, and over a range that overlaps it: only the new ticks are created
    again = client.recurring.backfill("nightly", LOW, HIGH)
    assert (again.ticks, again.created, again.existing) == (8, 0, 8)
    wider = client.recurring.backfill("nightly", LOW, HIGH + timedelta(days=2))
    assert (wider.ticks, wider.created, wider.existing) == (10, 2, 8)
    # And they are released as any due job: each once
    sent: list[str] = []
    scheduler = DelayedJobScheduler(
        storage, CallableDispatcher(lambda t, a, k, o, i: sent.append(i)), Settings()
    )
    try:
        assert scheduler.run_once().released == 10
    finally:
        scheduler.close()
    assert len(set(sent)) == len(sent) == 10


def test_a_tick_the_scheduler_fired_is_not_fired_again_by_a_backfill(storage: Storage) -> None:
    client = Client(storage)
    client.recurring.save("hourly", "t.h", "0 * * * *")
    last = math.floor(storage.now() / 3600) * 3600
    assert storage.set_recurring_enabled("hourly", True, last)
    scheduler = RecurringJobScheduler(storage, Settings())
    try:
        assert scheduler.run_once().created == 1
    finally:
        scheduler.close()
    start = datetime.fromtimestamp(last - 2 * 3600, timezone.utc)
    done = client.recurring.backfill("hourly", start, datetime.fromtimestamp(last, timezone.utc))
    assert (done.ticks, done.created, done.existing) == (3, 2, 1)
    assert len(list_jobs(storage, None, 10)) == 3


def _bad_ranges(storage: Storage) -> list[tuple[Any, Any, str]]:
    future = datetime.fromtimestamp(storage.now() + 3600, timezone.utc)
    return [
        (HIGH, LOW, "before 'from'"),
        (LOW, future, "in the future"),
        (LOW.replace(tzinfo=None), HIGH, "no time zone"),
        (LOW, LOW + timedelta(hours=3), f"more than {BACKFILL_LIMIT} ticks"),
    ]


def test_the_client_refuses_a_bad_range_by_name(storage: Storage) -> None:
    client = Client(storage)
    client.recurring.save("nightly", "t.n", "30 2 * * *", timezone="Europe/Berlin")
    client.recurring.save("every-second", "t.s", "* * * * * *")
    for start, end, reason in _bad_ranges(storage):
        rid = "every-second" if "ticks" in reason else "nightly"
        with pytest.raises(InvalidJobError, match=reason):
            client.recurring.backfill(rid, start, end)
    with pytest.raises(InvalidJobError, match="'missing' does not exist"):
        client.recurring.backfill("missing", LOW, HIGH)
    assert list_jobs(storage, None, 10) == []


def test_the_command_line_backfills_and_refuses_a_bad_range(
    adapter_kind: str, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    for target in opened(Store, adapter_kind, tmp_path):
        nightly(target.storage)
        base = ["--storage-url", target.url, "--prefix", target.prefix, "recurring", "backfill"]
        capsys.readouterr()
        argv = [*base, "nightly", "--from", LOW.isoformat(), "--to", HIGH.isoformat(), "--json"]
        assert main(argv) == 0
        assert json.loads(capsys.readouterr().out) == {"ticks": 8, "created": 8, "existing": 0}
        future = datetime.fromtimestamp(target.storage.now() + 3600, timezone.utc).isoformat()
        for start, end, reason in (
            (HIGH.isoformat(), LOW.isoformat(), "before 'from'"),
            (LOW.isoformat(), future, "in the future"),
            (LOW.isoformat(), "2026-04-02T00:00", "has no time zone"),
        ):
            try:
                code = main([*base, "nightly", "--from", start, "--to", end])
            except SystemExit as exit_info:  # argparse refuses a malformed value itself
                code = int(exit_info.code or 0)
            err = capsys.readouterr().err
            assert code == 2 and reason in err and "Traceback" not in err, err
        assert len(list_jobs(target.storage, None, 100)) == 8


def test_the_api_backfills_and_refuses_a_bad_range(storage: Storage) -> None:
    nightly(storage)
    app = create_app(Client(storage))
    app.testing = True
    web: FlaskClient = app.test_client()
    url = "/api/v1/recurring/nightly/backfill"
    body = {"from": LOW.isoformat(), "to": HIGH.isoformat()}
    answer = web.post(url, json=body, headers=BEARER)
    assert answer.status_code == 200, answer.get_json()
    assert answer.get_json() == {"id": "nightly", "ticks": 8, "created": 8, "existing": 0}
    future = datetime.fromtimestamp(storage.now() + 3600, timezone.utc).isoformat()
    for bad, status, reason in (
        ({"from": HIGH.isoformat(), "to": LOW.isoformat()}, 400, "before 'from'"),
        ({"from": LOW.isoformat(), "to": future}, 400, "in the future"),
        ({"from": LOW.isoformat()}, 400, "from and to are required"),
        ({"from": "soon", "to": HIGH.isoformat()}, 400, "'soon' is not an ISO 8601"),
    ):
        refused = web.post(url, json=bad, headers=BEARER)
        assert refused.status_code == status, refused.get_json()
        assert reason in refused.get_json()["error"]["message"], refused.get_json()
    missing = web.post("/api/v1/recurring/missing/backfill", json=body, headers=BEARER)
    assert missing.status_code == 404
    assert len(list_jobs(storage, None, 100)) == 8


def test_the_edit_page_backfills_and_refuses_a_bad_range(storage: Storage) -> None:
    nightly(storage)
    app = create_app(Client(storage))
    app.testing = True
    web: FlaskClient = app.test_client()
    page = web.get("/recurring/edit?id=nightly").get_data(as_text=True)
    assert 'id="recurring-backfill-form"' in page
    form = {"csrf_token": csrf_token(web, "/recurring/edit?id=nightly"), "id": "nightly",
            "from": LOW.isoformat(), "to": "2026-04-02T00:00", "confirm": "yes"}  # fmt: skip
    future = datetime.fromtimestamp(storage.now() + 3600, timezone.utc).isoformat()
    for change, reason in (
        ({"to": future}, "in the future"),
        ({"from": (HIGH + timedelta(days=1)).isoformat()}, "before"),
        ({"to": "soon"}, "is not a date-time"),
        ({"confirm": ""}, "confirm"),
    ):
        refused = web.post("/recurring/backfill", data={**form, **change})
        text = refused.get_data(as_text=True).replace("&#39;", "'")
        assert refused.status_code == 400 and reason in text, (change, text[:400])
    assert list_jobs(storage, None, 10) == []
    done = web.post("/recurring/backfill", data=form, follow_redirects=True)
    assert done.status_code == 200
    assert "8 tick(s), 8 fired, 0 already there" in done.get_data(as_text=True)
    assert len(list_jobs(storage, None, 100)) == 8
    # Read-only: no form, and the action is refused
    viewer = create_app(Client(storage), read_only=True)
    viewer.testing = True
    looker = viewer.test_client()
    assert 'id="recurring-backfill-form"' not in looker.get("/recurring/edit?id=nightly").get_data(
        as_text=True
    )
    assert looker.post("/recurring/backfill", data=form).status_code == 403
