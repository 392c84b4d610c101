"""Jitter (issue 25, item 4) on every adapter: a recurring tick's firing is due at the tick plus an
offset below the jitter and below the gap to the next tick, released at that instant and not
before; a delayed job's due time moves the same way; the offset is the same in every process;
and a bad jitter is refused by name at every entry point with nothing written."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import threading
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from celery import Celery

from devtools.waiting import wait_until
from parallel_scheduler import CallableDispatcher, Client, InvalidJobError, JobState, Settings
from parallel_scheduler.celery.beat_sync import sync_beat_schedule
from parallel_scheduler.cli import main
from parallel_scheduler.jitter import jitter_offset
from parallel_scheduler.process.service import SchedulerService
from parallel_scheduler.recurring.jobs import firing_id
from storage_adapters import Storage, list_jobs
from tests.scheduler.test_recurring import run_pass
from tests.storage.entry_points import Store, opened, producer

HOUR = 3600.0
JOBS = 60


def fired_offsets(storage: Storage, tick: float) -> dict[str, float]:
    """Each recurring job's firing of ``tick``: its offset from the tick, by recurring id."""
    offsets = {}
    for n in range(JOBS):
        job = storage.get_job(firing_id(f"r{n}", tick))
        assert job is not None and job.state is JobState.SCHEDULED, n
        offsets[f"r{n}"] = job.due_at - tick
    return offsets


def test_each_tick_fires_within_its_jitter(storage: Storage) -> None:
    # Given 60 hourly recurring jobs with 10 minutes of jitter, due at the last full hour
    client = Client(storage)
    client.recurring.save_many(
        [{"id": f"r{n}", "task": "t.r", "cron": "0 * * * *", "jitter": 600} for n in range(JOBS)]
    )
    tick = math.floor(storage.now() / HOUR) * HOUR
    for n in range(JOBS):
        assert storage.set_recurring_enabled(f"r{n}", True, tick)
    # When the tick fires
    assert run_pass(storage).created == JOBS
    # Then each firing keeps the tick's id and is due in [tick, tick + 600), spread over it
    offsets = fired_offsets(storage, tick)
    assert all(0 <= offset < 600 for offset in offsets.values())
    assert max(offsets.values()) - min(offsets.values()) > 300
    # and the history records the tick, not the moved instant
    saved = client.recurring.get("r0")
    assert saved is not None and saved.history[-1]["tick"] == tick


def test_a_tick_never_fires_past_the_next_one(storage: Storage) -> None:
    # Given jobs every 10 s with an hour of jitter: the gap to the next tick is the bound
    client = Client(storage)
    client.recurring.save_many(
        [{"id": f"r{n}", "task": "t.r", "every": 10, "jitter": HOUR} for n in range(JOBS)]
    )
    tick = math.floor(storage.now() / 10) * 10
    for n in range(JOBS):
        assert storage.set_recurring_enabled(f"r{n}", True, tick)
    assert run_pass(storage).created == JOBS
    offsets = fired_offsets(storage, tick)
    assert all(0 <= offset < 10 for offset in offsets.values())
    assert max(offsets.values()) - min(offsets.values()) > 5


def test_a_jittered_firing_is_released_at_its_due_time_not_at_its_tick(storage: Storage) -> None:
    # Given 20 jobs every 4 s with 3 s of jitter, and the service running both schedulers
    sent: dict[str, float] = {}
    guard = threading.Lock()

    def record(task: str, args: Any, kwargs: Any, options: Any, job_id: str) -> None:
        with guard:
            sent.setdefault(job_id, storage.now())

    client = Client(storage)
    client.recurring.save_many(
        [
            {"id": f"r{n}", "task": "t.r", "every": 4, "jitter": 3, "misfire_policy": "skip"}
            for n in range(20)
        ]
    )
    service = SchedulerService.build(
        storage, CallableDispatcher(record), Settings(poll_interval=0.05, lock_lease=5)
    )
    service.start()
    try:
        wait_until(lambda: len(sent) >= 40, timeout=60)
    finally:
        service.close()
    # Then no firing went out before its moved due time, each within 3 s of its tick
    offsets = []
    for job_id, at in sent.items():
        job = storage.get_job(job_id)
        assert job is not None
        tick = datetime.strptime(job_id.rsplit("@", 1)[1], "%Y-%m-%dT%H:%M:%SZ")
        offset = job.due_at - tick.replace(tzinfo=timezone.utc).timestamp()
        assert at >= job.due_at and 0 <= offset < 3, (job_id, at, job.due_at)
        offsets.append(offset)
    assert max(offsets) - min(offsets) > 1  # spread, not all at the tick


def test_a_delayed_job_moves_by_its_jitter_the_same_way_every_time(storage: Storage) -> None:
    client = Client(storage)
    due = storage.now() + HOUR
    dues = []
    for n in range(JOBS):
        result = client.schedule("t.d", eta=due, job_id=f"d{n}", jitter=120)
        stored = storage.get_job(f"d{n}")
        assert result.created and stored is not None
        dues.append(stored.due_at)
    assert all(due <= at < due + 120 for at in dues)
    assert max(dues) - min(dues) > 60
    # Asked again with the same id, the job is the one stored: the same instant
    again = client.schedule("t.d", eta=due, job_id="d0", jitter=120)
    assert not again.created
    first = storage.get_job("d0")
    assert first is not None and first.due_at == dues[0]


