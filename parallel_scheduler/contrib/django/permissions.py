"""Who may use the scheduler's pages and API in a Django site, and what they may change.

As in the Django admin, only active staff users are let in, and then only with one of the
``Scheduler`` model's permissions: ``view_scheduler`` to look, ``change_jobs`` to cancel,
reschedule and run jobs now (and to pause, rate-limit and keep calendars), ``change_recurring``
to create, edit, pause, trigger and remove recurring jobs (either change permission implies
looking; a superuser has them all).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["CHANGE_JOBS", "CHANGE_RECURRING", "VIEW", "Access", "access_of"]

VIEW = "parallel_scheduler.view_scheduler"
CHANGE_JOBS = "parallel_scheduler.change_jobs"
CHANGE_RECURRING = "parallel_scheduler.change_recurring"


@dataclass(frozen=True)
class Access:
    """What one user may do: ``staff`` (let in at all), then look and change."""

    staff: bool
    view: bool
    change_jobs: bool
    change_recurring: bool


NOBODY = Access(staff=False, view=False, change_jobs=False, change_recurring=False)


def access_of(user: Any) -> Access:
    """``user``'s access (Django's ``request.user``; anonymous has none)."""
    if not (user.is_authenticated and user.is_active and user.is_staff):
        return NOBODY
    jobs = bool(user.has_perm(CHANGE_JOBS))
    recurring = bool(user.has_perm(CHANGE_RECURRING))
    view = jobs or recurring or bool(user.has_perm(VIEW))
    return Access(staff=True, view=view, change_jobs=jobs, change_recurring=recurring)
