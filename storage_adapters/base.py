"""The storage contract every adapter implements (its records are in ``records``, its errors in
``errors``).

This package is a leaf: it never imports ``parallel_scheduler``. A job reaches storage as an opaque,
already-serialised ``payload`` (the message the dispatcher will send), so an adapter never needs to
understand Celery, and a message is serialised once, when the job is accepted.

Time is a float of seconds since the Unix epoch (UTC) read from the storage server's clock
(PostgreSQL ``now()``, Redis ``TIME``, the local clock for SQLite), so scheduler hosts with
skewed clocks agree on what is due. Durations are float seconds.

Releasing a job is a three-step hand-off that never marks a job Enqueued before it was sent:

1. **claim** (one id under its per-job lock, or a whole due batch in one statement): the job leaves
   the due set and becomes ``CLAIMED`` with a lease and the claimer's fencing token;
2. the scheduler hands the payload to the worker system;
3. **mark_enqueued** (sent) or **unclaim** (the hand-off failed; the job is due again at once);
   a job its dispatcher cannot send (``UnsendableJobError``) is **back_off** (due again later, on
   its own) or, after its last attempt, **fail** (set aside as ``FAILED``).

A claimer that dies between 1 and 3 leaves a claim whose lease runs out; the next lock holder's
``recover_expired_claims`` makes it due again. So a crash can send a job twice (at most the jobs in
flight at the crash), and can never lose one.

The contract reads as eight small ones, each a ``Protocol`` of its own (in ``contract/``, as are
the optional abilities beyond it), which ``Storage`` joins:
``StorageAdmin`` (schema, clock, connections), ``JobStore`` (accept and manage delayed jobs),
``ReleaseStore`` (the hand-off above), ``LockStore`` (the fenced distributed lock),
``RecurringStore`` (recurring jobs and their firings), ``InstanceStore`` (which scheduler
processes are alive), ``RetentionStore`` (deleting old finished jobs) and ``BrowseStore``
(filtered keyset pages and finish counts, for the dashboard, ``Client.list`` and the
command line, through ``paging.py``), and ``OutcomeStore`` (what Celery workers did with each
released job, written in batches by the workers' plugin; purged with the jobs),
``PauseStore`` (pauses of a queue or task, whose jobs are held back from release),
``RateLimitStore`` (release budgets of a queue or task, shared by every scheduler),
``UniqueJobStore`` (one job per task and unique key waiting to be released), and
``CalendarStore`` (named calendars of excluded dates that recurring jobs do not fire on). The
core's signatures name the families they use.

Bad input is refused before anything is written, with an error of the tree in ``errors``:
``InvalidArgumentError`` (a ``ValueError``) for an argument out of range, ``InvalidRecordError``
for a record that breaks the contract, ``InvalidIdentifierError`` for an unsafe id or name.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from storage_adapters.contract.abilities import (
    ChunkSend,
    ChunkSettlement,
    ListFiringStorage,
    ListReleasingStorage,
    TransactionalFiringStorage,
    TransactionalReleaseStorage,
)
from storage_adapters.contract.admin import InstanceStore, StorageAdmin
from storage_adapters.contract.calendars import CalendarStore
from storage_adapters.contract.jobs import BrowseStore, JobStore, RetentionStore
from storage_adapters.contract.outcomes import OutcomeStore
from storage_adapters.contract.pauses import PauseStore
from storage_adapters.contract.rate_limits import RateLimitStore
from storage_adapters.contract.recurring import RecurringStore
from storage_adapters.contract.release import LockStore, ReleaseStore
from storage_adapters.contract.unique import UniqueJobStore

__all__ = [
    "BrowseStore",
    "CalendarStore",
    "ChunkSend",
    "ChunkSettlement",
    "InstanceStore",
    "JobStore",
    "ListFiringStorage",
    "ListReleasingStorage",
    "LockStore",
    "OutcomeStore",
    "PauseStore",
    "RateLimitStore",
    "RecurringStore",
    "ReleaseStore",
    "RetentionStore",
    "Storage",
    "StorageAdmin",
    "TransactionalFiringStorage",
    "TransactionalReleaseStorage",
    "UniqueJobStore",
]


@runtime_checkable
class Storage(
    StorageAdmin,
    JobStore,
    ReleaseStore,
    LockStore,
    RecurringStore,
    InstanceStore,
    RetentionStore,
    BrowseStore,
    OutcomeStore,
    PauseStore,
    RateLimitStore,
    UniqueJobStore,
    CalendarStore,
    Protocol,
):
    """Durable store of scheduled jobs and distributed locks: every family above, in one object.

    Every method is safe to call from many threads and many processes at once. Methods that take
    a ``lock`` refuse to act (return nothing, change nothing) unless that lease is still the
    current holder of its lock on the storage clock: that is the fence that stops a stalled
    scheduler from acting on ownership it lost.
    """
