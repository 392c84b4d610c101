"""The OpenAPI component schemas of ``POST /api/v1/jobs`` (scheduling one job): its body and its
answer, kept beside ``schemas.py`` (merged into the document by ``openapi.py``) so that the job
creation's shapes live in one small place."""

from __future__ import annotations

from typing import Any

from storage_adapters.checks.unique import MAX_UNIQUE_KEY_LENGTH, UNIQUE_CONFLICTS

__all__ = ["SCHEDULE_SCHEMAS"]

_TEXT = {"type": "string"}

SCHEDULE_SCHEMAS: dict[str, Any] = {
    "ScheduleJob": {
        "type": "object",
        "required": ["task"],
        "additionalProperties": False,
        "description": "one job, due at eta or after countdown seconds (now when neither)",
        "properties": {
            "task": {**_TEXT, "description": "the Celery task name"},
            "args": {"type": "array"},
            "kwargs": {"type": "object"},
            "eta": {
                "type": "string",
                "format": "date-time",
                "description": "ISO 8601; UTC without an offset",
            },
            "countdown": {"type": "number", "minimum": 0},
            "id": {
                **_TEXT,
                "description": "the job's id, an idempotency key (default: a new UUID)",
            },
            "queue": {**_TEXT, "description": "the queue it is sent to"},
            "unique_key": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_UNIQUE_KEY_LENGTH,
                "description": "at most one scheduled job of the task per key: printable, no "
                "leading or trailing spaces",
            },
            "on_conflict": {
                "enum": list(UNIQUE_CONFLICTS),
                "description": "a held key: keep its job (default) or replace its due time and "
                "payload",
            },
        },
    },
    "Scheduled": {
        "type": "object",
        "required": ["id", "created", "due_at"],
        "properties": {
            "id": {**_TEXT, "description": "the job's id (the key's holder when not created)"},
            "created": {"type": "boolean", "description": "true: this call stored the job"},
            "due_at": {**_TEXT, "description": "when the stored job is due, ISO 8601"},
            "replaced": {
                "type": "boolean",
                "description": "with unique_key: the holder took this call's time and payload",
            },
            "outcome": {
                "enum": ["created", "kept", "replaced"],
                "description": "with unique_key: what this call did",
            },
        },
    },
}
