"""Which release path a delayed scheduler takes, decided once when it is built (see
``paths.py`` for the four)."""

from __future__ import annotations

from parallel_scheduler.delayed.claim_batch import BatchClaims
from parallel_scheduler.delayed.claim_in_transaction import TransactionalClaims
from parallel_scheduler.delayed.claim_one_script import OneScriptRelease
from parallel_scheduler.delayed.claim_per_job import PerJobClaims
from parallel_scheduler.delayed.envelopes import script_release_for
from parallel_scheduler.delayed.paths import ReleasePath
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
    size, lease = settings.batch_size, settings.lock_lease
    if settings.release_mode == "per_job":
        return PerJobClaims(storage, releaser, pool, size, lease)
    label = metrics_label(dispatcher)
    if isinstance(storage, TransactionalReleaseStorage):
        return TransactionalClaims(storage, releaser, pool, size, label)
    batch = BatchClaims(storage, releaser, pool, size, lease, label)
    script = script_release_for(storage, dispatcher)
    if script is None:
        return batch
    return OneScriptRelease(script, batch, releaser, pool, size, lease, label)
