"""What every adapter checks before purging finished jobs (``RetentionStore`` in ``base.py``):
one home for the states that may be purged and the argument checks, so the three adapters refuse
the same input with the same words and write nothing then."""

from __future__ import annotations

from collections.abc import Iterable

from storage_adapters.checks.values import epoch_seconds, member, positive_count
from storage_adapters.errors import InvalidArgumentError
from storage_adapters.records import JobState

__all__ = ["PURGEABLE_STATES", "check_purge"]

#: The states a job never leaves, and so the only ones retention may delete.
PURGEABLE_STATES = tuple(state for state in JobState if state.is_terminal)


def check_purge(
    states: Iterable[JobState | str], older_than: float, limit: int
) -> tuple[list[JobState], float, int]:
    """The checked arguments of ``purge_finished``: distinct terminal states in a fixed order."""
    chosen: list[JobState] = []
    for given in states:
        state = member(JobState, given, "unknown job state {!r}")
        if not state.is_terminal:
            finished = ", ".join(s.value for s in PURGEABLE_STATES)
            raise InvalidArgumentError(
                f"only finished jobs can be purged ({finished}), not {state.value}"
            )
        if state not in chosen:
            chosen.append(state)
    if not chosen:
        raise InvalidArgumentError("states must name at least one finished state")
    return chosen, epoch_seconds("older_than", older_than), positive_count("limit", limit)
