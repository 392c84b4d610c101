"""``max_runs`` (issue 25, §5 "Limits") on every adapter: a recurring job ends after so many
scheduled firings, counted in storage with the firings (a run_all catch-up never goes past the
limit, a tick fired again counts once, racing schedulers never exceed it); triggers and
backfills do not count; raising the limit resumes the job; the count is shown everywhere; a bad
limit is refused in the same words at every entry point, with nothing written.

Ticks are driven without sleeping: a job is made due at a past tick and each pass plans at a
chosen storage instant. Expected ticks come from a brute-force walk over ``zoneinfo``
(no croniter)."""

from __future__ import annotations

import json
import math
import threading
from collections import Counter
from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from flask.testing import FlaskClient

from parallel_scheduler import Client, InvalidJobError, JobState, Settings
from parallel_scheduler.cli import main
from parallel_scheduler.dashboard import create_app
from parallel_scheduler.recurring.history import HISTORY_LIMIT
from parallel_scheduler.recurring.jobs import firing_id
from parallel_scheduler.recurring.scheduler import RecurringJobScheduler
from storage_adapters import Storage, list_jobs
from tests.dashboard.conftest import csrf_token
from tests.storage.entry_points import Store, opened

MINUTE = 60.0
ZONE = "Asia/Kathmandu"  # UTC+5:45: a minute cron's ticks are still whole UTC minutes
LIMIT_WORDS = "max runs must be a whole number"


def oracle_minute_ticks(start: float, count: int, zone: str = ZONE) -> list[float]:
    """The first ``count`` ticks of ``* * * * *`` at or after ``start``: every instant, walked
    second by second, whose wall clock in ``zone`` reads a whole minute."""
    ticks: list[float] = []
    moment = math.ceil(start)
    while len(ticks) < count:
        if datetime.fromtimestamp(moment, ZoneInfo(zone)).second == 0:
            ticks.append(float(moment))
        moment += 1
    return ticks


def pass_at(storage: Storage, monkeypatch: pytest.MonkeyPatch, at: float) -> Any:
    """One recurring pass that plans at storage instant ``at`` (due jobs are still fetched by
    storage's own clock, so ``at`` is chosen after their next run, before now)."""
    scheduler = RecurringJobScheduler(storage, Settings())
    with monkeypatch.context() as patched:
        patched.setattr(scheduler._clock, "now", lambda: at)
        try:
            return scheduler.run_once()
        finally:
            scheduler.close()


def fired_ticks(storage: Storage, rid: str) -> list[float]:
    jobs = list_jobs(storage, None, 1000)
    return sorted(job.due_at for job in jobs if job.id.startswith(f"{rid}@2"))


def minute_job(client: Client, rid: str = "m", **kw: Any) -> float:
    """A ``* * * * *`` job in ``ZONE`` made due at a whole minute 20 minutes ago (returned)."""
    client.recurring.save(rid, "t.m", "* * * * *", timezone=ZONE, **kw)
    start = math.floor(client.storage.now() / MINUTE) * MINUTE - 20 * MINUTE
    assert client.storage.set_recurring_enabled(rid, True, start)
    return start


