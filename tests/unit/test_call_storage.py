"""``call_storage`` runs its first attempt bare and builds the retry policy only after a failure;
these check that the policy it then hands over to behaves as one that ran from the start: the
same retries and WARNING lines, the same budget (the bare attempt's time counts), and errors that
waiting cannot fix raised at once.
"""

from __future__ import annotations

import logging
import time

import pytest

from parallel_scheduler.engine.retrying import call_storage
from storage_adapters import StorageConfigurationError, StorageUnavailableError

RETRY_LOGGER = "parallel_scheduler.engine.retrying"


def retry_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == RETRY_LOGGER]


def test_a_call_that_heals_is_retried_and_each_retry_names_the_call(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger=RETRY_LOGGER)
    calls: list[float] = []

    def flaky_write() -> str:
        calls.append(time.monotonic())
        if len(calls) <= 2:
            raise StorageUnavailableError(f"down {len(calls)}")
        return "stored"

    assert call_storage(flaky_write, give_up_after=5.0) == "stored"
    assert len(calls) == 3  # the bare attempt, then the policy's two
    lines = retry_lines(caplog)
    assert len(lines) == 2, lines  # one WARNING per retry, as before the bare attempt
    assert all("a call to the storage server failed" in line for line in lines), lines
    assert "(StorageUnavailableError: down 1); retrying in" in lines[0]
    assert "(StorageUnavailableError: down 2); retrying in" in lines[1]
    assert not any("flaky_write" in line for line in lines), lines  # no function names


def test_the_bare_attempts_time_counts_against_the_budget(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger=RETRY_LOGGER)
    calls: list[int] = []

    def slow_failure() -> None:
        calls.append(1)
        time.sleep(0.3)
        raise StorageUnavailableError("timed out")

    with pytest.raises(StorageUnavailableError, match="timed out"):
        call_storage(slow_failure, give_up_after=0.25)
    assert len(calls) == 1, "the first attempt used up the budget: no retry may follow"
    assert not retry_lines(caplog)


class SteppedClock:
    """A clock that moves only when told: ``sleep`` steps it on by the seconds asked for (and
    counts them) instead of waiting, so a budget is checked in counted seconds, the same on a
    loaded machine as on an idle one."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_retries_stop_within_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a call that always fails, its bare first attempt taking 0.1 s of a 0.5 s budget,
    # on a clock that moves only by the attempts' and the back-off's own steps
    clock = SteppedClock()
    began: list[float] = []

    def down() -> None:
        began.append(clock.now)
        if len(began) == 1:
            clock.now += 0.1
        raise StorageUnavailableError("refused")

    with monkeypatch.context() as patched:
        patched.setattr(time, "monotonic", clock.monotonic)  # what call_storage and tenacity read
        patched.setattr(time, "sleep", clock.sleep)  # what tenacity's back-off calls
        with pytest.raises(StorageUnavailableError, match="refused"):
            call_storage(down, give_up_after=0.5)
    # Then it was retried, and every attempt began within the budget (the bare attempt's 0.1 s
    # included): no back-off ends past it
    assert len(began) >= 2 and len(clock.sleeps) == len(began) - 1, (began, clock.sleeps)
    assert all(at < 0.5 for at in began), began


@pytest.mark.parametrize(
    "error", [StorageConfigurationError("no such database"), ValueError("a bug")]
)
def test_an_error_waiting_cannot_fix_is_raised_at_once(
    error: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=RETRY_LOGGER)
    calls: list[int] = []

    def broken() -> None:
        calls.append(1)
        raise error

    with pytest.raises(type(error)) as raised:
        call_storage(broken)
    assert raised.value is error
    assert len(calls) == 1
    assert not retry_lines(caplog)
