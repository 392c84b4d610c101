"""What one scheduler pass did, counted by outcome, so callers and tests can check every job."""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import asdict, dataclass

__all__ = ["Outcome", "PassStats"]


class Outcome(str, enum.Enum):
    RELEASED = "released"  # sent to the worker system and marked Enqueued
    NOT_CLAIMED = "not_claimed"  # another claimer had it, or it was no longer due
    EXPIRED = "expired"  # its expiry passed before release: not sent, marked Expired
    FAILED = "failed"  # the hand-off failed: back to Scheduled, tried again later
    FENCED = "fenced"  # sent, but the claim had been recovered meanwhile: may run twice
    STOPPED = "stopped"  # left Scheduled: shutdown, lost lock or a failing dispatcher


@dataclass
class PassStats:
    lock_acquired: bool = False
    batches: int = 0
    fetched: int = 0
    recovered: int = 0
    released: int = 0
    not_claimed: int = 0
    expired: int = 0
    failed: int = 0
    fenced: int = 0
    stopped: int = 0
    duration: float = 0.0

    def add_batch(self, fetched: int, outcomes: Counter[Outcome]) -> None:
        self.batches += 1
        self.fetched += fetched
        for outcome, count in outcomes.items():
            setattr(self, outcome.value, getattr(self, outcome.value) + count)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)
