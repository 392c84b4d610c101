"""The one-script path: with storage and a Redis-list broker on one Redis server and accept-time
messages, one Lua script moves the batch's ready messages from the due set to the broker lists
and marks them Enqueued, atomically; what it cannot move (a job stored without its message, or
due to a list the script does not serve) comes back claimed and goes by the batch path.

Whether the two share a server is asked once, at the first pass (``ScriptRelease.list_db``):
until then, and for good when they do not, batches go by the batch path alone. While a rate
limit is in force, batches go by the batch path too, where every claim passes its limits.
"""

from __future__ import annotations

import time
from collections import Counter

from parallel_scheduler.delayed.claim_batch import BatchClaims, send_in_chunks
from parallel_scheduler.delayed.envelopes import ScriptRelease
from parallel_scheduler.delayed.paths import BatchRelease, PathParts
from parallel_scheduler.engine.held_lock import HeldLock
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.engine.stats import Outcome

__all__ = ["OneScriptRelease"]


class OneScriptRelease:
    def __init__(self, script: ScriptRelease, parts: PathParts) -> None:
        self._script = script
        self._parts = parts
        self._fallback = BatchClaims(parts)
        self._list_db: int | None = None
        self._list_db_known = False

    def list_db(self) -> int | None:
        """The broker database on storage's own Redis server, else ``None``: asked once."""
        if not self._list_db_known:
            self._list_db = call_storage(self._script.list_db)
            self._list_db_known = True
        return self._list_db

    @property
    def releases_by_script(self) -> bool:
        """True once a pass found storage and broker on one Redis server, while no rate limit
        is in force."""
        return self._list_db is not None and not self._parts.releaser.limits.active

    def release_batch(self, held: HeldLock) -> BatchRelease:
        db = self.list_db()
        if db is None or self._parts.releaser.limits.active:  # the script knows no limits
            return self._fallback.release_batch(held)
        parts = self._parts
        claimed_at = time.monotonic()  # before the claim request: see Releaser.release_claims
        moved, claims = call_storage(
            lambda: self._script.release(parts.batch_size, held.lease, parts.claim_lease, db)
        )
        parts.releaser.notify(moved)
        outcomes = send_in_chunks(parts, claims, held, claimed_at)
        by_script = Counter({Outcome.RELEASED: len(moved)})
        return BatchRelease(
            len(moved) + len(claims),
            outcomes + by_script,
            {"one_script": by_script, parts.label: outcomes},
        )
