"""The unique-job options every entry point checks (``unique_key``, ``on_conflict``): the storage
checks' own bounds and words, raised as ``InvalidJobError`` like any other bad job, before any
write."""

from __future__ import annotations

from parallel_scheduler.errors import InvalidJobError
from storage_adapters.checks.unique import UNIQUE_CONFLICTS, check_unique_key
from storage_adapters.errors import InvalidRecordError
from storage_adapters.records import UniqueConflict

__all__ = ["check_on_conflict", "check_unique_options"]


def check_on_conflict(on_conflict: object) -> UniqueConflict:
    """``"keep"`` or ``"replace"``, refused in the words of ``checks/unique.py``."""
    if on_conflict not in UNIQUE_CONFLICTS:
        raise InvalidJobError(f"on_conflict must be 'keep' or 'replace', not {on_conflict!r}")
    return on_conflict


def check_unique_options(unique_key: object, on_conflict: object) -> str | None:
    """The unique key (``None``: not a unique job), both options checked as storage checks
    them."""
    check_on_conflict(on_conflict)
    if unique_key is None:
        return None
    try:
        return check_unique_key(unique_key)
    except InvalidRecordError as exc:
        raise InvalidJobError(str(exc)) from None
