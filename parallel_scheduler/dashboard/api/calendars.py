"""``/api/v1/calendars``: the calendars of excluded dates (``GET``), one of them (``GET
/calendars/{name}``, 404 when none), creating or replacing one whole (``PUT /calendars/{name}``
with ``{"dates": ["2026-12-25", "2026-12-24..2026-12-31"], "timezone": "Europe/Berlin"}``) and
deleting one (``DELETE /calendars/{name}``, 404 when none).

The body's values go to ``Client.put_calendar`` as sent, so storage's checks
(``checks/calendars.py``) refuse a bad name, zone or date in the same words as the command line
(a 400, nothing written). The auth, read-only and CSRF rules are the API's (``guard``), as for
the pauses. Who set a calendar is the caller as the API authenticated it (``user@address``).
"""

from __future__ import annotations

from flask import Blueprint, Response, g

from parallel_scheduler.calendars import calendar_view
from parallel_scheduler.dashboard.api.body import json_body
from parallel_scheduler.dashboard.api.guard import ApiError, reply
from parallel_scheduler.dashboard.context import audit, dashboard
from parallel_scheduler.dashboard.inputs import BadInput
from storage_adapters.checks.calendars import check_calendar_name
from storage_adapters.checks.pauses import MAX_PAUSED_BY_LENGTH

__all__ = ["register"]


def list_calendars() -> Response:
    return reply({"calendars": [calendar_view(c) for c in dashboard().client.calendars()]})


def get_calendar(name: str) -> Response:
    found = dashboard().client.calendar(check_calendar_name(name))
    if found is None:
        raise ApiError(404, "not_found", f"no calendar {name!r}")
    return reply(calendar_view(found))


def put_calendar(name: str) -> Response:
    body = json_body(("dates", "timezone"))
    dates, zone = body.get("dates", []), body.get("timezone", "UTC")
    if not isinstance(dates, list) or not all(isinstance(d, (str, list)) for d in dates):
        raise BadInput("dates must be a list of ISO dates, FIRST..LAST ranges or [first, last]")
    ranges = [tuple(d) if isinstance(d, list) else d for d in dates]
    by = str(g.get("who") or "")[:MAX_PAUSED_BY_LENGTH] or None
    stored = dashboard().client.put_calendar(name, ranges, zone, by)
    audit("api_put_calendar", [name], f"ranges={len(stored.ranges)}")
    return reply(calendar_view(stored))


def delete_calendar(name: str) -> Response:
    json_body(())
    if not dashboard().client.remove_calendar(check_calendar_name(name)):
        raise ApiError(404, "not_found", f"no calendar {name!r}")
    audit("api_remove_calendar", [name], "")
    return reply({"name": name, "removed": True})


def register(api: Blueprint) -> None:
    api.add_url_rule("/calendars", "calendars", list_calendars)
    api.add_url_rule("/calendars/<path:name>", "calendars_get", get_calendar)
    api.add_url_rule("/calendars/<path:name>", "calendars_put", put_calendar, methods=["PUT"])
    api.add_url_rule(
        "/calendars/<path:name>", "calendars_delete", delete_calendar, methods=["DELETE"]
    )
