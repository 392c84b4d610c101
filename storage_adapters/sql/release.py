"""The release hand-off in SQL: fetch due ids, claim them under the scheduler lock's fencing
token, and settle each claim (enqueued, unclaimed, backed off, failed, expired): the
``ReleaseStore`` family of ``SQLStorage``. PostgreSQL's one-transaction release is
``sql/transactional_release.py``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from storage_adapters.checks.values import error_text, positive_count, positive_seconds
from storage_adapters.records import ClaimedJob, LockLease
from storage_adapters.sql.idle_rerun import rerun_if_ended_idle
from storage_adapters.sql.job_rows import claimed_job
from storage_adapters.sql.plumbing import SQLPlumbing

__all__ = ["SQLReleaseStore"]


class SQLReleaseStore(SQLPlumbing):
    """Fetch, claim, settle and recover due jobs, for ``SQLStorage`` to inherit."""

    def fetch_due_ids(self, limit: int) -> list[str]:
        positive_count("limit", limit)
        return [row.id for row in self._due_rows(self._sql.fetch_due, {"limit": int(limit)})]

    def _claim_params(self, lock: LockLease, lease: float) -> dict[str, Any]:
        return {
            "lock_name": lock.name,
            "lock_owner": lock.owner,
            "lock_token": lock.token,
            "lease": positive_seconds("lease", lease),
        }

    def claim(self, job_id: str, lock: LockLease, lease: float) -> ClaimedJob | None:
        params = self._claim_params(lock, lease)
        rows = self._driver_rows(self._sql.claim, {**params, "job_id": job_id})
        return claimed_job(rows[0], lock.token) if rows else None

    def claim_due(self, limit: int, lock: LockLease, lease: float) -> list[ClaimedJob]:
        params = {**self._claim_params(lock, lease), "limit": positive_count("limit", limit)}
        rows = self._due_rows(self._sql.claim_due, params)
        claims = [claimed_job(row, lock.token) for row in rows]
        # RETURNING follows the update's physical order, not the due order the contract promises.
        return sorted(claims, key=lambda c: (c.due_at, c.id))

    @rerun_if_ended_idle
    def _settle(
        self,
        statement: sa.Update,
        claims: Sequence[ClaimedJob],
        error: str | None = None,
        **extra: float,
    ) -> list[str]:
        """One statement per fencing token; several run as one transaction, so all or none.
        ``extra``: further bound parameters of ``statement``."""
        by_token: dict[int, list[str]] = {}
        for claim in claims:
            by_token.setdefault(claim.token, []).append(claim.id)
        if not by_token:
            return []
        settled: set[str] = set()
        if len(by_token) == 1:  # one statement, atomic by itself: the per-job path's mark
            ((token, ids),) = by_token.items()
            params = {
                "ids": self._dialect.bind_ids(ids),
                "held_token": token,
                "error": error,
                **extra,
            }
            settled.update(row[0] for row in self._driver_rows(statement, params))
        else:
            with self._transaction() as conn:
                for token, ids in by_token.items():
                    params = {
                        "ids": self._dialect.bind_ids(ids),
                        "held_token": token,
                        "error": error,
                        **extra,
                    }
                    settled.update(conn.execute(statement, params).scalars())
        return [job_id for job_id in dict.fromkeys(c.id for c in claims) if job_id in settled]

    def mark_enqueued(self, claims: Sequence[ClaimedJob]) -> list[str]:
        return self._settle(self._sql.mark_enqueued, claims)

    def unclaim(self, claims: Sequence[ClaimedJob], error: str | None = None) -> list[str]:
        return self._settle(self._sql.unclaim, claims, error)

    def expire(self, claims: Sequence[ClaimedJob], reason: str) -> list[str]:
        return self._settle(self._sql.expire, claims, reason)

    def back_off(self, claims: Sequence[ClaimedJob], error: str, delay: float) -> list[str]:
        delay = positive_seconds("delay", delay)
        return self._settle(self._sql.back_off, claims, error_text(error), delay=delay)

    def fail(self, claims: Sequence[ClaimedJob], error: str) -> list[str]:
        return self._settle(self._sql.fail, claims, error_text(error))

    def recover_expired_claims(self, limit: int = 10_000) -> int:
        return self._changed(self._sql.recover, {"limit": positive_count("limit", limit)})

    def next_due_at(self) -> float | None:
        due = self._scalar(self._sql.next_due_at)
        return None if due is None else float(due)

    def next_work_at(self) -> float | None:
        (row,) = self._rows(self._sql.next_work_at, {})
        return min((float(at) for at in row if at is not None), default=None)
