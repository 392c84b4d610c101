"""Importing django-celery-beat's periodic tasks: every ``PeriodicTask`` of one Django database
mapped (``beat_mapping``), compared with the store (create, update, unchanged), then saved (the
recurring jobs through ``save_many``, all or nothing per chunk; clocked and one-off tasks as
delayed jobs with deterministic ids), and optionally disabled at the source in one transaction.
Running it twice changes nothing the second time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from parallel_scheduler.client import Client
from parallel_scheduler.contrib.django.beat_mapping import Mapped, Refused, Skipped, map_task
from parallel_scheduler.errors import InvalidJobError
from parallel_scheduler.jobs import JobSpec, decode_payload
from parallel_scheduler.recurring.accepting import new_recurring
from parallel_scheduler.recurring.triggers import Schedule

__all__ = ["ImportRow", "import_django_celery_beat", "plan_import"]

#: Actions of a row: written (or to be written), already there, or left out (with the reason).
ACTIONS = ("create", "update", "unchanged", "refused", "skipped")


@dataclass
class ImportRow:
    """One PeriodicTask and what the import does with it."""

    name: str
    id: str
    task: str
    schedule: str
    zone: str
    queue: str
    action: str
    reason: str = ""
    pk: int | None = None
    mapped: Mapped | None = None

    @property
    def imported(self) -> bool:
        return self.action in ("create", "update", "unchanged")


def _beat_schedule_names() -> tuple[set[str], str]:
    """The Celery app's ``beat_schedule`` entries (the plugin's beat sync owns those) and its
    time zone's name."""
    from celery import current_app

    zone = current_app.timezone
    return set(current_app.conf.beat_schedule or {}), str(getattr(zone, "key", "UTC"))


def _tasks(database: str) -> list[Any]:
    from django_celery_beat.models import PeriodicTask

    rows = PeriodicTask.objects.using(database).select_related(
        "crontab", "interval", "clocked", "solar"
    )
    return list(rows.order_by("name"))


def _recurring_action(client: Client, item: Mapping[str, Any], now: float) -> str:
    """``create``, ``update`` or ``unchanged``; ``InvalidJobError`` if ``save`` would refuse it."""
    fields = dict(item)
    recurring_id, task = fields.pop("id"), fields.pop("task")
    record = new_recurring(
        recurring_id, task, now=now, max_payload_bytes=client.settings.max_payload_bytes, **fields
    )
    existing = client.recurring.get(recurring_id)
    if existing is None:
        return "create"
    args, kwargs, options = decode_payload(record.payload)
    same = (
        existing.problem is None
        and (existing.task, existing.args, existing.kwargs, existing.options)
        == (task, args, kwargs, options)
        and existing.schedule == Schedule.from_json(record.schedule)
        and existing.enabled == record.enabled
    )
    return "unchanged" if same else "update"


def _delayed_spec(mapped: Mapped) -> JobSpec:
    call = dict(mapped.item)
    args, kwargs, eta = call.pop("args"), call.pop("kwargs"), call.pop("eta")
    return JobSpec(mapped.task, args=args, kwargs=kwargs, options=call, id=mapped.id, eta=eta)


def _delayed_action(client: Client, mapped: Mapped, now: float) -> str:
    _delayed_spec(mapped).encode(now, client.settings.max_payload_bytes)  # validates
    return "create" if client.get(mapped.id) is None else "unchanged"


def _left_out(task: Any, action: str, reason: str) -> ImportRow:
    return ImportRow(task.name, "", task.task, "", "", task.queue or "", action, reason, pk=task.pk)


def _row(client: Client, task: Any, now: datetime, owned: set[str], zone: str) -> ImportRow:
    if task.name in owned:
        why = "in the Celery app's beat_schedule: the plugin's beat sync keeps it (beat-<name>)"
        return _left_out(task, "skipped", why)
    try:
        mapped = map_task(task, now, zone)
    except Skipped as exc:
        return _left_out(task, "skipped", str(exc))
    except Refused as exc:
        return _left_out(task, "refused", str(exc))
    row = ImportRow(
        task.name,
        mapped.id,
        task.task,
        mapped.schedule,
        mapped.zone,
        mapped.queue,
        "",
        pk=task.pk,
        mapped=mapped,
    )
    try:
        if mapped.kind == "recurring":
            row.action = _recurring_action(client, mapped.item, now.timestamp())
        else:
            row.action = _delayed_action(client, mapped, now.timestamp())
    except (InvalidJobError, TypeError) as exc:
        row.action, row.reason, row.mapped = "refused", str(exc), None
    return row


def plan_import(client: Client, database: str = "default") -> list[ImportRow]:
    """What importing the PeriodicTasks of Django database ``database`` would do, per task, in
    name order; writes nothing."""
    now = datetime.now(timezone.utc)
    owned, zone = _beat_schedule_names()
    rows = [_row(client, task, now, owned, zone) for task in _tasks(database)]
    seen: dict[str, str] = {}
    for row in rows:
        if row.mapped is None:
            continue
        if row.id in seen:
            row.action, row.mapped = "refused", None
            row.reason = f"its id {row.id!r} is also the id of {seen[row.id]!r}"
            continue
        seen[row.id] = row.name
    return rows


def _write(client: Client, rows: list[ImportRow]) -> None:
    """The recurring jobs in ``save_many`` (upsert), then the delayed ones in one bulk write."""
    changed = [r.mapped for r in rows if r.mapped and r.action in ("create", "update")]
    recurring = [m.item for m in changed if m.kind == "recurring"]
    if recurring:
        client.recurring.save_many(recurring, mode="upsert")
    delayed = [_delayed_spec(m) for m in changed if m.kind == "delayed"]
    if delayed:
        client.schedule_many(delayed)


def disable_source(database: str, pks: list[int]) -> int:
    """Disable these PeriodicTasks in one transaction and tell a running beat (django-celery-
    beat's change marker, ``PeriodicTasks.update_changed`` on this database); returns how many
    were enabled."""
    from django.db import transaction
    from django_celery_beat.models import PeriodicTask, PeriodicTasks
    from django_celery_beat.utils import now as beat_now

    with transaction.atomic(using=database):
        disabled = int(
            PeriodicTask.objects.using(database)
            .filter(pk__in=pks, enabled=True)
            .update(enabled=False)
        )
        PeriodicTasks.objects.using(database).update_or_create(
            ident=1, defaults={"last_update": beat_now()}
        )
    return disabled


def import_django_celery_beat(
    client: Client,
    *,
    database: str = "default",
    dry_run: bool = False,
    disable_source_tasks: bool = False,
) -> list[ImportRow]:
    """Plan, then (unless ``dry_run``) write and, with ``disable_source_tasks``, disable the
    imported PeriodicTasks once the write succeeded. Refused and skipped tasks are never
    written nor disabled."""
    rows = plan_import(client, database)
    if dry_run:
        return rows
    _write(client, rows)
    if disable_source_tasks:
        pks = [row.pk for row in rows if row.imported and row.pk is not None]
        if pks:
            disable_source(database, pks)
    return rows
