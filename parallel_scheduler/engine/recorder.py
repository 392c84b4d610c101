"""What the schedulers tell a metrics recorder, and the recorder that ignores it.

The scheduler code calls these methods at the points where things happen (a chunk released, a
claim recovered, a pass timed, a firing made). It never imports Prometheus: ``SchedulerService``
hands every scheduler a ``NullRecorder`` unless ``metrics_port`` is set, and then the
``PrometheusRecorder`` (process/metrics.py). So metrics cost nothing when they are off, and a test
or another exporter can pass any object with these methods.
"""

from __future__ import annotations

from collections import Counter
from typing import Final, Protocol

from parallel_scheduler.engine.stats import Outcome

__all__ = [
    "LATENESS_CAUSES",
    "NULL_RECORDER",
    "RELEASE_ERROR_REASONS",
    "RELEASE_PATHS",
    "MetricsRecorder",
    "NullRecorder",
    "record_outcomes",
]

#: How a job reached the broker: one claim and one send per job (``per_job`` mode), a claimed
#: chunk sent job by job (``batch``) or in one broker round trip (``fast_publish``), or moved
#: onto the broker's list by one storage script (``one_script``: Redis storage and broker).
RELEASE_PATHS: Final = ("per_job", "batch", "fast_publish", "one_script")
#: Why a claimed job was not released: the broker refused it (``dispatch_failed``: it stays
#: Scheduled and is tried again), it was sent but its claim had been recovered first
#: (``fenced``: it may run twice), or it cannot be sent by its own fault (``unsendable``: it
#: alone is tried again later; ``set_aside``: at its last attempt, it was marked Failed).
RELEASE_ERROR_REASONS: Final = ("dispatch_failed", "fenced", "unsendable", "set_aside")
#: Why a job went out later than due: the release itself (a slow or stalled pass), or a rate
#: limit it waited for (observed when it is given back due at its slot, slot - due time).
LATENESS_CAUSES: Final = ("release", "rate_limit")


class MetricsRecorder(Protocol):
    """Events the schedulers report; every method must be cheap and must never raise."""

    def released(self, path: str, count: int) -> None: ...

    def release_errors(self, reason: str, count: int) -> None: ...

    def claims_recovered(self, count: int) -> None: ...

    def expired(self, count: int) -> None: ...

    def pass_seconds(self, kind: str, seconds: float) -> None: ...

    def lateness(self, seconds: float, cause: str = "release") -> None: ...

    def lock_held(self, lock: str, held: bool, shard: str = "0") -> None: ...

    def fired(self, count: int) -> None: ...

    def misfires(self, policy: str, count: int) -> None: ...

    def overlap_held(self, policy: str, count: int) -> None: ...

    def paused_after_failures(self, count: int) -> None: ...


class NullRecorder:
    """Metrics off: every event is dropped."""

    def released(self, path: str, count: int) -> None:
        pass

    def release_errors(self, reason: str, count: int) -> None:
        pass

    def claims_recovered(self, count: int) -> None:
        pass

    def expired(self, count: int) -> None:
        pass

    def pass_seconds(self, kind: str, seconds: float) -> None:
        pass

    def lateness(self, seconds: float, cause: str = "release") -> None:
        pass

    def lock_held(self, lock: str, held: bool, shard: str = "0") -> None:
        pass

    def fired(self, count: int) -> None:
        pass

    def misfires(self, policy: str, count: int) -> None:
        pass

    def overlap_held(self, policy: str, count: int) -> None:
        pass

    def paused_after_failures(self, count: int) -> None:
        pass


NULL_RECORDER: Final = NullRecorder()


def record_outcomes(recorder: MetricsRecorder, path: str, outcomes: Counter[Outcome]) -> None:
    """Report what one release of claimed jobs did, the jobs that went counted under ``path``."""
    recorder.released(path, outcomes[Outcome.RELEASED])
    recorder.release_errors("dispatch_failed", outcomes[Outcome.FAILED])
    recorder.release_errors("fenced", outcomes[Outcome.FENCED])
    recorder.release_errors("unsendable", outcomes[Outcome.BACKED_OFF])
    recorder.release_errors("set_aside", outcomes[Outcome.SET_ASIDE])
    recorder.expired(outcomes[Outcome.EXPIRED])
