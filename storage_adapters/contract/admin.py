"""The families about the store and the processes using it rather than its jobs: schema, clock
and connections (``StorageAdmin``), and which scheduler processes are alive (``InstanceStore``)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from storage_adapters.records import InstanceRecord

__all__ = ["InstanceStore", "StorageAdmin"]


@runtime_checkable
class StorageAdmin(Protocol):
    """Schema, clock and connections."""

    def setup(self) -> None:
        """Create or upgrade the schema. Idempotent; safe to run from several processes."""

    def now(self) -> float:
        """The storage server's clock, in epoch seconds."""

    def close(self) -> None:
        """Release connections. The adapter is unusable afterwards."""

    def drop(self) -> None:
        """Delete every table or key under this adapter's prefix (uninstall, test clean-up)."""


@runtime_checkable
class InstanceStore(Protocol):
    """Liveness: every scheduler process keeps a record of itself, stamped by the storage clock
    on each heartbeat, so anyone can tell which schedulers are alive and what each is doing."""

    def register_instance(self, instance: InstanceRecord) -> None:
        """Create or replace the record of ``instance.id``; storage stamps ``heartbeat_at``
        with its own ``now()`` (the value given is ignored)."""

    def heartbeat_instance(self, instance_id: str, details: str) -> bool:
        """Stamp ``heartbeat_at = now()`` and replace ``details``; ``False`` (nothing written)
        when the record is gone (removed as dead while this process stalled: register again)."""

    def list_instances(self) -> list[InstanceRecord]:
        """Every stored record, ordered by id."""

    def remove_instances_older_than(self, cutoff: float, limit: int = 1000) -> int:
        """Delete up to ``limit`` records whose ``heartbeat_at`` is before ``cutoff``; how many."""

    def remove_instance(self, instance_id: str) -> bool:
        """Delete one record (a graceful stop); ``False`` if it was not there."""
