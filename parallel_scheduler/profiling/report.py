"""Turning verified timings into the seed's table, the knee, and the JSON record.

The table has the shape of the Hangfire pull request this project follows ("Batching On? | Batch
Size | Parallelism Degree | Sec/Batch | % Improvement"), plus jobs/s and the spread (min/max) over
repetitions, because a median alone hides how noisy a shared machine is. "Batching On?" is always
``y``: this scheduler always fetches due jobs in batches, which is what Hangfire's column meant;
the release mode is named in the title. Sec/Batch is the median over repetitions, and
"% Improvement" is the time saved against the batch size's sequential (smallest) parallelism.

**The knee** of a batch size's curve is the smallest parallelism whose median sec/batch is within
10% of the best median of that batch size: past it, more threads (and connections) buy less than
a tenth. A rule, not a fit, so anyone can check it against the table by hand.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from rich.table import Table

from parallel_scheduler.profiling.sweep import CellResult

__all__ = ["KNEE_RULE", "KNEE_TOLERANCE", "Summary", "find_knees", "knee_of", "seconds", "table"]

KNEE_TOLERANCE = 0.10
IMPROVEMENT_BASELINE = "the smallest parallelism measured (1 by default: sequential)"
KNEE_RULE = (
    "the smallest parallelism whose median sec/batch is within 10% of the best median "
    "for that batch size"
)


@dataclass(frozen=True)
class Summary:
    """One cell's figures; ``improvement`` is % less time than the batch size's baseline."""

    batch_size: int
    parallelism: int
    median: float | None = None
    minimum: float | None = None
    maximum: float | None = None
    jobs_per_second: float | None = None
    improvement: float | None = None
    skipped: str | None = None

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def summarise(cells: Sequence[CellResult]) -> list[Summary]:
    """Medians and spreads per cell; improvement over the smallest measured parallelism."""
    baselines: dict[int, float] = {}
    for cell in sorted(cells, key=lambda c: c.parallelism):
        if cell.seconds and cell.batch_size not in baselines:
            baselines[cell.batch_size] = statistics.median(cell.seconds)
    summaries = []
    for cell in cells:
        if not cell.seconds:
            summaries.append(Summary(cell.batch_size, cell.parallelism, skipped=cell.skipped))
            continue
        median = statistics.median(cell.seconds)
        baseline = baselines[cell.batch_size]
        summaries.append(
            Summary(
                cell.batch_size,
                cell.parallelism,
                median=median,
                minimum=min(cell.seconds),
                maximum=max(cell.seconds),
                jobs_per_second=cell.batch_size / median,
                improvement=(baseline - median) / baseline * 100,
            )
        )
    return summaries


def knee_of(points: Sequence[tuple[int, float]]) -> int | None:
    """The knee of ``(parallelism, median seconds)`` points by the rule in the module docstring."""
    if not points:
        return None
    best = min(median for _, median in points)
    return min(p for p, median in points if median <= best * (1 + KNEE_TOLERANCE))


def find_knees(summaries: Sequence[Summary]) -> dict[int, int]:
    """Batch size -> its knee, for every batch size with a measured cell."""
    knees = {}
    for size in sorted({s.batch_size for s in summaries}):
        points = [
            (s.parallelism, s.median)
            for s in summaries
            if s.batch_size == size and s.median is not None
        ]
        knee = knee_of(points)
        if knee is not None:
            knees[size] = knee
    return knees


def seconds(value: float) -> str:
    """Seconds with about three significant digits: 12.3, 1.23, 0.123, 0.0123."""
    for limit, digits in ((100, 0), (10, 1), (1, 2), (0.1, 3)):
        if value >= limit:
            return f"{value:.{digits}f}"
    return f"{value:.4f}"


def table(summaries: Sequence[Summary], knees: dict[int, int], title: str) -> Table:
    """The seed's table, one section per batch size, the knee row marked."""
    caption = f"% Improvement: time saved against {IMPROVEMENT_BASELINE}\nknee: {KNEE_RULE}"
    result = Table(title=title, caption=caption)
    for name in (
        "Batching On?", "Batch Size", "Parallelism Degree", "Sec/Batch", "min", "max",
        "Jobs/s", "% Improvement", "Knee",
    ):  # fmt: skip
        result.add_column(name, justify="right", no_wrap=True)
    previous = None
    for s in sorted(summaries, key=lambda s: (s.batch_size, s.parallelism)):
        if previous is not None and s.batch_size != previous:
            result.add_section()
        previous = s.batch_size
        head = ("y", f"{s.batch_size:,}", str(s.parallelism))
        if s.median is None or s.minimum is None or s.maximum is None:
            result.add_row(*head, "skipped", "", "", "", "", "", style="yellow")
            continue
        result.add_row(
            *head,
            seconds(s.median),
            seconds(s.minimum),
            seconds(s.maximum),
            f"{s.jobs_per_second or 0:,.0f}",
            f"{s.improvement or 0:.1f}%",
            "◀ knee" if knees.get(s.batch_size) == s.parallelism else "",
            style="bold" if knees.get(s.batch_size) == s.parallelism else None,
        )
    return result
