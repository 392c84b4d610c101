"""Recurring jobs over every adapter: firing, misfire after an outage, management, and the
one-process service that runs both schedulers."""

from __future__ import annotations

import itertools
import json
import math
import re
import threading
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import storage_adapters
from devtools.waiting import wait_until
from parallel_scheduler import CallableDispatcher, Client, InvalidJobError, JobState, Settings
from parallel_scheduler.cli import main
from parallel_scheduler.jobs import JobSpec
from parallel_scheduler.process.service import SchedulerService
from parallel_scheduler.recurring.jobs import firing_id
from parallel_scheduler.recurring.scheduler import RecurringJobScheduler
from storage_adapters import NewJob, NewRecurring, Storage, TransactionalFiringStorage, list_jobs

HOUR = 3600.0


def last_full_hour(storage: Storage) -> float:
    return math.floor(storage.now() / HOUR) * HOUR


def hourly(storage: Storage, rid: str = "report", policy: str = "run_once", **kw: Any) -> Client:
    client = Client(storage)
    client.recurring.save(rid, "tasks.report", "0 * * * *", misfire_policy=policy, **kw)  # type: ignore[arg-type]
    return client


def make_due(storage: Storage, rid: str, next_run_at: float) -> None:
    """Simulate time having passed: the job's next run is ``next_run_at`` (an earlier tick)."""
    assert storage.set_recurring_enabled(rid, True, next_run_at)


def run_pass(storage: Storage) -> Any:
    scheduler = RecurringJobScheduler(storage, Settings())
    try:
        return scheduler.run_once()
    finally:
        scheduler.close()


