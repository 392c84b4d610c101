"""Broker messages built once, when a job is accepted, and the one-script release they allow.

A dispatcher that can build a job's broker message ahead of time (an ``EnvelopeMaker``) lets the
client store it with the job, so the release path does no serialisation at all. When, besides,
that broker keeps its queues as lists on the very Redis server that stores the jobs (a
``ListBroker`` whose server a ``ListReleasingStorage`` shares), a due batch moves from the
schedule onto the broker's lists in one server-side script: pushed and Enqueued together, with
no window in which a crash could send a job twice.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol, runtime_checkable

from storage_adapters import ListReleasingStorage, NewJob, Storage

__all__ = ["EnvelopeMaker", "ListBroker", "direct_list_db", "with_envelopes"]

logger = logging.getLogger("parallel_scheduler.envelopes")


@runtime_checkable
class EnvelopeMaker(Protocol):
    def envelope(self, job: NewJob) -> str | None:
        """The job's broker message as ``<list key>\\n<message>``, or ``None`` when this job
        must be built at release time (its options need the slow path, or it can expire)."""


@runtime_checkable
class ListBroker(Protocol):
    def list_server(self) -> tuple[str, int]:
        """The broker's Redis server identity (its ``run_id``) and database number."""


def with_envelopes(jobs: Sequence[NewJob], maker: EnvelopeMaker | None) -> list[NewJob]:
    if maker is None:
        return list(jobs)
    return [replace(job, envelope=maker.envelope(job)) for job in jobs]


def direct_list_db(storage: Storage, dispatcher: object) -> int | None:
    """The broker database to release into by script, or ``None`` when storage and broker do
    not share a Redis server (then the batch is claimed, sent and marked as usual)."""
    if not isinstance(storage, ListReleasingStorage) or not isinstance(dispatcher, ListBroker):
        return None
    server, db = dispatcher.list_server()
    if server != storage.server_identity():
        logger.info("storage and broker are different Redis servers: releasing by claim and send")
        return None
    logger.info("storage and broker share a Redis server: releasing by one script per batch")
    return db
