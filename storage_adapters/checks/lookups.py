"""Looking a job up by an id that no job can have: not found, without asking the server.

A job or recurring job is stored only under an id that passes ``validate_job_id`` (printable, no
spaces, at most 200 characters). An id that fails it (a NUL, a newline, a lone surrogate) names
none, so ``get_job``, ``cancel``, ``reschedule``, ``get_recurring``, ``remove_recurring`` and
``set_recurring_enabled`` answer "not found" at once, on every backend alike,
where the driver would otherwise fail on it in its own way (psycopg's ``DataError`` for a NUL,
a bare ``UnicodeEncodeError`` for a surrogate).
"""

from __future__ import annotations

from storage_adapters.errors import InvalidIdentifierError
from storage_adapters.records import validate_job_id

__all__ = ["names_no_job"]


def names_no_job(job_id: object) -> bool:
    """True when ``job_id`` breaks the id rules, so that no stored job (or recurring job) can
    have it."""
    try:
        validate_job_id(job_id)  # type: ignore[arg-type]
    except InvalidIdentifierError:
        return True
    return False
