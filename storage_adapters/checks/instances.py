"""Input checks of the liveness family (``InstanceStore``), run by every adapter before it
writes, and the tolerant reading of a stored record back (one bad record never stops a listing).
"""

from __future__ import annotations

from storage_adapters.checks.values import epoch_seconds, stored_seconds
from storage_adapters.errors import InvalidArgumentError
from storage_adapters.records import InstanceRecord, check_key_part

__all__ = [
    "MAX_HOST_LENGTH",
    "MAX_INSTANCE_ID_LENGTH",
    "MAX_VERSION_LENGTH",
    "check_details",
    "check_instance",
    "check_instance_id",
    "stored_instance",
    "stored_pid",
]

MAX_INSTANCE_ID_LENGTH = 200
MAX_HOST_LENGTH = 255
MAX_VERSION_LENGTH = 64
#: JSON details of one instance (passes, locks, settings) are small; this bounds a runaway one.
MAX_DETAILS_LENGTH = 64 * 1024


def check_instance_id(instance_id: str) -> str:
    """Ids become Redis key parts: printable, no spaces, bounded length."""
    return check_key_part("instance id", instance_id, MAX_INSTANCE_ID_LENGTH)


def check_details(details: str) -> str:
    if not isinstance(details, str) or len(details) > MAX_DETAILS_LENGTH:
        raise InvalidArgumentError(
            f"instance details must be text of at most {MAX_DETAILS_LENGTH} characters"
        )
    return details


def _text(name: str, value: str, limit: int) -> str:
    if not isinstance(value, str) or len(value) > limit:
        raise InvalidArgumentError(f"instance {name} must be text of at most {limit} characters")
    return value


def check_instance(instance: InstanceRecord) -> InstanceRecord:
    check_instance_id(instance.id)
    _text("host", instance.host, MAX_HOST_LENGTH)
    _text("version", instance.version, MAX_VERSION_LENGTH)
    pid = instance.pid
    if isinstance(pid, bool) or not isinstance(pid, int) or not 0 <= pid < 2**31:
        raise InvalidArgumentError(f"instance pid must be an integer >= 0, not {pid!r}")
    epoch_seconds("started_at", instance.started_at)
    check_details(instance.details)
    return instance


def stored_pid(value: object) -> int:
    """A pid as read back, never an error: -1 when it holds no integer (the core flags it)."""
    try:
        return int(value)  # type: ignore[call-overload, no-any-return]
    except (TypeError, ValueError):
        return -1


def stored_instance(
    instance_id: str,
    host: object,
    pid: object,
    version: object,
    started_at: object,
    heartbeat_at: object,
    details: object,
) -> InstanceRecord:
    """A record from stored fields as they are, never an error (a hand-edited or half-written
    record reads as NaN times, pid -1 and empty text, which status shows flagged)."""
    return InstanceRecord(
        id=instance_id,
        host="" if host is None else str(host),
        pid=stored_pid(pid),
        version="" if version is None else str(version),
        started_at=stored_seconds(started_at),
        heartbeat_at=stored_seconds(heartbeat_at),
        details="" if details is None else str(details),
    )
