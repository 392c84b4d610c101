"""Jitter: a job's due instant moved by a pseudo-random offset, so that many installs (or many
recurring jobs on one cron) do not all fire in the same second.

The offset is a pure function of the job's key (its id, or the recurring job's id) and the
instant it would have been due: a retried accept of the same job, or two schedulers firing the
same tick, land on the same instant. It lies in ``[0, jitter)`` and, for a recurring tick, below
the gap to the next tick, so a tick never fires after the one that follows it.
"""

from __future__ import annotations

import hashlib
import math
from datetime import timedelta

from parallel_scheduler.errors import InvalidJobError
from parallel_scheduler.ranges import MAX_INTERVAL, as_float, is_number, shown

__all__ = ["check_jitter", "jitter_offset"]

#: 53 bits of a hash over this is a fraction in [0, 1) that a float holds exactly.
_SCALE = float(2**53)


def check_jitter(jitter: object) -> float:
    """Seconds (or a ``timedelta``) from 0 to ``MAX_INTERVAL``; ``None`` is 0; anything else is
    refused with ``InvalidJobError`` naming it."""
    if jitter is None:
        return 0.0
    if isinstance(jitter, timedelta):
        jitter = jitter.total_seconds()
    if not is_number(jitter):
        raise InvalidJobError(f"jitter must be a number of seconds, not {shown(jitter)}")
    value = as_float(jitter)
    if not math.isfinite(value) or not 0 <= value <= MAX_INTERVAL:
        raise InvalidJobError(
            f"jitter must be from 0 to {MAX_INTERVAL:g} seconds (100 years), not {shown(jitter)}"
        )
    return value


def jitter_offset(key: str, instant: float, jitter: float, room: float = math.inf) -> float:
    """The offset in ``[0, min(jitter, room))`` of ``key`` due at ``instant``: the same for the
    same three values in every process (a hash, not a random draw). ``room`` is the gap to the
    next tick of a recurring job."""
    spread = min(jitter, room)
    if not spread > 0:
        return 0.0
    digest = hashlib.blake2b(f"{key}\x00{instant!r}".encode(), digest_size=8).digest()
    fraction = (int.from_bytes(digest, "big") >> 11) / _SCALE
    return min(spread * fraction, math.nextafter(spread, 0.0))  # never the whole spread
