"""The release slots of a rate limit (``RateLimitStore``), as the generic cell rate algorithm
computes them: one home for the arithmetic that the SQL adapters run in a transaction and
``redis/lua/reserve_slots.lua`` mirrors in its script."""

from __future__ import annotations

__all__ = ["reserve_slots"]


def reserve_slots(
    tat: float | None, now: float, count: int, period: float, burst: int, wanted: int
) -> tuple[list[float], float]:
    """The next ``wanted`` slots of a limit of ``count`` per ``period`` seconds and ``burst``,
    whose theoretical arrival time is ``tat`` (``None``: never used), and its new ``tat``.

    Each slot is the first instant the bucket has a token for it: ``tat - (burst - 1) *
    interval``, or ``now`` if that has passed; taking it moves ``tat`` one interval past the
    later of itself and the slot."""
    interval = period / count
    tolerance = (burst - 1) * interval
    at = now if tat is None else tat
    slots = []
    for _ in range(wanted):
        slot = max(now, at - tolerance)
        slots.append(slot)
        at = max(at, slot) + interval
    return slots, at
