"""Celery's own publish path: ``app.send_task`` per job, with the job id as the task id.

The path every option and every broker supports; the fast publishers fall back to it for a chunk
holding a job they cannot carry.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from storage_adapters import ClaimedJob

from ...dispatchers import BatchDispatchError, KeepGoing, always, decode_for_send, lease_lost

__all__ = ["CeleryDispatcher", "celery_options"]


def celery_options(options: dict[str, Any]) -> dict[str, Any]:
    """Our stored routing options as ``send_task`` keyword arguments."""
    out = dict(options)
    expires = out.get("expires")
    if isinstance(expires, (int, float)):
        out["expires"] = datetime.fromtimestamp(expires, tz=timezone.utc)
    return out


class CeleryDispatcher:
    """Sends through ``app.send_task`` on the app's real broker, with the job id as the task id.

    So ``AsyncResult(job_id)`` works, and a second delivery of one job carries the same task id,
    which makes duplicates detectable (and skippable) on the worker side.
    """

    publishes_chunks = False  # one publish per job (see ``dispatchers.release_path``)

    def __init__(self, app: Any) -> None:
        self.app = app

    def _send(self, job: ClaimedJob, producer: Any = None) -> None:
        args, kwargs, options = decode_for_send(job)
        self.app.send_task(
            job.task,
            args=args,
            kwargs=kwargs,
            task_id=job.id,
            producer=producer,
            **celery_options(options),
        )

    def dispatch(self, job: ClaimedJob) -> None:
        self._send(job)

    def dispatch_many(self, jobs: Sequence[ClaimedJob], keep_going: KeepGoing = always) -> None:
        """One producer (one broker connection) for the whole chunk instead of one per job."""
        sent = 0
        try:
            with self.app.producer_or_acquire() as producer:
                for job in jobs:
                    if not keep_going():
                        raise lease_lost()
                    self._send(job, producer)
                    sent += 1
        except Exception as exc:
            raise BatchDispatchError(sent, exc) from exc