def test_a_due_tick_fires_once_with_its_deterministic_id(storage: Storage) -> None:
    # Given an hourly job whose last full hour is due now
    client = hourly(storage)
    tick = last_full_hour(storage)
    make_due(storage, "report", tick)
    # When two passes run
    first, second = run_pass(storage), run_pass(storage)
    # Then the tick fired once, as a delayed job due at the tick, and the next run moved on
    assert (first.fired, first.created, second.fetched) == (1, 1, 0)
    job = storage.get_job(firing_id("report", tick))
    assert job is not None and job.state is JobState.SCHEDULED
    assert job.due_at == tick
    assert job.id == "report@" + datetime.fromtimestamp(tick, timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    recurring = client.recurring.get("report")
    assert recurring is not None and recurring.next_run_at is not None
    assert recurring.next_run_at.timestamp() == tick + HOUR
    assert recurring.history[-1] == {"tick": tick, "job_id": job.id, "runs": 1}


def test_a_tick_already_fired_before_a_crash_is_not_fired_again(storage: Storage) -> None:
    hourly(storage)
    tick = last_full_hour(storage)
    make_due(storage, "report", tick)
    storage.add_jobs([NewJob(firing_id("report", tick), "tasks.report", "{}", tick)])
    stats = run_pass(storage)
    assert (stats.fired, stats.created, stats.existed) == (1, 0, 1)
    assert storage.count_by_state()[JobState.SCHEDULED] == 1


@pytest.mark.parametrize(
    ("policy", "cap", "expected_hours_back"),
    [("skip", 100, []), ("run_once", 100, [0]), ("run_all", 100, [5, 4, 3, 2, 1, 0]),
     ("run_all", 2, [1, 0])],
)  # fmt: skip
def test_misfire_policies_after_an_outage(
    storage: Storage, policy: str, cap: int, expected_hours_back: list[int]
) -> None:
    # Given an hourly job last due five hours ago, as if no scheduler ran since (a grace of 0
    # makes every past tick count as missed, so the expectations do not depend on the minute)
    hourly(storage, policy=policy, misfire_cap=cap, misfire_grace=0)
    now_tick = last_full_hour(storage)
    make_due(storage, "report", now_tick - 5 * HOUR)
    # When the scheduler comes back
    stats = run_pass(storage)
    # Then the policy decides which of the missed ticks fire
    fired = sorted(j.due_at for j in list_jobs(storage, JobState.SCHEDULED, limit=100))
    assert fired == sorted(now_tick - h * HOUR for h in expected_hours_back)
    assert stats.fired == 1
    recurring = storage.get_recurring("report")
    assert recurring is not None and recurring.next_run_at is not None
    assert recurring.next_run_at > storage.now()


def test_pause_resume_trigger_update_remove(storage: Storage) -> None:
    client = hourly(storage)
    tick = last_full_hour(storage)
    # Paused: a due tick does not fire
    make_due(storage, "report", tick)
    assert client.recurring.pause("report")
    assert run_pass(storage).fetched == 0
    # Resumed: from the next tick on, nothing from the pause is fired
    assert client.recurring.resume("report")
    resumed = client.recurring.get("report")
    assert resumed is not None and resumed.enabled
    assert resumed.next_run_at is not None and resumed.next_run_at.timestamp() > storage.now()
    # Triggered: one job now, with its own id
    job_id = client.recurring.trigger("report")
    assert job_id.startswith("report@trigger-")
    assert storage.fetch_due_ids(10) == [job_id]
    # Updated: a new cron recomputes the next run
    updated = client.recurring.save("report", "tasks.report", "*/5 * * * *", mode="update")
    assert updated.schedule.cron == "*/5 * * * *"
    assert updated.next_run_at is not None
    assert updated.next_run_at.timestamp() - storage.now() <= 300
    assert client.recurring.remove("report")
    assert client.recurring.get("report") is None


def test_a_trigger_counts_as_a_run_and_the_due_tick_still_fires_once(storage: Storage) -> None:
    # Given an hourly job that never ran, its last full hour due
    client = hourly(storage)
    tick = last_full_hour(storage)
    make_due(storage, "report", tick)
    # When it is triggered through the client
    job_id = client.recurring.trigger("report")
    # Then the trigger is its last run and newest firing, marked as a trigger
    triggered = client.recurring.get("report")
    assert triggered is not None and triggered.last_run_at is not None
    (firing,) = triggered.recent_firings()
    assert (firing.job_id, firing.at, firing.trigger) == (job_id, triggered.last_run_at, True)
    assert triggered.to_dict()["recent_firings"] == [firing.to_dict()]
    # And the due tick is neither moved nor taken for fired: the next passes fire it once
    assert triggered.next_run_at is not None and triggered.next_run_at.timestamp() == tick
    first, second = run_pass(storage), run_pass(storage)
    assert (first.fired, first.created, second.fetched) == (1, 1, 0)
    assert sorted(storage.fetch_due_ids(10)) == sorted([firing_id("report", tick), job_id])
    fired = client.recurring.get("report")
    assert fired is not None and fired.next_run_at is not None
    assert fired.next_run_at.timestamp() == tick + HOUR
    # And the history holds both, the tick newest; the last run stays the later trigger
    assert [(f.job_id, f.trigger) for f in fired.recent_firings()] == [
        (firing_id("report", tick), False),
        (job_id, True),
    ]
    assert fired.last_run_at == triggered.last_run_at


def assert_refused(storage: Storage, kwargs: dict[str, Any], message: str) -> None:
    """Saving an hourly schedule changed by ``kwargs`` raises ``message`` and stores nothing."""
    call: dict[str, Any] = {"recurring_id": "r", "task": "tasks.x", "cron": "0 * * * *"}
    call.update(kwargs)
    with pytest.raises(InvalidJobError, match=message):
        Client(storage).recurring.save(**call)
    assert storage.count_recurring() == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cron": "99 * * * *"}, "invalid cron"),
        ({"timezone": "Nowhere/City"}, "unknown time zone"),
        ({"start": datetime(2030, 1, 2, tzinfo=timezone.utc),
          "end": datetime(2030, 1, 1, tzinfo=timezone.utc)}, "before the start"),
        ({"misfire_cap": 0}, "at least 1"),
        ({"recurring_id": "a@b"}, "must not contain '@'"),
        ({"args": [float("nan")]}, "not JSON"),
        ({"mode": "update"}, "does not exist"),
    ],
)  # fmt: skip
def test_bad_recurring_input_stores_nothing(
    storage: Storage, kwargs: dict[str, Any], message: str
) -> None:
    assert_refused(storage, kwargs, message)


def test_creating_an_existing_id_is_an_error_unless_upsert(storage: Storage) -> None:
    client = hourly(storage)
    with pytest.raises(InvalidJobError, match="exists already"):
        client.recurring.save("report", "tasks.other", "0 * * * *")
    client.recurring.save("report", "tasks.other", "0 * * * *", mode="upsert")
    saved = client.recurring.get("report")
    assert saved is not None and saved.task == "tasks.other"


