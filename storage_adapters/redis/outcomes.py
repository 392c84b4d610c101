"""Execution outcomes on Redis: the part of ``RedisStorage`` that keeps what Celery workers did
with released jobs (``OutcomeStore`` in ``contract/outcomes.py``).

Keys: ``oc:<job id>`` (hash: one field per event, ``<at>|<state>``, its other fields as JSON),
``outcomes:final`` and ``outcomes:<state>`` (the final events, members ``<job id>\\n<state>\\n<at>``
scored by ``at``: the newest-first pages walk them from the top), ``outcome_counts`` (hash:
``<state>\\n<task>`` -> how many final events are stored). ``lua/record_outcomes.lua`` writes a
batch in one script (a field written only if absent, so a batch sent twice stores nothing
twice); ``lua/purge_finished.lua`` deletes a job's outcomes with the job.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from storage_adapters.checks.outcomes import (
    FINAL_OUTCOMES,
    check_outcome_events,
    check_outcome_ids,
    check_outcome_query,
    check_page_limit,
    outcome_order,
    stored_outcome,
)
from storage_adapters.records import OutcomeEvent, OutcomeQuery, OutcomeState
from storage_adapters.redis.plumbing import RedisPlumbing

__all__ = ["OUTCOME_SCRIPTS", "RedisOutcomeStore"]

#: The scripts (lua/<name>.lua) this mixin runs; the host loads them with its own.
OUTCOME_SCRIPTS = ("record_outcomes", "outcome_rows", "outcomes_page")
#: Members one page script examines at most before handing back (a bound on its run time).
PAGE_BUDGET = 2000


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _event(job_id: str, field: str, value: str) -> OutcomeEvent:
    at, _, state = field.rpartition("|")
    fields: dict[str, Any] = json.loads(value)
    return stored_outcome(
        job_id,
        fields.get("task", ""),
        state,
        at,
        fields.get("worker"),
        fields.get("runtime"),
        fields.get("error"),
        fields.get("retry_id"),
    )


class RedisOutcomeStore(RedisPlumbing):
    """What workers did with released jobs, for ``RedisStorage`` to inherit."""

    def record_outcomes(self, events: Sequence[OutcomeEvent]) -> int:
        checked = check_outcome_events(events)
        if not checked:
            return 0
        args: list[str | int] = [self._key("")]
        for event in checked:
            fields = {
                "task": event.task,
                "worker": event.worker,
                "runtime": event.runtime,
                "error": event.error,
                "retry_id": event.retry_id,
            }
            args += (
                event.job_id,
                event.state.value,
                repr(event.at),
                event.task,
                json.dumps({k: v for k, v in fields.items() if v is not None}),
                "1" if event.state.is_final else "0",
            )
        keys = [self._key("outcomes:final"), self._key("outcome_counts")]
        return int(self._run("record_outcomes", keys, args))

    def _histories(self, ids: list[str]) -> list[list[OutcomeEvent]]:
        # the index as the script's one key: it routes the script to this prefix's node
        rows = self._run("outcome_rows", [self._key("outcomes:final")], [self._key(""), *ids])
        histories = []
        for job_id, flat in zip(ids, rows, strict=True):
            pairs = zip(flat[::2], flat[1::2], strict=True)
            events = [_event(job_id, _text(f), _text(v)) for f, v in pairs]
            histories.append(sorted(events, key=outcome_order))
        return histories

    def outcome_history(self, job_id: str) -> list[OutcomeEvent]:
        return self._histories(check_outcome_ids([job_id]))[0]

    def latest_outcomes(self, job_ids: Sequence[str]) -> dict[str, OutcomeEvent]:
        ids = check_outcome_ids(job_ids)
        if not ids:
            return {}
        return {
            job_id: history[-1]
            for job_id, history in zip(ids, self._histories(ids), strict=True)
            if history
        }

    def outcomes_page(self, query: OutcomeQuery, limit: int) -> list[OutcomeEvent]:
        checked = check_outcome_query(query)
        wanted = check_page_limit(limit)
        state = checked.state
        index = self._key("outcomes:final" if state is None else f"outcomes:{state.value}")
        before = checked.before
        page: list[OutcomeEvent] = []
        while True:
            args: list[str | int] = [
                self._key(""),
                "" if before is None else repr(before[0]),
                "" if before is None else before[1],
                checked.task or "",
                wanted - len(page),
                PAGE_BUDGET,
            ]
            more, last, rows = self._run("outcomes_page", [index], args)
            for member, value in rows:
                job_id, row_state, at = _text(member).split("\n")
                page.append(_event(job_id, f"{at}|{row_state}", _text(value)))
            if not int(more) or len(page) >= wanted:
                return page
            job_id, _, at = _text(last).split("\n")
            before = (float(at), job_id)

    def outcome_counts(self) -> dict[str, dict[OutcomeState, int]]:
        with self._talking() as client:
            stored = client.hgetall(self._key("outcome_counts"))
        found: dict[str, dict[OutcomeState, int]] = {}
        for field, count in stored.items():
            state, _, task = _text(field).partition("\n")
            if int(count) > 0:
                per_task = found.setdefault(task, dict.fromkeys(FINAL_OUTCOMES, 0))
                per_task[OutcomeState(state)] = int(count)
        return dict(sorted(found.items()))