def test_a_job_fires_exactly_its_max_runs_ticks_then_ends(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a minute job limited to 3 runs, due 20 minutes ago
    client = Client(storage)
    start = minute_job(client, max_runs=3)
    # When passes run, each a second after the job's next run, while it has one
    for _ in range(10):
        job = client.recurring.get("m")
        assert job is not None
        if job.next_run_at is None:
            break
        pass_at(storage, monkeypatch, job.next_run_at.timestamp() + 1)
    # Then exactly the first 3 ticks fired, and the job has ended: no next run, 3 of 3 runs
    assert fired_ticks(storage, "m") == oracle_minute_ticks(start, 3)
    job = client.recurring.get("m")
    assert job is not None and job.next_run_at is None and job.ended_by_limit
    assert (job.to_dict()["runs"], job.to_dict()["max_runs"]) == (3, 3)
    # and a pass now finds nothing due, and resuming it does not revive it
    assert pass_at(storage, monkeypatch, storage.now()).fetched == 0
    client.recurring.pause("m")
    client.recurring.resume("m")
    job = client.recurring.get("m")
    assert job is not None and job.next_run_at is None
    assert len(fired_ticks(storage, "m")) == 3


def test_a_run_all_catch_up_fires_only_the_runs_left(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a run_all minute job limited to 4 runs that missed 10 ticks (no grace)
    client = Client(storage)
    start = minute_job(client, misfire_policy="run_all", misfire_grace=0, max_runs=4)
    # When a pass plans 30 s after its tenth tick
    stats = pass_at(storage, monkeypatch, start + 9 * MINUTE + 30)
    # Then the 4 earliest of the 10 fired, and it has ended
    assert (stats.created, stats.missed) == (4, 10)
    assert fired_ticks(storage, "m") == oracle_minute_ticks(start, 4)
    job = client.recurring.get("m")
    assert job is not None and job.next_run_at is None and job.runs == 4


def test_a_tick_fired_again_counts_once(storage: Storage, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a job limited to 2 runs whose first tick fired
    client = Client(storage)
    start = minute_job(client, max_runs=2)
    pass_at(storage, monkeypatch, start + 1)
    # When its next run is moved back to that tick and it is fired again
    assert storage.set_recurring_enabled("m", True, start)
    again = pass_at(storage, monkeypatch, start + 1)
    # Then nothing was created and the tick is counted once: one run is left
    assert again.created == 0
    job = client.recurring.get("m")
    assert job is not None and job.runs == 1 and job.next_run_at is not None
    pass_at(storage, monkeypatch, job.next_run_at.timestamp() + 1)
    job = client.recurring.get("m")
    assert job is not None and job.runs == 2 and job.next_run_at is None
    assert fired_ticks(storage, "m") == oracle_minute_ticks(start, 2)


def test_triggers_and_backfills_do_not_count(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a job limited to 2 runs, triggered more often than its history keeps, and backfilled
    client = Client(storage)
    start = minute_job(client, max_runs=2)
    past = datetime.fromtimestamp(start, timezone.utc)
    done = client.recurring.backfill("m", past - timedelta(minutes=5), past - timedelta(minutes=1))
    assert done.created == 5
    pass_at(storage, monkeypatch, start + 1)  # one scheduled run
    for _ in range(HISTORY_LIMIT + 2):
        client.recurring.trigger("m")
    # Then only the scheduled tick counted: one run left, and the count outlived the triggers
    job = client.recurring.get("m")
    assert job is not None and job.runs == 1 and job.next_run_at is not None
    assert all(firing.trigger for firing in job.recent_firings())
    pass_at(storage, monkeypatch, job.next_run_at.timestamp() + 1)
    job = client.recurring.get("m")
    assert job is not None and job.runs == 2 and job.next_run_at is None


def test_raising_max_runs_resumes_a_job_its_limit_ended(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a job ended by its limit of 1
    client = Client(storage)
    start = minute_job(client, max_runs=1)
    pass_at(storage, monkeypatch, start + 1)
    # When it is saved again with the same limit: still ended, its count kept
    same = client.recurring.save("m", "t.m", "* * * * *", timezone=ZONE, max_runs=1, mode="update")
    assert same.next_run_at is None and same.runs == 1
    # When the limit is raised: it resumes from the next tick after now, its count kept
    now = storage.now()
    raised = client.recurring.save(
        "m", "t.m", "* * * * *", timezone=ZONE, max_runs=2, mode="upsert"
    )
    assert raised.runs == 1 and raised.next_run_at is not None
    upcoming = raised.next_run_at.timestamp()
    assert upcoming % MINUTE == 0 and 0 < upcoming - now <= MINUTE + 1
    # and it makes one more run (driven at a past tick after its first), then ends again
    assert storage.set_recurring_enabled("m", True, start + 5 * MINUTE)
    pass_at(storage, monkeypatch, start + 5 * MINUTE + 1)
    job = client.recurring.get("m")
    assert job is not None and job.runs == 2 and job.next_run_at is None
    # and removing the limit (null/None) resumes it for good
    free = client.recurring.save("m", "t.m", "* * * * *", timezone=ZONE, mode="update")
    assert free.runs == 2 and free.next_run_at is not None and not free.ended_by_limit


def test_racing_schedulers_never_fire_more_than_max_runs(storage: Storage) -> None:
    # Given 30 run_all minute jobs limited to 3 runs, each 20 missed ticks behind
    client = Client(storage)
    client.recurring.save_many(
        [
            {"id": f"r{n}", "task": "t.r", "cron": "* * * * *", "misfire_policy": "run_all",
             "max_runs": 3}
            for n in range(30)
        ]
    )  # fmt: skip
    start = math.floor(storage.now() / MINUTE) * MINUTE - 20 * MINUTE
    for n in range(30):
        assert storage.set_recurring_enabled(f"r{n}", True, start)
    # When three schedulers race, each running passes until none finds anything due
    schedulers = [RecurringJobScheduler(storage, Settings(), owner=f"s{i}") for i in range(3)]
    created: Counter[str] = Counter()
    guard = threading.Lock()

    def drive(scheduler: RecurringJobScheduler) -> None:
        for _ in range(10):
            stats = scheduler.run_once()
            with guard:
                created["jobs"] += stats.created
            if stats.lock_acquired and stats.fetched == 0:
                return

    threads = [threading.Thread(target=drive, args=(s,)) for s in schedulers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    for scheduler in schedulers:
        scheduler.close()
    # Then each job fired its 3 earliest missed ticks, once each, and has ended
    firings = list_jobs(storage, state=JobState.SCHEDULED, limit=1000)
    per_job = Counter(job.id.split("@")[0] for job in firings)
    assert per_job == Counter({f"r{n}": 3 for n in range(30)})
    assert created["jobs"] == 90
    expected = [firing_id("r0", tick) for tick in oracle_minute_ticks(start, 3, "UTC")]
    assert sorted(job.id for job in firings if job.id.startswith("r0@")) == expected
    for job in client.recurring.list(limit=100):
        assert (job.runs, job.next_run_at) == (3, None), job.id


BAD_LIMITS: list[Any] = [0, -1, 1.5, "x", True]


@pytest.mark.parametrize("bad", BAD_LIMITS)
def test_the_client_refuses_a_bad_limit(storage: Storage, bad: Any) -> None:
    client = Client(storage)
    with pytest.raises(InvalidJobError, match=LIMIT_WORDS) as error:
        client.recurring.save("r", "t.r", "* * * * *", max_runs=bad)
    assert repr(bad) in str(error.value)
    with pytest.raises(InvalidJobError, match=LIMIT_WORDS):
        client.recurring.save_many(
            [{"id": "ok", "task": "t.r", "every": 60},
             {"id": "r", "task": "t.r", "every": 60, "max_runs": bad}]
        )  # fmt: skip
    assert storage.count_recurring() == 0


@pytest.mark.parametrize("value", ["0", "-1", "1.5", "x", "True"])
def test_the_command_line_refuses_a_bad_limit(
    adapter_kind: str, tmp_path: Any, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for target in opened(Store, adapter_kind, tmp_path):
        command = ["recurring", "add", "r", "t.r", "--every", "60", "--max-runs", value]
        capsys.readouterr()
        code = main(["--storage-url", target.url, "--prefix", target.prefix, *command])
        err = capsys.readouterr().err
        assert code == 2 and "Traceback" not in err, err
        assert LIMIT_WORDS in err and value in err, err
        assert target.storage.count_recurring() == 0


def _web(storage: Storage) -> FlaskClient:
    app = create_app(Client(storage))
    app.testing = True
    return app.test_client()


@pytest.mark.parametrize("bad", BAD_LIMITS)
def test_the_api_and_the_form_refuse_a_bad_limit(storage: Storage, bad: Any) -> None:
    web = _web(storage)
    auth = {"Authorization": "Bearer x"}
    body = {"id": "r", "task": "t.r", "every": 60, "max_runs": bad}
    answer = web.post("/api/v1/recurring", json=body, headers=auth)
    assert answer.status_code == 400, answer.get_json()
    assert LIMIT_WORDS in answer.get_json()["error"]["message"]
    form = {"csrf_token": csrf_token(web, "/recurring/new"), "id": "r", "task": "t.r",
            "every": "60", "max_runs": str(bad), "confirm": "yes"}  # fmt: skip
    page = web.post("/recurring/new", data=form)
    assert page.status_code == 400 and LIMIT_WORDS in page.get_data(as_text=True)
    assert storage.count_recurring() == 0
    # and an existing job is left as it is by a bad PUT, PATCH or edit form
    Client(storage).recurring.save("kept", "t.k", "* * * * *", max_runs=2)
    put = {"task": "t.k", "cron": "* * * * *", "max_runs": bad}
    assert web.put("/api/v1/recurring/kept", json=put, headers=auth).status_code == 400
    patch = {"max_runs": bad}
    assert web.patch("/api/v1/recurring/kept", json=patch, headers=auth).status_code == 400
    edit = {"csrf_token": csrf_token(web, "/recurring/edit?id=kept"), "id": "kept",
            "max_runs": str(bad), "confirm": "yes"}  # fmt: skip
    edited = web.post("/recurring/edit", data=edit)
    assert edited.status_code == 400 and LIMIT_WORDS in edited.get_data(as_text=True)
    kept = Client(storage).recurring.get("kept")
    assert kept is not None and kept.schedule.max_runs == 2


def test_the_limit_and_the_count_are_shown_and_edited_everywhere(
    adapter_kind: str,
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for target in opened(Store, adapter_kind, tmp_path):
        _shown_and_edited(target, monkeypatch, capsys)


def _shown_and_edited(
    target: Store, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a job that made its 1 run of 1, and one without a limit
    storage = target.storage
    client = Client(storage)
    start = minute_job(client, max_runs=1)
    pass_at(storage, monkeypatch, start + 1)
    client.recurring.save("free", "t.f", "0 * * * *")
    web = _web(storage)
    auth = {"Authorization": "Bearer x"}
    # Then the API, the page and the edit page show it ended
    one = web.get("/api/v1/recurring/m", headers=auth).get_json()
    assert (one["runs"], one["max_runs"], one["next_run_at"]) == (1, 1, None)
    free = web.get("/api/v1/recurring/free", headers=auth).get_json()
    assert (free["runs"], free["max_runs"]) == (0, None)
    page = web.get("/recurring").get_data(as_text=True)
    assert "1 of 1 (ended)" in page
    assert "1 of 1 (ended)" in web.get("/recurring/edit?id=m").get_data(as_text=True)
    # When the API raises the limit (PATCH), it resumes with its count; null removes the limit
    raised = web.patch("/api/v1/recurring/m", json={"max_runs": 3}, headers=auth).get_json()
    assert (raised["runs"], raised["max_runs"]) == (1, 3) and raised["next_run_at"] is not None
    kept = web.patch("/api/v1/recurring/m", json={"task": "t.n"}, headers=auth).get_json()
    assert kept["max_runs"] == 3
    removed = web.patch("/api/v1/recurring/m", json={"max_runs": None}, headers=auth).get_json()
    assert (removed["runs"], removed["max_runs"]) == (1, None)
    # and the edit form sets it again
    edit = {"csrf_token": csrf_token(web, "/recurring/edit?id=m"), "id": "m", "max_runs": "1",
            "confirm": "yes"}  # fmt: skip
    assert web.post("/recurring/edit", data=edit).status_code in (302, 303)
    job = client.recurring.get("m")
    assert job is not None and job.schedule.max_runs == 1 and job.next_run_at is None
    # and the command line lists and shows it, as text and as JSON
    url = ["--storage-url", target.url, "--prefix", target.prefix]
    capsys.readouterr()
    assert main([*url, "recurring", "list", "--json"]) == 0
    listed = {row["id"]: row for row in json.loads(capsys.readouterr().out)}
    assert (listed["m"]["runs"], listed["m"]["max_runs"]) == (1, 1)
    assert main([*url, "recurring", "list"]) == 0
    assert "1 of 1 (ended)" in capsys.readouterr().out
    assert main([*url, "recurring", "show", "m"]) == 0
    assert "1 of 1 (ended)" in capsys.readouterr().out
    # and `recurring add --update --max-runs` raises it from the command line
    command = ["recurring", "add", "m", "t.m", "--cron", "* * * * *", "--update", "--max-runs", "2"]
    assert main([*url, *command]) == 0
    job = client.recurring.get("m")
    assert job is not None and job.schedule.max_runs == 2 and job.next_run_at is not None