def test_one_service_runs_both_schedulers_and_fires_every_second(storage: Storage) -> None:
    # Given a recurring job every second, and a service running both schedulers
    sent: list[str] = []
    guard = threading.Lock()

    def record(task: str, args: Any, kwargs: Any, options: Any, job_id: str) -> None:
        with guard:
            sent.append(job_id)

    client = Client(storage)
    client.recurring.save("tick", "tasks.tick", "* * * * * *", misfire_policy="skip")
    service = SchedulerService.build(
        storage, CallableDispatcher(record), Settings(poll_interval=0.1, lock_lease=5)
    )
    service.start()
    try:
        # Then firings reach the dispatcher, each tick once, one second apart
        wait_until(lambda: len(sent) >= 3, timeout=15)
    finally:
        service.close()
    assert Counter(sent).most_common(1)[0][1] == 1
    ticks = sorted(storage.get_job(i).due_at for i in sent)  # type: ignore[union-attr]
    assert all(b - a == 1.0 for a, b in itertools.pairwise(ticks))
    assert storage.lock_holder("delayed-scheduler") is None
    assert storage.lock_holder("recurring-scheduler") is None


def test_firings_are_released_with_the_recurring_jobs_arguments(storage: Storage) -> None:
    sent: list[tuple[str, list[Any], dict[str, Any], dict[str, Any]]] = []
    client = Client(storage)
    client.recurring.save(
        "mail", "tasks.mail", "0 * * * *", args=[1], kwargs={"to": "x"}, queue="mail"
    )
    make_due(storage, "mail", last_full_hour(storage))
    service = SchedulerService.build(
        storage,
        CallableDispatcher(lambda t, a, k, o, i: sent.append((t, a, k, o))),
        Settings(poll_interval=0.1),
    )
    assert service.recurring.run_once().created == 1
    # sent by the firing step itself on PostgreSQL (in its transaction), else by the release
    released = service.delayed.run_once().released
    service.close()
    assert released == (0 if isinstance(storage, TransactionalFiringStorage) else 1)
    assert sent == [("tasks.mail", [1], {"to": "x"}, {"queue": "mail"})]


def test_an_ended_schedule_stops_firing(storage: Storage) -> None:
    # Given an every-second job that ends in two seconds
    end = datetime.fromtimestamp(math.floor(storage.now()) + 2, timezone.utc)
    client = Client(storage)
    client.recurring.save("beat", "tasks.beat", every=1.0, end=end, misfire_policy="run_all")

    def ended() -> bool:
        run_pass(storage)
        recurring = client.recurring.get("beat")
        return recurring is not None and recurring.next_run_at is None

    # When passes run until it has no next run
    wait_until(ended, timeout=15)
    # Then it is no longer fetched, and it fired nothing after its end
    assert storage.fetch_due_recurring(10) == []
    fired = list_jobs(storage, JobState.SCHEDULED, limit=100)
    assert fired and max(j.due_at for j in fired) <= end.timestamp()


# ---- issue 9, item 3: a delayed job cannot squat a recurring firing's id ------------------------


@pytest.mark.parametrize(
    "job_id",
    ["report@2026-11-30T02:00:00Z", "x@y@1999-01-01T00:00:00Z", "report@trigger-anything"],
)
def test_the_firing_id_form_is_reserved(storage: Storage, job_id: str) -> None:
    with pytest.raises(InvalidJobError, match="reserved for recurring firings"):
        Client(storage).schedule("tasks.squat", job_id=job_id, countdown=60)
    with pytest.raises(InvalidJobError, match="reserved for recurring firings"):
        Client(storage).schedule_many([JobSpec("tasks.fine"), JobSpec("tasks.squat", id=job_id)])
    assert storage.count_by_state().get(JobState.SCHEDULED, 0) == 0


def test_ids_with_an_at_sign_that_are_not_firing_ids_stay_valid(storage: Storage) -> None:
    client = Client(storage)
    for job_id in ["user@example.com-welcome", "r@2026-11-30", "r@2026-11-30T02:00:00+01:00"]:
        client.schedule("tasks.mail", job_id=job_id, countdown=60)
        stored = storage.get_job(job_id)
        assert stored is not None and stored.task == "tasks.mail"


def test_a_squat_attempt_is_refused_and_the_tick_fires_its_own_task(storage: Storage) -> None:
    # Given an hourly job whose last full hour is due, and a caller trying to pre-empt it
    client = hourly(storage)
    tick = last_full_hour(storage)
    make_due(storage, "report", tick)
    with pytest.raises(InvalidJobError, match="reserved"):
        client.schedule("tasks.squat", job_id=firing_id("report", tick))
    # When the recurring pass runs
    stats = run_pass(storage)
    # Then the tick is created by the pass, with the recurring job's own task
    assert (stats.created, stats.existed) == (1, 0)
    job = storage.get_job(firing_id("report", tick))
    assert job is not None and job.task == "tasks.report"


def test_reschedule_cannot_create_an_id(storage: Storage) -> None:
    client = Client(storage)
    assert client.reschedule("report@2026-11-30T02:00:00Z", countdown=5) is False
    assert storage.get_job("report@2026-11-30T02:00:00Z") is None


