"""What every adapter checks before browsing (``BrowseStore`` in ``base.py``), and the bucket
arithmetic of ``finished_counts``: one home, so the three adapters refuse the same input with the
same words and cut time into the same buckets."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from storage_adapters.checks.values import epoch_seconds, member, positive_seconds
from storage_adapters.errors import InvalidArgumentError
from storage_adapters.records import (
    MAX_JOB_ID_LENGTH,
    MAX_TASK_NAME_LENGTH,
    JobQuery,
    JobState,
    validate_job_id,
)

__all__ = [
    "MAX_BUCKETS",
    "MAX_ERROR_SEARCH",
    "MAX_PAGE",
    "Buckets",
    "buckets_until",
    "check_finished_counts",
    "check_job_query",
    "check_page_limit",
    "count_finished",
]

#: The largest page ``list_jobs_page`` serves: a page is read in one statement or script.
MAX_PAGE = 1000
#: The most buckets ``finished_counts`` answers with (Redis counts each bucket on its own).
MAX_BUCKETS = 10_000
#: The longest text ``JobQuery.error_contains`` may search for.
MAX_ERROR_SEARCH = 500


def check_page_limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidArgumentError(f"limit must be an integer from 1 to {MAX_PAGE}, not {limit!r}")
    return limit


def check_job_query(query: JobQuery) -> JobQuery:
    """``query`` with its state as a ``JobState`` (its value is accepted too) and its numbers
    as floats; a field that cannot be a filter raises ``InvalidArgumentError`` naming it."""
    if not isinstance(query, JobQuery):
        raise InvalidArgumentError(f"query must be a JobQuery, not {type(query).__name__}")
    state = None
    if query.state is not None:
        state = member(JobState, query.state, "query.state: unknown job state {!r}")
    task = query.task
    if task is not None and (
        not isinstance(task, str) or not 0 < len(task) <= MAX_TASK_NAME_LENGTH
    ):
        raise InvalidArgumentError(
            f"query.task must be a task name of 1-{MAX_TASK_NAME_LENGTH} characters, not {task!r}"
        )
    id_prefix = _text("id_prefix", query.id_prefix, MAX_JOB_ID_LENGTH, "the start of a job id")
    if id_prefix is not None and " " in id_prefix:
        raise InvalidArgumentError(
            f"query.id_prefix {id_prefix!r} has a space: no job id holds one"
        )
    task_prefix = _text(
        "task_prefix", query.task_prefix, MAX_TASK_NAME_LENGTH, "the start of a task name"
    )
    error_contains = _text(
        "error_contains", query.error_contains, MAX_ERROR_SEARCH, "text of an error"
    )
    due_from = None if query.due_from is None else epoch_seconds("query.due_from", query.due_from)
    due_to = None if query.due_to is None else epoch_seconds("query.due_to", query.due_to)
    if due_from is not None and due_to is not None and due_from > due_to:
        raise InvalidArgumentError(
            f"query.due_from ({due_from!r}) is after query.due_to ({due_to!r})"
        )
    return JobQuery(
        state,
        task,
        due_from,
        due_to,
        _after(query.after),
        id_prefix=id_prefix,
        task_prefix=task_prefix,
        error_contains=error_contains,
    )


def _text(field: str, value: object, limit: int, what: str) -> str | None:
    """A text filter: ``None``, or 1 to ``limit`` printable characters (so no NUL, which
    PostgreSQL text cannot hold, and no line break, which no search box sends)."""
    if value is None:
        return None
    if not isinstance(value, str) or not 0 < len(value) <= limit or not value.isprintable():
        raise InvalidArgumentError(
            f"query.{field} must be {what}: 1-{limit} printable characters, not {value!r}"
        )
    return value


def _after(after: object) -> tuple[float, str] | None:
    if after is None:
        return None
    if not isinstance(after, tuple) or len(after) != 2:
        raise InvalidArgumentError(
            f"query.after must be the (due_at, id) of the last row of a page, not {after!r}"
        )
    due_at = epoch_seconds("query.after's due_at", after[0])
    try:
        job_id = validate_job_id(after[1])
    except ValueError as exc:
        raise InvalidArgumentError(f"query.after's id: {exc}") from None
    return due_at, job_id


@dataclass(frozen=True)
class Buckets:
    """``count`` buckets of ``width`` seconds from ``since``: ``[since + k*width, … + width)``."""

    since: float
    width: float
    count: int

    @property
    def end(self) -> float:
        return self.since + self.count * self.width

    def start(self, k: int) -> float:
        return self.since + k * self.width

    def index(self, at: float) -> int:
        """The bucket ``at`` falls in (the arithmetic the SQL ``GROUP BY`` does on the server)."""
        return math.floor((at - self.since) / self.width)


def check_finished_counts(state: JobState | str, since: float, bucket: float) -> JobState:
    """The checked state of ``finished_counts``; ``since`` and ``bucket`` are checked too."""
    try:
        chosen = JobState(state)
    except ValueError:
        raise InvalidArgumentError(f"state: unknown job state {state!r}") from None
    if not chosen.is_terminal:
        finished = ", ".join(s.value for s in JobState if s.is_terminal)
        raise InvalidArgumentError(
            f"state must be a finished state ({finished}), not {chosen.value}: only those are "
            "indexed by the time jobs reached them"
        )
    epoch_seconds("since", since)
    positive_seconds("bucket", bucket)
    return chosen


def buckets_until(since: float, bucket: float, now: float) -> Buckets:
    """Every bucket from ``since`` that has started by ``now``; refused past ``MAX_BUCKETS``."""
    count = 0 if now < since else math.floor((now - since) / bucket) + 1
    if count > MAX_BUCKETS:
        raise InvalidArgumentError(
            f"since and bucket make {count} buckets up to now; the limit is {MAX_BUCKETS} "
            "(use a later since or a wider bucket)"
        )
    return Buckets(float(since), float(bucket), count)


def count_finished(
    state: JobState | str,
    since: float,
    bucket: float,
    now: Callable[[], float],
    count: Callable[[JobState, Buckets], Sequence[int]],
) -> list[tuple[float, int]]:
    """``finished_counts`` for any backend: the arguments are checked and the buckets up to
    ``now()`` laid out here; ``count`` only answers the number finished in each bucket (never
    called when there is no bucket yet)."""
    chosen = check_finished_counts(state, since, bucket)
    buckets = buckets_until(since, bucket, now())
    if not buckets.count:
        return []
    return [(buckets.start(k), int(n)) for k, n in enumerate(count(chosen, buckets))]
