"""Every dashboard action of a Django user also in Django's admin log (``LogEntry``): the user,
the ``Scheduler`` model's content type, the action and the ids, beside our own audit line."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["recorder"]

logger = logging.getLogger(__name__)
#: Ids named in one entry's message at most (our audit line names them all).
IDS_SHOWN = 100


def _flag(action: str) -> int:
    from django.contrib.admin.models import ADDITION, CHANGE, DELETION

    if action.endswith("_create"):
        return int(ADDITION)
    if action.endswith("_remove"):
        return int(DELETION)
    return int(CHANGE)


def _kind(action: str) -> str:
    """What an action's ids name: recurring jobs, the queue or task of a pause or a limit, a
    calendar, else jobs."""
    if "recurring" in action:
        return "recurring job"
    for kind in ("queue", "task", "calendar"):  # pause_queue, api_put_calendar, ...
        if action.endswith(f"_{kind}"):
            return kind
    return "job"


def _what(action: str, ids: Sequence[str]) -> str:
    kind = _kind(action)
    if len(ids) == 1:
        return f"{action} {kind} {ids[0]}"
    return f"{action} {len(ids)} {kind}s: {', '.join(ids)}" if ids else f"{action}: no {kind}"


def _message(action: str, ids: Sequence[str], detail: str) -> str:
    shown = ", ".join(ids[:IDS_SHOWN]) or "-"
    more = f" and {len(ids) - IDS_SHOWN} more" if len(ids) > IDS_SHOWN else ""
    return f"Scheduler: {action} ({detail or 'no detail'}); ids: {shown}{more}"


def write_entry(user_id: Any, action: str, ids: Sequence[str], detail: str) -> None:
    """One ``LogEntry`` for one dashboard action of user ``user_id``."""
    from django.contrib.admin.models import LogEntry
    from django.contrib.contenttypes.models import ContentType

    from parallel_scheduler.contrib.django.models import Scheduler

    LogEntry.objects.create(
        user_id=user_id,
        content_type_id=ContentType.objects.get_for_model(Scheduler).pk,
        object_id=ids[0] if len(ids) == 1 else None,
        object_repr=_what(action, ids)[:200],
        action_flag=_flag(action),
        change_message=_message(action, ids, detail),
    )


def recorder(user_id: Any) -> Callable[[str, Sequence[str], str], None]:
    """The dashboard's ``on_audit`` hook for user ``user_id`` (none without the admin app)."""
    from django.apps import apps
    from django.db import DatabaseError

    def record(action: str, ids: Sequence[str], detail: str) -> None:
        if not apps.is_installed("django.contrib.admin"):
            return
        try:
            write_entry(user_id, action, ids, detail)
        except DatabaseError:  # done already: say the admin log missed it, loudly
            logger.exception("the admin log missed %s on %s (in our audit log)", action, ids)

    return record
