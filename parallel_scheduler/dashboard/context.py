"""What views share about the current request: the dashboard's client and options, the viewer's
time zone, and the audit log line every action leaves."""

from __future__ import annotations

import logging
import zoneinfo
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timezone

from flask import current_app, g, session

from parallel_scheduler.client import Client
from parallel_scheduler.dashboard.inputs import zone_names
from parallel_scheduler.dashboard.security import BasicAuth, TokenAuth

__all__ = ["Dashboard", "audit", "dashboard", "viewer_zone"]

#: One line per action: who (auth user or token, and the remote address), what, which ids.
audit_log = logging.getLogger("parallel_scheduler.dashboard.audit")


@dataclass(frozen=True)
class Dashboard:
    """What every view needs, kept in ``app.extensions["parallel_scheduler"]``."""

    client: Client
    read_only: bool
    auth: BasicAuth | TokenAuth | None


def dashboard() -> Dashboard:
    found: Dashboard = current_app.extensions["parallel_scheduler"]
    return found


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
