"""What every adapter checks before making or ending a pause (``PauseStore`` in
``contract/pauses.py``): one home for the bounds and the refusals."""

from __future__ import annotations

from storage_adapters.errors import InvalidArgumentError
from storage_adapters.records import MAX_TASK_NAME_LENGTH, PauseKind

__all__ = [
    "MAX_PAUSED_BY_LENGTH",
    "MAX_PAUSE_NOTE_LENGTH",
    "check_pause",
    "check_pause_name",
    "check_pause_note",
]

#: The longest note a pause keeps (why it was paused, for the people who see it).
MAX_PAUSE_NOTE_LENGTH = 1000
#: The longest ``paused_by`` kept (a user, a host, a process).
MAX_PAUSED_BY_LENGTH = 255


def check_pause_name(kind: object, name: object) -> tuple[PauseKind, str]:
    """The pause's kind and name as storage keeps them: a queue or task name is 1-255 printable
    characters without surrounding spaces, as a task name is."""
    try:
        checked = PauseKind(kind)
    except ValueError:
        raise InvalidArgumentError(f"a pause names a 'queue' or a 'task', not {kind!r}") from None
    what = f"{checked.value} name"
    if not isinstance(name, str) or not 0 < len(name) <= MAX_TASK_NAME_LENGTH:
        raise InvalidArgumentError(
            f"{what} must be a string of 1-{MAX_TASK_NAME_LENGTH} characters, not {name!r}"
        )
    if name != name.strip() or not name.isprintable():
        raise InvalidArgumentError(
            f"{what} {name!r} must be printable, without leading or trailing spaces"
        )
    return checked, name


def check_pause(
    kind: object, name: object, note: object, paused_by: object
) -> tuple[PauseKind, str, str, str]:
    """All of a new pause, checked: ``check_pause_name``, then a note of at most 1000 and a
    ``paused_by`` of at most 255 characters (either may be empty)."""
    checked, checked_name = check_pause_name(kind, name)
    return (checked, checked_name, *check_pause_note(note, paused_by))


def check_pause_note(note: object, paused_by: object) -> tuple[str, str]:
    """A pause's note (at most 1000 characters) and ``paused_by`` (at most 255), either may be
    empty: one rule for the pauses of queues and tasks and those of recurring jobs."""
    for what, value, limit in (
        ("note", note, MAX_PAUSE_NOTE_LENGTH),
        ("paused_by", paused_by, MAX_PAUSED_BY_LENGTH),
    ):
        if not isinstance(value, str) or len(value) > limit:
            raise InvalidArgumentError(
                f"a pause's {what} must be a string of at most {limit} characters"
            )
    return str(note), str(paused_by)
