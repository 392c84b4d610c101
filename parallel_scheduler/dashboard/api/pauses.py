"""``/api/v1/pauses``: the pauses of a queue or task in force, pausing one (``POST``, a JSON
body ``{"kind": "queue"|"task", "name": ..., "note": ...}``: 201 with how many scheduled jobs it
held) and resuming one (``DELETE /pauses/{kind}/{name}``: how many held jobs are scheduled again;
404 when none is in force).

The body's values go to ``Client.pause`` as sent, so storage's checks (``checks/pauses.py``)
refuse a bad kind, name or note in the same words as the command line and the dashboard's form (a
400, nothing written). Who paused is the caller as the API authenticated it (``user@address``).
"""

from __future__ import annotations

from flask import Blueprint, Response, g

from parallel_scheduler.dashboard.api.body import json_body
from parallel_scheduler.dashboard.api.guard import ApiError, reply
from parallel_scheduler.dashboard.context import audit, dashboard
from parallel_scheduler.pausing import pause_view
from parallel_scheduler.views import paused_view, resumed_view
from storage_adapters.checks.pauses import MAX_PAUSED_BY_LENGTH, check_pause_name

__all__ = ["register"]


def list_pauses() -> Response:
    return reply({"pauses": [pause_view(pause) for pause in dashboard().client.pauses()]})


def create_pause() -> Response:
    body = json_body(("kind", "name", "note"))
    kind, name, note = body.get("kind", ""), body.get("name", ""), body.get("note", "")
    by = str(g.get("who") or "")[:MAX_PAUSED_BY_LENGTH] or None
    held = dashboard().client.pause(kind, name, note, by)
    audit(f"api_pause_{kind}", [str(name)], f"held={held}")
    return reply(paused_view(str(kind), str(name), held), 201)


def delete_pause(kind: str, name: str) -> Response:
    json_body(())
    checked, name = check_pause_name(kind, name)
    client = dashboard().client
    was_paused = any((p.kind, p.name) == (checked, name) for p in client.pauses())
    released = client.resume(checked, name)
    if not was_paused and not released:
        raise ApiError(404, "not_found", f"no pause of {checked.value} {name!r} is in force")
    audit(f"api_resume_{checked.value}", [name], f"released={released}")
    return reply(resumed_view(checked.value, name, released))


def register(api: Blueprint) -> None:
    api.add_url_rule("/pauses", "pauses", list_pauses)
    api.add_url_rule("/pauses", "pauses_create", create_pause, methods=["POST"])
    api.add_url_rule(
        "/pauses/<kind>/<path:name>", "pauses_delete", delete_pause, methods=["DELETE"]
    )
