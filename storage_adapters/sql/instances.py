"""The liveness family of the ``Storage`` contract on SQL (``InstanceStore`` in ``base.py``): one
row per scheduler process in ``{prefix}_instances``, its ``heartbeat_at`` stamped by the server's
clock in the statement itself, so hosts with skewed clocks agree on how old a heartbeat is.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import sqlalchemy as sa

from storage_adapters.checks.instances import (
    check_details,
    check_instance,
    check_instance_id,
    stored_instance,
)
from storage_adapters.checks.values import epoch_seconds, positive_count
from storage_adapters.records import InstanceRecord
from storage_adapters.sql.plumbing import SQLPlumbing

__all__ = ["SQLInstanceStore"]


@dataclass(frozen=True)
class _InstanceStatements:
    register: sa.Executable
    heartbeat: sa.Executable
    list_all: sa.Select[Any]
    remove_older: sa.Executable
    remove: sa.Executable


class SQLInstanceStore(SQLPlumbing):
    """Register, heartbeat, list and remove scheduler instances."""

    @cached_property
    def _instance_sql(self) -> _InstanceStatements:
        table = self._tables.instances
        now = self._dialect.now
        columns = ("id", "host", "pid", "version", "started_at", "details")
        insert = self._dialect.insert(table).values(
            **{name: sa.bindparam(name) for name in columns}, heartbeat_at=now
        )
        register = insert.on_conflict_do_update(
            index_elements=[table.c.id],
            set_={name: insert.excluded[name] for name in (*columns[1:], "heartbeat_at")},
        )
        instance_id = table.c.id == sa.bindparam("instance_id", type_=sa.String)
        heartbeat = (
            sa.update(table)
            .where(instance_id)
            .values(heartbeat_at=now, details=sa.bindparam("details", type_=sa.Text))
        )
        # bounded: the ids of at most ``limit`` stale rows, then those rows
        stale = (
            sa.select(table.c.id)
            .where(table.c.heartbeat_at < sa.bindparam("cutoff", type_=sa.Double))
            .order_by(table.c.heartbeat_at)
            .limit(sa.bindparam("limit", type_=sa.Integer))
            .scalar_subquery()
        )
        return _InstanceStatements(
            register=register,
            heartbeat=heartbeat,
            list_all=sa.select(
                table.c.id,
                table.c.host,
                table.c.pid,
                table.c.version,
                table.c.started_at,
                table.c.heartbeat_at,
                table.c.details,
            ).order_by(table.c.id),
            remove_older=sa.delete(table).where(table.c.id.in_(stale)),
            remove=sa.delete(table).where(instance_id),
        )

    def register_instance(self, instance: InstanceRecord) -> None:
        check_instance(instance)
        params = {
            "id": instance.id,
            "host": instance.host,
            "pid": instance.pid,
            "version": instance.version,
            "started_at": float(instance.started_at),
            "details": instance.details,
        }
        with self._connection() as conn:
            conn.execute(self._instance_sql.register, params)

    def heartbeat_instance(self, instance_id: str, details: str) -> bool:
        params = {"instance_id": check_instance_id(instance_id), "details": check_details(details)}
        return self._changed(self._instance_sql.heartbeat, params) == 1

    def list_instances(self) -> list[InstanceRecord]:
        rows = self._rows(self._instance_sql.list_all, {})
        return [
            stored_instance(
                row.id,
                row.host,
                row.pid,
                row.version,
                row.started_at,
                row.heartbeat_at,
                row.details,
            )
            for row in rows
        ]

    def remove_instances_older_than(self, cutoff: float, limit: int = 1000) -> int:
        params = {
            "cutoff": epoch_seconds("cutoff", cutoff),
            "limit": positive_count("limit", limit),
        }
        return self._changed(self._instance_sql.remove_older, params)

    def remove_instance(self, instance_id: str) -> bool:
        params = {"instance_id": check_instance_id(instance_id)}
        return self._changed(self._instance_sql.remove, params) == 1
