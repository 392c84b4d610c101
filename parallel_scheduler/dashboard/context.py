"""What views share about the current request: the dashboard's client and options, the viewer's
time zone, whether this request may change anything, and the audit log line every action leaves
(passed on to the embedding site's ``on_audit`` hook when embedded)."""

from __future__ import annotations

import logging
import zoneinfo
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timezone

from flask import current_app, g, request, session

from parallel_scheduler.client import Client
from parallel_scheduler.dashboard.inputs import zone_names
from parallel_scheduler.dashboard.security import VIEWER_KEY, BasicAuth, TokenAuth, Viewer

__all__ = ["Dashboard", "audit", "dashboard", "embedded_viewer", "read_only", "viewer_zone"]

#: One line per action: who (auth user or token, and the remote address), what, which ids.
audit_log = logging.getLogger("parallel_scheduler.dashboard.audit")


@dataclass(frozen=True)
class Dashboard:
    """What every view needs, kept in ``app.extensions["parallel_scheduler"]``."""

    client: Client
    read_only: bool
    auth: BasicAuth | TokenAuth | None
    embedded: bool = False


def dashboard() -> Dashboard:
    found: Dashboard = current_app.extensions["parallel_scheduler"]
    return found


def embedded_viewer() -> Viewer | None:
    """The embedding site's viewer of this request; ``None`` when standalone or when the site
    vouched for no one (then the request is refused)."""
    if not dashboard().embedded:
        return None
    found = request.environ.get(VIEWER_KEY)
    return found if isinstance(found, Viewer) else None


def read_only() -> bool:
    """Whether this request may change nothing: read-only mode, or (embedded) a viewer without
    the permission the view's kind of action needs (jobs or recurring jobs)."""
    board = dashboard()
    if board.read_only:
        return True
    if not board.embedded:
        return False
    viewer = embedded_viewer()
    return viewer is None or not viewer.may_change(request.endpoint)


def viewer_zone() -> zoneinfo.ZoneInfo | timezone:
    """The zone the viewer chose (``?tz=``, remembered in the session), else UTC."""
    chosen = session.get("tz")
    if isinstance(chosen, str) and chosen in zone_names():
        return zoneinfo.ZoneInfo(chosen)
    return timezone.utc


def audit(action: str, ids: Sequence[str], detail: str = "") -> None:
    audit_log.info(
        "dashboard audit: who=%s action=%s ids=%s%s",
        g.get("who", "-"),
        action,
        ",".join(ids) or "-",
        f" {detail}" if detail else "",
    )
    viewer = embedded_viewer()
    if viewer is not None and viewer.on_audit is not None:
        viewer.on_audit(action, list(ids), detail)
