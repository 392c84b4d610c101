"""Liveness on Redis (``InstanceStore``): the part of ``RedisStorage`` that keeps one record per
scheduler process.

Keys: ``inst:<id>`` (hash: host, pid, version, started_at, heartbeat_at, details) and
``instances`` (every id, scored by its heartbeat time, so stale ones are a range). Heartbeats are
stamped with the server's ``TIME`` inside the scripts, so every host measures age on one clock.
"""

from __future__ import annotations

from storage_adapters.checks.instances import (
    check_details,
    check_instance,
    check_instance_id,
    stored_instance,
)
from storage_adapters.checks.values import epoch_seconds, positive_count
from storage_adapters.records import InstanceRecord
from storage_adapters.redis.plumbing import RedisPlumbing

__all__ = ["INSTANCE_SCRIPTS", "RedisInstanceStore"]

#: The scripts (lua/<name>.lua) this mixin runs; the host loads them with its own.
INSTANCE_SCRIPTS = (
    "register_instance",
    "heartbeat_instance",
    "remove_stale_instances",
    "list_instances",
    "remove_instance",
)


class RedisInstanceStore(RedisPlumbing):
    """Register, heartbeat, list and remove scheduler instances, for ``RedisStorage``."""

    def _instance_keys(self, instance_id: str) -> list[str]:
        return [self._key(f"inst:{instance_id}"), self._key("instances")]

    def register_instance(self, instance: InstanceRecord) -> None:
        check_instance(instance)
        args = [
            instance.id,
            instance.host,
            str(instance.pid),
            instance.version,
            repr(float(instance.started_at)),
            instance.details,
        ]
        self._run("register_instance", self._instance_keys(instance.id), args)

    def heartbeat_instance(self, instance_id: str, details: str) -> bool:
        check_instance_id(instance_id)
        args = [instance_id, check_details(details)]
        return self._run("heartbeat_instance", self._instance_keys(instance_id), args) is not None

    def list_instances(self) -> list[InstanceRecord]:
        rows = self._run("list_instances", [self._key("instances")], [self._key("inst:")])
        return [stored_instance(*row) for row in rows]

    def remove_instances_older_than(self, cutoff: float, limit: int = 1000) -> int:
        args = [
            self._key("inst:"),
            repr(epoch_seconds("cutoff", cutoff)),
            str(positive_count("limit", limit)),
        ]
        return int(self._run("remove_stale_instances", [self._key("instances")], args))

    def remove_instance(self, instance_id: str) -> bool:
        check_instance_id(instance_id)
        keys = self._instance_keys(instance_id)
        return bool(self._run("remove_instance", keys, [instance_id]))
