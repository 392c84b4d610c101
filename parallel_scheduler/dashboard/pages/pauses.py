"""The Pauses page: the pauses of a queue or task in force (kind, name, note, who, since), a form
to pause one with a note, and a Resume button per pause. Both are POSTs with the CSRF token
(checked in ``app``) and a ticked confirmation box, and leave one audit line.

The form's kind, name and note go to ``Client.pause`` as typed, so storage's checks
(``checks/pauses.py``) refuse a bad one in the same words as every other entry point; the page
is then shown again with the reason and what was typed, and nothing is written. Who paused is
the dashboard's viewer (``user@address``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask import Flask, flash, g, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from parallel_scheduler.dashboard.context import audit, dashboard
from parallel_scheduler.dashboard.forms import require_confirmation
from parallel_scheduler.dashboard.inputs import BadInput
from parallel_scheduler.pausing import paused_text, resumed_text
from storage_adapters import InvalidArgumentError, PauseKind
from storage_adapters.checks.pauses import MAX_PAUSE_NOTE_LENGTH, MAX_PAUSED_BY_LENGTH

__all__ = ["register"]


def _page(form: Mapping[str, str] | None = None, error: str | None = None) -> str:
    return render_template(
        "pauses.html",
        pauses=dashboard().client.pauses(),
        kinds=[kind.value for kind in PauseKind],
        form=form,
        error=error,
        note_limit=MAX_PAUSE_NOTE_LENGTH,
    )


def pauses() -> Any:
    return _page()


def pause() -> Any:
    form = request.form
    kind, name, note = form.get("kind", ""), form.get("name", ""), form.get("note", "")
    try:
        require_confirmation(form)
        by = str(g.get("who") or "")[:MAX_PAUSED_BY_LENGTH] or None
        held = dashboard().client.pause(kind, name, note, by)
    except (InvalidArgumentError, BadInput) as exc:
        return _page(form, str(exc)), 400
    audit(f"pause_{kind}", [name], f"held={held}")
    flash(paused_text(kind, name, held))
    return redirect(url_for("pauses"), 303)


def resume() -> Response:
    form = request.form
    kind, name = form.get("kind", ""), form.get("name", "")
    require_confirmation(form)
    client = dashboard().client
    was_paused = any((p.kind.value, p.name) == (kind, name) for p in client.pauses())
    released = client.resume(kind, name)
    audit(f"resume_{kind}", [name], f"released={released}")
    flash(resumed_text(kind, name, released, was_paused))
    return redirect(url_for("pauses"), 303)


def register(app: Flask) -> None:
    app.add_url_rule("/pauses", "pauses", pauses)
    app.add_url_rule("/pauses/pause", "pauses_pause", pause, methods=["POST"])
    app.add_url_rule("/pauses/resume", "pauses_resume", resume, methods=["POST"])
