"""Waiting on a condition with a deadline, instead of sleeping and hoping.

``wait_until`` is the tests' form: it returns what the condition returned and fails with an
``AssertionError``. ``seconds_until`` is the benchmarks' form: it returns how long the wait took,
fails early when a process it watches has exited, and raises ``RuntimeError`` naming what it
waited for; ``seconds_until_or_none`` reports a wait that ran out instead of raising.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["exited", "seconds_until", "seconds_until_or_none", "wait_until"]

T = TypeVar("T")


def wait_until(condition: Callable[[], T | None], timeout: float, interval: float = 0.02) -> T:
    """Poll ``condition`` until it returns something truthy and return it; fail at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"condition not met within {timeout} s: {condition}")
        time.sleep(interval)


def exited(process: Any) -> bool:
    """A ``subprocess.Popen``, a ``devtools.processes.ChildProcess`` (both have ``poll``) or a
    ``multiprocessing.Process`` that has ended."""
    if hasattr(process, "poll"):
        return process.poll() is not None
    return not process.is_alive()


def seconds_until(
    condition: Callable[[], bool], what: str, timeout: float, processes: Sequence[Any] = ()
) -> float:
    """Poll ``condition`` until it holds (returns the seconds it took); fail early when one of
    ``processes`` died, and with ``what`` named when ``timeout`` passes."""
    began = time.monotonic()
    while not condition():
        for process in processes:
            if exited(process):
                raise RuntimeError(f"{what}: a process we started exited ({process})")
        if time.monotonic() - began > timeout:
            raise RuntimeError(f"{what} did not happen within {timeout:.0f} s")
        time.sleep(0.05)
    return time.monotonic() - began


def seconds_until_or_none(condition: Callable[[], bool], what: str, timeout: float) -> float | None:
    """Seconds until ``condition`` held, or ``None`` (with a warning naming ``what``) when it
    did not within ``timeout``: a scenario that never settles is a result worth reporting."""
    try:
        return seconds_until(condition, what, timeout)
    except RuntimeError as exc:
        print(f"{Path(sys.argv[0]).stem}: {exc}", file=sys.stderr)
        return None
