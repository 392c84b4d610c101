"""Make a few delayed calls the way application code does, and show where each one went.

Calls due within ``parallel_scheduler_eta_threshold`` stay on Celery's own path (a worker keeps
them in memory until they are due); calls due later are stored durably and released into the
broker by the scheduler when they fall due. ``task.schedule(...)`` always stores, whatever the
delay. Run it from this directory while a worker runs as README.md shows.
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import datetime, timedelta, timezone
from typing import Any

from proj.celery import app
from proj.tasks import expire_trial, generate_report, send_reminder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--below", type=float, default=10, help="seconds ahead for calls Celery keeps (10)"
    )
    parser.add_argument(
        "--beyond", type=float, default=90, help="seconds ahead for calls that go to storage (90)"
    )
    parser.add_argument("--json", action="store_true", help="print the calls as JSON")
    ns = parser.parse_args()
    plugin = app.parallel_scheduler
    threshold = plugin.settings.eta_threshold
    if threshold is None or not ns.below <= threshold < ns.beyond:
        parser.error(f"need --below <= eta_threshold ({threshold}) < --beyond")

    calls: list[dict[str, Any]] = []

    def record(what: str, result: Any, due: float, *, cancelled: bool = False) -> None:
        stored = plugin.client.get(result.id) is not None
        path = "storage" if stored else "celery"
        calls.append(
            {"what": what, "id": result.id, "due": due, "path": path, "cancelled": cancelled}
        )

    # Each due time is taken before its call, so no call can be due earlier than printed.
    # Within the threshold: an ordinary Celery ETA task, held by a worker until due.
    due = time.time() + ns.below
    result = send_reminder.apply_async((1, "your trial ends soon"), countdown=ns.below)
    record("send_reminder countdown=below", result, due)

    # Beyond it: the very same call is stored instead; no worker holds it meanwhile.
    due = time.time() + ns.beyond
    result = send_reminder.apply_async((2, "your plan renews tomorrow"), countdown=ns.beyond)
    record("send_reminder countdown=beyond", result, due)

    # An eta works the same way as a countdown.
    eta = datetime.now(timezone.utc) + timedelta(seconds=ns.beyond)
    result = generate_report.apply_async(("weekly",), {"recipients": ["ops@example.com"]}, eta=eta)
    record("generate_report eta=beyond", result, eta.timestamp())

    # task.schedule() always stores durably, even for a short delay.
    due = time.time() + ns.below
    result = generate_report.schedule(("daily",), {"recipients": []}, countdown=ns.below)
    record("generate_report.schedule countdown=below", result, due)

    # A stored call can be cancelled by the id its AsyncResult carries; it never runs.
    due = time.time() + ns.beyond
    result = expire_trial.apply_async((7,), countdown=ns.beyond)
    cancelled = plugin.cancel(result.id)
    record("expire_trial countdown=beyond, then cancelled", result, due, cancelled=cancelled)

    if ns.json:
        print(json.dumps(calls))
        return
    for call in calls:
        due = datetime.fromtimestamp(call["due"]).strftime("%H:%M:%S")
        state = "cancelled" if call["cancelled"] else f"due {due}"
        print(f"{call['id']}  {call['path']:<7}  {state:<12}  {call['what']}")


if __name__ == "__main__":
    main()
