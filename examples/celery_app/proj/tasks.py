"""Plain Celery tasks: nothing here knows whether a call waited in a worker or in storage.

Each execution is logged; with ``JOURNAL_FILE`` set, it is also appended to that file as one JSON
line, so you (and the example's test) can see exactly which call ran, and when.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from celery.utils.log import get_task_logger

from proj.celery import app

logger = get_task_logger(__name__)


def _journal(task: Any, **details: Any) -> None:
    entry = {"task": task.name, "id": task.request.id, "at": time.time(), **details}
    logger.info("ran %s", json.dumps(entry))
    path = os.environ.get("JOURNAL_FILE")
    if path:
        # One write of one short line to an O_APPEND file: lines from the pool's processes
        # never interleave.
        with open(path, "a", encoding="utf-8") as journal:
            journal.write(json.dumps(entry) + "\n")


@app.task(bind=True)
def send_reminder(self: Any, user_id: int, text: str) -> str:
    message = f"reminder for user {user_id}: {text}"
    _journal(self, args=[user_id, text])
    return message


@app.task(bind=True)
def generate_report(self: Any, kind: str, recipients: list[str] | None = None) -> dict[str, Any]:
    report = {"kind": kind, "recipients": recipients or [], "rows": 42}
    _journal(self, args=[kind], kwargs={"recipients": recipients})
    return report


@app.task(bind=True)
def expire_trial(self: Any, account_id: int) -> None:
    _journal(self, args=[account_id])