def test_the_offset_is_the_same_in_another_process() -> None:
    keys = [(f"job-{n}", 1_800_000_000.0 + n) for n in range(50)]
    here = [jitter_offset(key, at, 300.0) for key, at in keys]
    code = (
        "import json, sys; from parallel_scheduler.jitter import jitter_offset; "
        "print(json.dumps([jitter_offset(k, a, 300.0) for k, a in json.loads(sys.argv[1])]))"
    )
    there = subprocess.run(
        [sys.executable, "-c", code, json.dumps(keys)],
        check=True,
        capture_output=True,
        text=True,
        env={"PYTHONHASHSEED": "12345", "PATH": ""},
    ).stdout
    assert json.loads(there) == here
    assert all(0 <= offset < 300 for offset in here)


# -- one bad jitter through every door: refused by name, nothing written ------------------------

BAD_JITTERS: list[tuple[Any, str]] = [(-1, "-1"), (math.nan, "nan"), ("soon", "soon")]


def _recurring_save(storage: Storage, bad: Any) -> str:
    with pytest.raises(InvalidJobError) as error:
        Client(storage).recurring.save("r", "t.r", "0 * * * *", jitter=bad)
    return str(error.value)


def _recurring_save_many(storage: Storage, bad: Any) -> str:
    good = {"id": "ok", "task": "t.r", "every": 60}
    with pytest.raises(InvalidJobError) as error:
        Client(storage).recurring.save_many([good, {**good, "id": "r", "jitter": bad}])
    return str(error.value)


def _schedule(storage: Storage, bad: Any) -> str:
    with pytest.raises(InvalidJobError) as error:
        Client(storage).schedule("t.d", countdown=60, jitter=bad)
    return str(error.value)


def _plugin_apply_async(storage: Storage, bad: Any, target: Any) -> str:
    app = producer("jitter", target)

    @app.task(name="t.d", shared=False)  # type: ignore[untyped-decorator]
    def task() -> None:
        raise AssertionError("never runs here")

    with pytest.raises(InvalidJobError) as error:
        task.apply_async(countdown=60, jitter=bad)
    return str(error.value)


def _beat_sync(storage: Storage, bad: Any) -> str:
    app = Celery("jitter-beat", broker="memory://")
    app.conf.beat_schedule = {
        "nightly": {"task": "t.r", "schedule": 60.0, "options": {"jitter": bad}}
    }
    with pytest.raises(InvalidJobError) as error:
        sync_beat_schedule(app, Client(storage).recurring)
    return str(error.value)


DOORS: dict[str, Callable[[Storage, Any], str]] = {
    "recurring.save": _recurring_save,
    "recurring.save_many": _recurring_save_many,
    "schedule": _schedule,
    "beat_schedule sync": _beat_sync,
}


@pytest.mark.parametrize("door", sorted(DOORS))
@pytest.mark.parametrize(("bad", "spelled"), BAD_JITTERS)
def test_a_bad_jitter_is_refused_by_name_and_nothing_is_written(
    storage: Storage, door: str, bad: Any, spelled: str
) -> None:
    message = DOORS[door](storage, bad)
    assert "jitter" in message and spelled in message, message
    assert storage.count_recurring() == 0
    assert list_jobs(storage, None, 10) == []


@pytest.mark.parametrize(("bad", "spelled"), BAD_JITTERS[:2])
def test_the_plugin_refuses_a_bad_jitter_by_name(
    adapter_kind: str, tmp_path: Any, bad: Any, spelled: str
) -> None:
    for target in opened(Store, adapter_kind, tmp_path):
        message = _plugin_apply_async(target.storage, bad, target)
        assert "jitter" in message and spelled in message, message
        assert list_jobs(target.storage, None, 10) == []


@pytest.mark.parametrize(
    ("command", "spelled"),
    [
        (["recurring", "add", "r", "t.r", "--every", "60", "--jitter", "-1"], "-1"),
        (["recurring", "add", "r", "t.r", "--every", "60", "--jitter", "nan"], "nan"),
        (["schedule", "t.d", "--countdown", "60", "--jitter", "-1"], "-1"),
        (["schedule", "t.d", "--countdown", "60", "--jitter", "inf"], "inf"),
    ],
)
def test_the_command_line_refuses_a_bad_jitter_by_name(
    adapter_kind: str,
    tmp_path: Any,
    command: list[str],
    spelled: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for target in opened(Store, adapter_kind, tmp_path):
        capsys.readouterr()
        code = main(["--storage-url", target.url, "--prefix", target.prefix, *command])
        err = capsys.readouterr().err
        assert code == 2 and "Traceback" not in err, err
        assert "jitter" in err and spelled in err, err
        assert target.storage.count_recurring() == 0
        assert list_jobs(target.storage, None, 10) == []


def test_the_plugin_stores_a_jittered_call_even_one_due_now(
    adapter_kind: str, tmp_path: Any
) -> None:
    for target in opened(Store, adapter_kind, tmp_path):
        app = producer("jitter-now", target)

        @app.task(name="t.now", shared=False)  # type: ignore[untyped-decorator]
        def task() -> None:
            raise AssertionError("never runs here")

        before = target.storage.now()
        result = task.apply_async(jitter=30)  # no countdown: Celery alone would send it now
        stored = target.storage.get_job(result.id)
        assert stored is not None and stored.state is JobState.SCHEDULED
        assert before <= stored.due_at < target.storage.now() + 30


def test_a_beat_entry_keeps_its_jitter_and_an_unchanged_one_is_not_saved_again(
    storage: Storage,
) -> None:
    app = Celery("jitter-beat-kept", broker="memory://")
    app.conf.beat_schedule = {
        "nightly": {"task": "t.r", "schedule": 60.0, "options": {"jitter": timedelta(minutes=2)}}
    }
    recurring = Client(storage).recurring
    first = sync_beat_schedule(app, recurring)
    saved = recurring.get(first.saved[0])
    assert saved is not None and saved.schedule.jitter == 120.0
    again = sync_beat_schedule(app, recurring)
    assert (again.saved, again.unchanged) == ([], first.saved)
