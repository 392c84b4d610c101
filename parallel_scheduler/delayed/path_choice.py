"""Which release path a delayed scheduler takes, decided once when it is built (see
``paths.py`` for the four)."""

from __future__ import annotations

from parallel_scheduler.delayed.claim_batch import BatchClaims
from parallel_scheduler.delayed.claim_in_transaction import TransactionalClaims
from parallel_scheduler.delayed.claim_one_script import OneScriptRelease
from parallel_scheduler.delayed.claim_per_job import PerJobClaims
from parallel_scheduler.delayed.envelopes import script_release_for
from parallel_scheduler.delayed.paths import PathParts, ReleasePath
from parallel_scheduler.delayed.sending import Releaser
from parallel_scheduler.dispatchers import Dispatcher, metrics_label
from parallel_scheduler.engine.pool import BoundedPool
from parallel_scheduler.settings import Settings
from storage_adapters import Storage, TransactionalReleaseStorage

__all__ = ["choose_path"]


def choose_path(
    storage: Storage,
    dispatcher: Dispatcher,
    settings: Settings,
    releaser: Releaser,
    pool: BoundedPool,
) -> ReleasePath:
    """The per-job path in ``per_job`` mode; in ``batch`` mode the transactional path on
    storage that has it (PostgreSQL), the one-script path where storage can release to the
    dispatcher's broker lists (Redis), else the batch path."""
    per_job = settings.release_mode == "per_job"
    label = "per_job" if per_job else metrics_label(dispatcher)
    parts = PathParts(storage, releaser, pool, settings.batch_size, settings.lock_lease, label)
    if per_job:
        return PerJobClaims(parts)
    if isinstance(storage, TransactionalReleaseStorage):
        return TransactionalClaims(parts)
    script = script_release_for(storage, dispatcher)
    return BatchClaims(parts) if script is None else OneScriptRelease(script, parts)
