"""The Overview page's figures: counts per state, due now, lag, the release rate chart and the
scheduler instances (the same report as ``parallel-scheduler status``: ``status_report`` is the
one home of which instance is alive and which holds each lock).

Every figure is one indexed read: counts from ``count_by_state``, "due now" counted no further
than ``DUE_COUNT_BOUND`` rows, the chart from ``finished_counts`` (the finish-time index).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from parallel_scheduler.client import Client
from parallel_scheduler.dashboard.browse import count_upto
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.process.status_report import status_report
from storage_adapters import JobQuery, JobState

__all__ = ["CHART_MINUTES", "DUE_COUNT_BOUND", "Bar", "overview"]

DUE_COUNT_BOUND = 1000
CHART_MINUTES = 15
CHART_WIDTH = 600
CHART_HEIGHT = 160
_LABEL_SPACE = 20


@dataclass(frozen=True)
class Bar:
    """One minute of the release-rate chart, with its geometry in the SVG's coordinates."""

    start: float
    count: int
    x: float
    y: float
    width: float
    height: float


def release_chart(client: Client, now: float) -> tuple[list[Bar], int]:
    """Jobs released (reached ``enqueued``) per minute over the last ``CHART_MINUTES``."""
    bucket = 60.0
    since = (now // bucket - (CHART_MINUTES - 1)) * bucket
    counts = dict(
        call_storage(
            lambda: client.storage.finished_counts(JobState.ENQUEUED, since, bucket),
            give_up_after=client.retry_for,
        )
    )
    starts = [since + i * bucket for i in range(CHART_MINUTES)]
    values = [int(counts.get(start, 0)) for start in starts]
    top = max(values, default=0) or 1
    slot = CHART_WIDTH / CHART_MINUTES
    usable = CHART_HEIGHT - _LABEL_SPACE
    bars = []
    for i, (start, value) in enumerate(zip(starts, values, strict=True)):
        height = round(usable * value / top, 1)
        bars.append(Bar(start, value, round(i * slot + 2, 1), usable - height, slot - 4, height))
    return bars, max(values, default=0)


def overview(client: Client) -> dict[str, Any]:
    report = status_report(client)
    now = call_storage(client.storage.now, give_up_after=client.retry_for)
    due = count_upto(
        client.storage,
        JobQuery(state=JobState.SCHEDULED, due_to=now),
        DUE_COUNT_BOUND + 1,
        client.retry_for,
    )
    next_due = report["next_due_in_seconds"]
    bars, top = release_chart(client, now)
    return {
        **report,
        "now": now,
        "due_now": due,
        "due_now_capped": due > DUE_COUNT_BOUND,
        "lag_seconds": max(0.0, -next_due) if next_due is not None else None,
        "bars": bars,
        "bars_top": top,
        "released_15min": sum(bar.count for bar in bars),
        "chart": {"width": CHART_WIDTH, "height": CHART_HEIGHT, "minutes": CHART_MINUTES},
    }
