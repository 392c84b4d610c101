"""How ``SchedulerService.run`` ends, which decides the exit status of ``parallel-scheduler run``
and ``celery -A proj parallel-scheduler``: ``True`` when asked to stop, ``False`` when a loop
thread died under it (so a supervisor with ``Restart=on-failure`` restarts the process)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import storage_adapters
from devtools.waiting import wait_until
from parallel_scheduler import Settings
from parallel_scheduler.dispatchers import CallableDispatcher
from parallel_scheduler.process.service import SchedulerService
from storage_adapters import Storage

SETTINGS = Settings(poll_interval=0.05, lock_lease=0.5, heartbeat_interval=0.2)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Storage]:
    opened: Storage = storage_adapters.from_url(f"sqlite:///{tmp_path / 'exit.db'}")
    opened.setup()
    yield opened
    opened.close()


@pytest.fixture
def service(store: Storage) -> Iterator[SchedulerService]:
    made = SchedulerService.build(store, CallableDispatcher(lambda *a: None), SETTINGS)
    yield made
    made.close()


def running(service: SchedulerService) -> tuple[threading.Thread, list[bool]]:
    """``service.run()`` in a thread of its own, once its loops run; its answer lands in the
    list."""
    answer: list[bool] = []
    thread = threading.Thread(
        target=lambda: answer.append(service.run(install_signal_handlers=False)), daemon=True
    )
    thread.start()
    wait_until(lambda: service.loop_problems() == [], 30, interval=0.05)
    return thread, answer


def test_run_says_false_when_a_loop_thread_dies_and_logs_which(
    service: SchedulerService, caplog: pytest.LogCaptureFixture
) -> None:
    thread, answer = running(service)
    # When one loop's thread ends while the service runs
    service.recurring.stop()
    thread.join(60)
    # Then run() ends on its own, says so, and names the loop
    assert answer == [False]
    assert any("ended unexpectedly" in r.getMessage() for r in caplog.records), caplog.text


def test_run_says_true_when_asked_to_stop(service: SchedulerService) -> None:
    thread, answer = running(service)
    service.stop()
    thread.join(60)
    assert answer == [True]
