"""What every adapter checks before recording or reading execution outcomes (``OutcomeStore`` in
``contract/outcomes.py``): one home for the bounds and the refusals, so the adapters refuse the
same input with the same words and write nothing of a batch holding a bad event."""

from __future__ import annotations

import math
from collections.abc import Sequence

from storage_adapters.checks.browse import check_page_limit
from storage_adapters.checks.values import epoch_seconds, member
from storage_adapters.errors import InvalidArgumentError, InvalidRecordError
from storage_adapters.records import (
    MAX_TASK_NAME_LENGTH,
    OutcomeEvent,
    OutcomeQuery,
    OutcomeState,
    validate_job_id,
)

__all__ = [
    "FINAL_OUTCOMES",
    "MAX_ERROR_LENGTH",
    "MAX_OUTCOME_BATCH",
    "MAX_WORKER_LENGTH",
    "check_outcome_events",
    "check_outcome_ids",
    "check_outcome_query",
    "check_page_limit",
    "outcome_order",
    "stored_outcome",
]

#: The most events one ``record_outcomes`` call takes (a worker's writer sends fewer).
MAX_OUTCOME_BATCH = 1000
#: The longest ``error`` kept: the exception type and the start of its message.
MAX_ERROR_LENGTH = 500
#: The longest worker host name kept (Celery's node names are ``name@host``).
MAX_WORKER_LENGTH = 255
#: The most job ids one ``latest_outcomes`` call looks up.
MAX_OUTCOME_IDS = 1000
#: The outcomes that end a run: what pages and counts list.
FINAL_OUTCOMES = tuple(state for state in OutcomeState if state.is_final)
#: Ties on ``at`` within one job read in the order things happen.
_STEP = {state: position for position, state in enumerate(OutcomeState)}


def outcome_order(event: OutcomeEvent) -> tuple[float, int]:
    """A job's timeline order: by time, then by the order states happen in."""
    return (event.at, _STEP[event.state])


def _optional_text(what: str, value: object, limit: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > limit:
        raise InvalidRecordError(f"{what} must be a string of at most {limit} characters")
    return value


def check_outcome_events(events: Sequence[OutcomeEvent]) -> list[OutcomeEvent]:
    """The events of one ``record_outcomes`` call, each checked, with its state as an
    ``OutcomeState`` and its numbers as floats; the first bad one refuses the whole batch."""
    if isinstance(events, (str, bytes)) or not isinstance(events, Sequence):
        raise InvalidArgumentError("events must be a sequence of OutcomeEvent")
    if len(events) > MAX_OUTCOME_BATCH:
        raise InvalidArgumentError(
            f"{len(events)} events in one call; the limit is {MAX_OUTCOME_BATCH}"
        )
    checked: list[OutcomeEvent] = []
    for event in events:
        if not isinstance(event, OutcomeEvent):
            raise InvalidRecordError(f"not an OutcomeEvent: {event!r}")
        validate_job_id(event.job_id)
        if not isinstance(event.task, str) or not 0 < len(event.task) <= MAX_TASK_NAME_LENGTH:
            raise InvalidRecordError(
                f"outcome of {event.job_id!r}: task must be 1-{MAX_TASK_NAME_LENGTH} characters"
            )
        try:
            state = OutcomeState(event.state)
        except ValueError:
            raise InvalidRecordError(f"unknown outcome state {event.state!r}") from None
        at = epoch_seconds("at", event.at)
        runtime = event.runtime
        if runtime is not None:
            runtime = epoch_seconds("runtime", runtime)
            if runtime < 0:
                raise InvalidRecordError(f"runtime must not be negative, not {runtime!r}")
        retry_id = None if event.retry_id is None else validate_job_id(event.retry_id)
        checked.append(
            OutcomeEvent(
                job_id=event.job_id,
                task=event.task,
                state=state,
                at=at,
                worker=_optional_text("worker", event.worker, MAX_WORKER_LENGTH),
                runtime=runtime,
                error=_optional_text("error", event.error, MAX_ERROR_LENGTH),
                retry_id=retry_id,
            )
        )
    return checked


def check_outcome_ids(job_ids: Sequence[str]) -> list[str]:
    """The distinct ids of one ``latest_outcomes`` call, in the order given."""
    if isinstance(job_ids, (str, bytes)) or not isinstance(job_ids, Sequence):
        raise InvalidArgumentError("job_ids must be a sequence of job ids")
    distinct = list(dict.fromkeys(validate_job_id(job_id) for job_id in job_ids))
    if len(distinct) > MAX_OUTCOME_IDS:
        raise InvalidArgumentError(
            f"{len(distinct)} job ids in one call; the limit is {MAX_OUTCOME_IDS}"
        )
    return distinct


def check_outcome_query(query: OutcomeQuery) -> OutcomeQuery:
    """``query`` with its state as a final ``OutcomeState``; a bad field is refused by name."""
    if not isinstance(query, OutcomeQuery):
        raise InvalidArgumentError(f"query must be an OutcomeQuery, not {type(query).__name__}")
    state = None
    if query.state is not None:
        state = member(OutcomeState, query.state, "query.state: unknown outcome {!r}")
        if not state.is_final:
            finals = ", ".join(s.value for s in FINAL_OUTCOMES)
            raise InvalidArgumentError(
                f"query.state must be a final outcome ({finals}), not {state.value}"
            )
    task = query.task
    if task is not None and (
        not isinstance(task, str) or not 0 < len(task) <= MAX_TASK_NAME_LENGTH
    ):
        raise InvalidArgumentError(
            f"query.task must be a task name of 1-{MAX_TASK_NAME_LENGTH} characters, not {task!r}"
        )
    before = query.before
    if before is not None:
        if not isinstance(before, tuple) or len(before) != 2:
            raise InvalidArgumentError(
                f"query.before must be the (at, job_id) of the last row of a page, not {before!r}"
            )
        try:
            before = (epoch_seconds("query.before's at", before[0]), validate_job_id(before[1]))
        except ValueError as exc:
            raise InvalidArgumentError(f"query.before: {exc}") from None
    return OutcomeQuery(state, task, before)


def _number(value: object) -> float | None:
    if value is None or value == "":
        return None
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def _text(value: object) -> str | None:
    return None if value is None or value == "" else str(value)


def stored_outcome(
    job_id: str,
    task: str,
    state: str,
    at: object,
    worker: object,
    runtime: object,
    error: object,
    retry_id: object,
) -> OutcomeEvent:
    """An event as read back from any backend (empty strings, Redis's ``None``, are ``None``)."""
    return OutcomeEvent(
        job_id=str(job_id),
        task=str(task),
        state=OutcomeState(state),
        at=_number(at) or 0.0,
        worker=_text(worker),
        runtime=_number(runtime),
        error=_text(error),
        retry_id=_text(retry_id),
    )