# ---- issue 9, items 4 and 5: schedules that cannot fire, and out-of-range values -------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cron": "0 0 31 2 *"}, r"cron '0 0 31 2 \*' never fires"),
        ({"cron": "30 2 30 2 *"}, r"cron '30 2 30 2 \*' never fires"),
        ({"end": datetime(2020, 1, 1, tzinfo=timezone.utc)}, "never fires again: its end date"),
        ({"cron": "", "every": 1e300}, "interval must be from 1 to .* not 1e[+]300"),
        ({"cron": "", "every": timedelta(days=365 * 101)}, "interval must be from 1 to"),
        ({"start": datetime(1969, 1, 1, tzinfo=timezone.utc)}, "start date .* outside the valid"),
        ({"end": datetime(9999, 6, 1, tzinfo=timezone.utc)}, "end date .* outside the valid"),
    ],
)
def test_schedules_that_cannot_fire_are_refused(
    storage: Storage, kwargs: dict[str, Any], message: str
) -> None:
    assert_refused(storage, kwargs, message)


BAD_ROWS = [
    ('{"every": 1e300}', None, "interval must be from 1 to"),
    ('{"cron": "0 0 31 2 *", "timezone": "UTC"}', None, "never fires"),
    ('{"cron": "* * * * *", "timezone": "Mars/Base"}', None, "unknown time zone"),
    ("not json", None, "stored schedule 'not json' is unusable"),
    ('["a list"]', None, "is unusable"),
    ('{"cron": "* * * * *", "nonsense": 1}', None, "is unusable"),
    ('{"cron": "* * * * *"}', 1e20, "next_run_at 1e[+]20 .outside the valid range"),
    ('{"cron": "* * * * *"}', -1e20, "next_run_at -1e[+]20"),
]


@pytest.mark.parametrize(("schedule", "next_run_at", "problem"), BAD_ROWS)
def test_a_bad_stored_row_is_shown_flagged_and_not_fired(
    storage: Storage, schedule: str, next_run_at: float | None, problem: str
) -> None:
    # Given a row written straight through the storage API, as by an older version or by hand
    # (and a healthy one beside it)
    hourly(storage, "good")
    row = NewRecurring("bad", "tasks.bad", '{"args": []}', schedule, True, next_run_at)
    assert storage.save_recurring(row, "create")
    # When it is read, listed and turned into a dict
    client = Client(storage)
    listed = {job.id: job for job in client.recurring.list()}
    bad = client.recurring.get("bad")
    # Then nothing raises: the bad row is flagged with what is wrong, the good one is clean
    assert bad is not None and bad.problem is not None
    assert re.search(problem, bad.problem), bad.problem
    assert listed["bad"].to_dict()["problem"] == bad.problem
    assert json.dumps([job.to_dict() for job in listed.values()], allow_nan=False)
    assert listed["good"].problem is None and listed["good"].to_dict()["problem"] is None
    # And a pass leaves it alone without failing the others
    if next_run_at is None:
        make_due(storage, "bad", storage.now() - 1)
    stats = run_pass(storage)
    assert stats.created == 0
    assert storage.count_by_state().get(JobState.SCHEDULED, 0) == 0


def test_an_unreadable_payload_or_history_is_flagged(storage: Storage) -> None:
    row = NewRecurring("odd", "tasks.odd", "{broken", '{"cron": "0 * * * *"}', True, None)
    assert storage.save_recurring(row, "create")
    odd = Client(storage).recurring.get("odd")
    assert odd is not None and odd.problem is not None
    assert "payload is unreadable" in odd.problem
    assert (odd.args, odd.kwargs, odd.schedule.cron) == ([], {}, "0 * * * *")


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        (["--cron", "0 0 31 2 *"], "cron '0 0 31 2 *' never fires"),
        (["--cron", "30 2 30 2 *"], "cron '30 2 30 2 *' never fires"),
        (["--cron", "0 * * * *", "--end", "2020-01-01T00:00:00Z"], "never fires again"),
    ],
)
def test_the_cli_refuses_a_schedule_that_cannot_fire(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], schedule: list[str], message: str
) -> None:
    # Given a fresh SQLite store, when the CLI is asked to add a schedule that can never fire
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    code = main(["--storage-url", url, "recurring", "add", "r", "tasks.x", *schedule])
    # Then it exits non-zero with one line naming it, and nothing is stored
    assert code != 0
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(errors) == 1 and message in errors[0], errors
    store = storage_adapters.from_url(url)
    try:
        store.setup()
        assert store.count_recurring() == 0
    finally:
        store.close()
