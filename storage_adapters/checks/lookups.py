"""Looking a job up by an id that no job can have: not found, without asking the server.

A job or recurring job is stored only under an id that passes ``validate_job_id`` (printable, no
spaces, at most 200 characters). An id that fails it (a NUL, a newline, a lone surrogate) names
none, so ``get_job``, ``cancel``, ``reschedule``, ``get_recurring``, ``remove_recurring`` and
``set_recurring_enabled`` answer "not found" at once, on every backend alike,
where the driver would otherwise fail on it in its own way (psycopg's ``DataError`` for a NUL,
a bare ``UnicodeEncodeError`` for a surrogate).
"""

from __future__ import annotations

from collections.abc import Sequence

from storage_adapters.errors import InvalidArgumentError, InvalidIdentifierError
from storage_adapters.records import validate_job_id

__all__ = ["MAX_LOOKUP_IDS", "checked_id_batch", "names_no_job"]

#: The most ids one existence lookup (``existing_recurring_ids``) may name.
MAX_LOOKUP_IDS = 10_000


def names_no_job(job_id: object) -> bool:
    """True when ``job_id`` breaks the id rules, so that no stored job (or recurring job) can
    have it."""
    try:
        validate_job_id(job_id)  # type: ignore[arg-type]
    except InvalidIdentifierError:
        return True
    return False


def checked_id_batch(ids: Sequence[str]) -> list[str]:
    """The distinct ids of one existence lookup that can name a stored job, in the order given
    (the others name none, so they are left out rather than refused)."""
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence):
        raise InvalidArgumentError("ids must be a sequence of ids, not a single string")
    if len(ids) > MAX_LOOKUP_IDS:
        raise InvalidArgumentError(f"{len(ids)} ids in one lookup; the limit is {MAX_LOOKUP_IDS}")
    return [i for i in dict.fromkeys(ids) if not names_no_job(i)]
