"""A call's ``eta``/``countdown`` read the way Celery reads them, before it is stored or not.

Celery takes a countdown of seconds (``if countdown:`` — a zero countdown is no countdown, and
the eta applies) and an eta as a datetime (naive: UTC, as its workers read it) or an ISO 8601
string, which it sends as it is and its worker parses (``maybe_iso8601``). Every one of those
forms must be measured and stored alike, or a far call in a form not measured would wait in
worker memory. Other real numbers (``Decimal``, ``Fraction``) and a ``timedelta`` countdown are
read as the seconds they say; what Celery itself cannot use (``eta="tomorrow"``, a number as an
eta, ``countdown="abc"``) is refused here with an error naming the argument, nothing stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from celery.utils.time import maybe_iso8601, maybe_make_aware

from parallel_scheduler.errors import InvalidJobError
from parallel_scheduler.ranges import as_float, is_number, shown

__all__ = ["CallTime", "read_call_time"]


@dataclass(frozen=True)
class CallTime:
    """When a call is due: ``countdown`` seconds from now, or at ``eta`` (aware), or now."""

    countdown: float | None = None
    eta: datetime | None = None

    def delay(self, now: datetime) -> float | None:
        """Seconds from ``now`` until the call is due (``None``: due now)."""
        if self.countdown is not None:
            return self.countdown
        if self.eta is not None:
            return (self.eta - now).total_seconds()
        return None


def _seconds(countdown: object) -> float:
    """A countdown as seconds; past a float's range, an infinity (refused by the job model)."""
    if isinstance(countdown, timedelta):
        return countdown.total_seconds()
    if isinstance(countdown, bool) or is_number(countdown):  # Celery takes True as 1 s
        return as_float(countdown)
    raise InvalidJobError(
        f"countdown must be a number of seconds (or a timedelta), not {shown(countdown)}"
    )


def _eta(eta: object, zone: Any) -> datetime:
    """An eta as the aware instant Celery's worker would read from it."""
    if isinstance(eta, date) and not isinstance(eta, datetime):
        eta = eta.isoformat()  # Celery sends a date as its ISO text; its worker parses it
    if isinstance(eta, str):
        try:
            parsed = maybe_iso8601(eta)
        except (ValueError, OverflowError, TypeError):
            raise InvalidJobError(
                f"eta {shown(eta)} is not an ISO 8601 date and time "
                "(for example 2030-01-01T09:00:00+00:00)"
            ) from None
        assert parsed is not None  # maybe_iso8601 returns None only for an empty string
        eta = parsed
    if not isinstance(eta, datetime):
        raise InvalidJobError(
            f"eta must be a datetime or an ISO 8601 string, not {shown(eta)} "
            "(Celery's apply_async takes no epoch seconds; task.schedule() does)"
        )
    try:
        aware: datetime = maybe_make_aware(eta, zone)
    except (OverflowError, ValueError) as exc:  # a naive eta at the very ends of datetime
        raise InvalidJobError(f"eta {eta.isoformat()} cannot be placed in time: {exc}") from None
    return aware


def read_call_time(countdown: Any, eta: Any, zone: Any) -> CallTime:
    """``countdown`` and ``eta`` of one ``apply_async``/``send_task`` call, read as Celery reads
    them (``zone``: the app's time zone, for a naive eta); ``InvalidJobError`` for a value Celery
    could not use either."""
    if countdown:  # Celery's own test: a zero countdown leaves the eta in charge
        return CallTime(countdown=_seconds(countdown))
    if eta is None or eta == "":  # Celery sends "" as no eta, and its worker reads it so
        return CallTime()
    return CallTime(eta=_eta(eta, zone))
