"""The optional abilities beyond ``Storage`` that an adapter may have, each a faster release path
the scheduler takes when the storage offers it (see ``base.py`` for the contract itself)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from storage_adapters.records import (
    ClaimedJob,
    LockLease,
    PlannedFiring,
)

__all__ = [
    "ChunkSend",
    "ChunkSettlement",
    "ListFiringStorage",
    "ListReleasingStorage",
    "TransactionalFiringStorage",
    "TransactionalReleaseStorage",
]


@runtime_checkable
class ListReleasingStorage(Protocol):
    """An optional ability beyond ``Storage``: release due jobs straight onto the lists of a
    Redis-list broker that lives on the storage's own server, in one atomic step per batch.

    Only jobs with an ``envelope`` (``<list key>\n<message>``) move that way; the others come
    back claimed, for the usual send -> ``mark_enqueued``. The lease is checked as in
    ``claim_due``.
    """

    def server_identity(self) -> str:
        """Equal for two connections exactly when they reach the same server process."""

    def release_to_lists(
        self, limit: int, lock: LockLease, lease: float, list_db: int
    ) -> tuple[list[ClaimedJob], list[ClaimedJob]]:
        """``(moved, claimed)``: jobs pushed onto database ``list_db`` and Enqueued (reported
        without payload or envelope, which they no longer need), then the claimed rest; each
        earliest due first."""


@runtime_checkable
class ListFiringStorage(Protocol):
    """An optional ability beyond ``Storage``, beside ``ListReleasingStorage``: fire a chunk of
    recurring jobs as ``fire_recurring_many`` does, and in the same atomic step push every new
    firing job that is due and carries an ``envelope`` onto its list, Enqueued, so a tick goes
    from storage to the broker without waiting for the next release."""

    def fire_recurring_to_lists(
        self, lock: LockLease, planned: Sequence[PlannedFiring], list_db: int
    ) -> tuple[list[list[bool] | None], list[ClaimedJob]]:
        """``(flags, pushed)``: ``fire_recurring_many``'s answer, and the firing jobs pushed onto
        database ``list_db`` and Enqueued (without payload or envelope), in chunk order."""


class ChunkSettlement(Protocol):
    """The writes that end some of a chunk's claims otherwise than Enqueued, made inside the
    transaction that claimed them (see ``TransactionalReleaseStorage``)."""

    def expire(self, claims: Sequence[ClaimedJob], reason: str) -> None:
        """These claims become ``EXPIRED`` with ``reason`` (their message was never sent)."""

    def unclaim(self, claims: Sequence[ClaimedJob], reason: str) -> None:
        """These claims were not sent: ``SCHEDULED`` again, due at once, with ``reason``."""

    def back_off(self, claims: Sequence[ClaimedJob], reason: str, delay: float) -> None:
        """These claims cannot be sent for now: ``SCHEDULED`` again, due ``delay`` seconds from
        now (storage clock), with ``reason``."""

    def fail(self, claims: Sequence[ClaimedJob], reason: str) -> None:
        """These claims cannot be sent at all: set aside as ``FAILED``, with ``reason``."""

    def defer(self, claims: Sequence[ClaimedJob], due_ats: Sequence[float], note: str) -> None:
        """These claims wait for their rate limit: as ``RateLimitStore.defer``."""


#: What a transaction that wrote jobs Enqueued calls on them: sends them, and settles through the
#: ``ChunkSettlement`` what it did not send.
ChunkSend = Callable[[list[ClaimedJob], ChunkSettlement], None]


@runtime_checkable
class TransactionalReleaseStorage(Protocol):
    """An optional ability beyond ``Storage``: claim a chunk, send it and settle it in one
    database transaction, so a chunk costs one row write per job and no mark statement.

    The claim takes each row's lock (``FOR UPDATE SKIP LOCKED``, so concurrent claimers skip
    each other's rows) and writes it ``ENQUEUED`` at once; ``send`` runs while the transaction
    is open, and writes what it did not send through the ``ChunkSettlement``; the commit then
    makes the chunk's fate durable in one step. A crash or a lost connection before the commit
    rolls the whole chunk back to ``SCHEDULED``: nothing is lost, and what was already sent may
    be sent again (at most the chunks in flight, as with a crash between send and mark). A
    client stalled inside the transaction is ended by the server (PostgreSQL's idle-in-
    transaction timeout), with the same outcome.
    """

    #: Seconds ``send`` may spend inside the transaction before it must stop sending and give
    #: the rest back (well inside the server's idle-in-transaction timeout).
    send_budget: float

    def release_in_transaction(
        self,
        job_ids: Sequence[str],
        lock: LockLease,
        send: ChunkSend,
    ) -> list[ClaimedJob]:
        """Claim those of ``job_ids`` that are still due and not locked by another claimer
        (only while ``lock`` is the held lease, as ``claim_due``), call ``send`` with them
        (earliest due first), then commit; returns the claims. ``send`` raising rolls back
        every write of the chunk and the error propagates; a failed commit raises the
        contract's ``StorageError``: then no write of the chunk happened."""


@runtime_checkable
class TransactionalFiringStorage(Protocol):
    """An optional ability beyond ``Storage``, beside ``TransactionalReleaseStorage``: fire a
    chunk of recurring jobs as ``fire_recurring_many`` does and, in the same transaction, write
    each new firing job that is due and not held by a pause ``ENQUEUED`` (its first attempt,
    under ``lock``'s token) and send it, so a tick reaches the broker without a release.

    ``send`` gets those firings (earliest due first, with their ``envelope``) and writes what it
    did not send through the ``ChunkSettlement``, as in ``release_in_transaction``; the commit
    makes the firings, their recurring jobs' advance and the sends' fate durable in one step.
    Rolled back (``send`` raised, a crash, a lost connection), none of it happened: the next pass
    fires the same ticks again, and what was already sent may be sent again.
    """

    #: Seconds ``send`` may spend inside the transaction (``TransactionalReleaseStorage``).
    send_budget: float

    def fire_and_send_in_transaction(
        self,
        lock: LockLease,
        planned: Sequence[PlannedFiring],
        send: ChunkSend,
    ) -> list[list[bool] | None]:
        """``fire_recurring_many``'s answer, after ``send`` ran on the due firings it created
        and the transaction committed. The chunk is checked first; bad input writes nothing."""
