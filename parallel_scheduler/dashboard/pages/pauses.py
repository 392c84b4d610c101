"""The Pauses page ("Pauses and rate limits"): the pauses of a queue or task in force (kind, name,
note, who, since), a form to pause one with a note, and a Resume button per pause; then the rate
limits in force (kind, name, rate, burst, who, since, when the next job may go), a form to set
one, and a Remove button per limit. All are POSTs with the CSRF token (checked in ``app``) and a
ticked confirmation box, and leave one audit line.

The forms' values go to ``Client.pause`` and ``Client.limit`` as typed, so storage's checks
(``checks/pauses.py``, ``checks/rate_limits.py``) and the rate's text (``rate_limits``) refuse a
bad one in the same words as every other entry point; the page is then shown again with the
reason and what was typed, and nothing is written. Who paused or limited is the dashboard's
viewer (``user@address``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from flask import Flask, flash, g, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from parallel_scheduler.dashboard.context import audit, dashboard
from parallel_scheduler.dashboard.forms import require_confirmation
from parallel_scheduler.dashboard.inputs import BadInput
from parallel_scheduler.pausing import paused_text, resumed_text
from parallel_scheduler.rate_limits import checked_limit, limited_text, rate_text, unlimited_text
from storage_adapters import InvalidArgumentError, PauseKind
from storage_adapters.checks.pauses import MAX_PAUSE_NOTE_LENGTH, MAX_PAUSED_BY_LENGTH

__all__ = ["register"]


def _page(
    form: Mapping[str, str] | None = None,
    error: str | None = None,
    limit_form: Mapping[str, str] | None = None,
    limit_error: str | None = None,
) -> str:
    client = dashboard().client
    return render_template(
        "pauses.html",
        pauses=client.pauses(),
        limits=client.rate_limits(),
        rate_text=rate_text,
        now=time.time(),
        kinds=[kind.value for kind in PauseKind],
        form=form,
        error=error,
        limit_form=limit_form,
        limit_error=limit_error,
        note_limit=MAX_PAUSE_NOTE_LENGTH,
    )


def _viewer() -> str | None:
    return str(g.get("who") or "")[:MAX_PAUSED_BY_LENGTH] or None


def pauses() -> Any:
    return _page()


def pause() -> Any:
    form = request.form
    kind, name, note = form.get("kind", ""), form.get("name", ""), form.get("note", "")
    try:
        require_confirmation(form)
        held = dashboard().client.pause(kind, name, note, _viewer())
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


def limit() -> Any:
    form = request.form
    rate = form.get("rate", "")
    try:
        require_confirmation(form)
        kind, name, count, period, burst, by = checked_limit(
            form.get("kind", ""), form.get("name", ""), rate, form.get("burst", "1"), _viewer()
        )
        dashboard().client.limit(kind, name, rate, burst, by)
    except (InvalidArgumentError, BadInput) as exc:
        return _page(limit_form=form, limit_error=str(exc)), 400
    audit(f"limit_{kind.value}", [name], f"rate={rate_text(count, period)} burst={burst}")
    flash(limited_text(kind.value, name, count, period, burst))
    return redirect(url_for("pauses"), 303)


def unlimit() -> Response:
    form = request.form
    kind, name = form.get("kind", ""), form.get("name", "")
    require_confirmation(form)
    removed = dashboard().client.unlimit(kind, name)
    audit(f"unlimit_{kind}", [name], f"removed={removed}")
    flash(unlimited_text(kind, name, removed))
    return redirect(url_for("pauses"), 303)


def register(app: Flask) -> None:
    app.add_url_rule("/pauses", "pauses", pauses)
    app.add_url_rule("/pauses/pause", "pauses_pause", pause, methods=["POST"])
    app.add_url_rule("/pauses/resume", "pauses_resume", resume, methods=["POST"])
    app.add_url_rule("/pauses/limit", "pauses_limit", limit, methods=["POST"])
    app.add_url_rule("/pauses/unlimit", "pauses_unlimit", unlimit, methods=["POST"])
