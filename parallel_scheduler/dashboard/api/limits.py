"""``/api/v1/limits``: the rate limits of queues and tasks in force, setting one (``POST``, a JSON
body ``{"kind": "queue"|"task", "name": ..., "rate": "100/s", "burst": 1}``: 201 with its
numbers; setting one again replaces it) and removing one (``DELETE /limits/{kind}/{name}``; 404
when none is in force).

The body's values go to ``Client.limit`` as sent, so the rate's text (``rate_limits.parse_rate``)
and storage's checks (``checks/rate_limits.py``) refuse a bad kind, name, rate or burst in the
same words as the command line and the dashboard's form (a 400, nothing written). Who set it is
the caller as the API authenticated it (``user@address``).
"""

from __future__ import annotations

from flask import Blueprint, Response, g

from parallel_scheduler.dashboard.api.body import json_body
from parallel_scheduler.dashboard.api.guard import ApiError, reply
from parallel_scheduler.dashboard.context import audit, dashboard
from parallel_scheduler.rate_limits import checked_limit, limit_name, limit_view, limited_view
from storage_adapters.checks.pauses import MAX_PAUSED_BY_LENGTH

__all__ = ["register"]


def list_limits() -> Response:
    return reply({"limits": [limit_view(limit) for limit in dashboard().client.rate_limits()]})


def create_limit() -> Response:
    body = json_body(("kind", "name", "rate", "burst"))
    by = str(g.get("who") or "")[:MAX_PAUSED_BY_LENGTH] or None
    rate = body.get("rate")
    burst = body.get("burst", 1)
    checked = checked_limit(body.get("kind"), body.get("name"), rate, burst, by, typed=False)
    kind, name, count, period, burst, set_by = checked
    dashboard().client.limit(kind, name, str(rate), burst, set_by)
    shown = limited_view(kind, name, count, period, burst, set_by)
    audit(f"api_limit_{kind.value}", [name], f"rate={shown['rate']} burst={burst}")
    return reply(shown, 201)


def delete_limit(kind: str, name: str) -> Response:
    json_body(())
    checked, name = limit_name(kind, name)
    if not dashboard().client.unlimit(checked, name):
        raise ApiError(404, "not_found", f"no rate limit of {checked.value} {name!r} is in force")
    audit(f"api_unlimit_{checked.value}", [name])
    return reply({"kind": checked.value, "name": name, "removed": True})


def register(api: Blueprint) -> None:
    api.add_url_rule("/limits", "limits", list_limits)
    api.add_url_rule("/limits", "limits_create", create_limit, methods=["POST"])
    api.add_url_rule(
        "/limits/<kind>/<path:name>", "limits_delete", delete_limit, methods=["DELETE"]
    )
