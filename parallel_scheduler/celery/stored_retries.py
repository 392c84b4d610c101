"""Stored retries: ``self.retry(countdown=…)`` beyond the threshold waits in storage, not in a
worker's memory, and runs again as the same task (same id, ``request.retries`` one higher).

A job id is an idempotency key, and the retried task's own id may be stored already (the task was
itself released by the scheduler, and that job is now ``enqueued``). So each retry is stored under
an id of its own, derived from the task id and the retry number (``<task id>:retry-<n>``), while
its message keeps the task's id and retry count in the headers (see ``call_options``). List or
cancel a retry by that derived id; ``revoke(task_id)`` cancels the task's stored retries too.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator

from storage_adapters import MAX_JOB_ID_LENGTH

__all__ = [
    "REVOKE_RETRY_SPAN",
    "is_retry",
    "note_stored_retry",
    "retry_job_id",
    "retry_job_ids",
    "stored_retry_of",
]

#: ``revoke(task_id)`` cancels the stored retries numbered 1 to this (Celery's own default
#: ``max_retries`` is 3; a task that retries more often than this is revoked by its derived ids).
REVOKE_RETRY_SPAN = 100


def is_retry(retries: object) -> bool:
    """Whether a call is a retry: Celery passes ``retries=request.retries + 1`` (at least 1)."""
    return isinstance(retries, int) and not isinstance(retries, bool) and retries >= 1


def retry_job_id(task_id: str, retries: int) -> str | None:
    """The storage id of retry number ``retries`` of ``task_id``; ``None`` when the task id is
    too long to derive one (the retry then stays on Celery's own path)."""
    job_id = f"{task_id}:retry-{retries}"
    return job_id if len(job_id) <= MAX_JOB_ID_LENGTH else None


def retry_job_ids(task_id: str) -> Iterator[str]:
    """The ids ``revoke(task_id)`` cancels besides ``task_id`` itself."""
    for number in range(1, REVOKE_RETRY_SPAN + 1):
        job_id = retry_job_id(task_id, number)
        if job_id is None:
            return
        yield job_id


#: Stored retries of this process, by the task id they retry: ``task_retry`` (sent right after
#: ``self.retry()`` stored one, in the same process) links the retry's outcome to the stored job.
_NOTED: OrderedDict[str, str] = OrderedDict()
_NOTED_LIMIT = 1000
_noted_guard = threading.Lock()


def note_stored_retry(task_id: str, job_id: str) -> None:
    """Remember that ``task_id``'s retry was stored as ``job_id`` (the newest 1000 kept)."""
    with _noted_guard:
        _NOTED[task_id] = job_id
        while len(_NOTED) > _NOTED_LIMIT:
            _NOTED.popitem(last=False)


def stored_retry_of(task_id: str) -> str | None:
    """The job id ``task_id``'s retry was stored under in this process, once; else ``None``."""
    with _noted_guard:
        return _NOTED.pop(task_id, None)
