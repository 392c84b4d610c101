"""The curve as a PNG: where adding threads stops paying, one line per batch size.

Two panels share a log-scaled parallelism axis (the sweep's steps grow geometrically): seconds per
batch on the left (log scale, since batch sizes differ by 50x) with the min-max spread as a band,
and jobs per second on the right, where batch sizes are directly comparable. Each line's knee is
marked on both. matplotlib is imported here only, so the rest of the package never needs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from parallel_scheduler.profiling.report import KNEE_RULE, Summary

__all__ = ["draw"]


def draw(summaries: Sequence[Summary], knees: dict[int, int], title: str, path: Path) -> None:
    """Write the PNG to ``path``, which must not exist yet."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, NullFormatter

    plain = FuncFormatter(lambda value, _: f"{value:g}")
    degrees = sorted({s.parallelism for s in summaries if s.median is not None})

    figure = Figure(figsize=(12, 5), layout="constrained")
    seconds_axes, rate_axes = figure.subplots(1, 2)
    for size in sorted({s.batch_size for s in summaries}):
        points = sorted(
            (s for s in summaries if s.batch_size == size and s.median is not None),
            key=lambda s: s.parallelism,
        )
        if not points:
            continue
        x = [s.parallelism for s in points]
        medians = [s.median or 0.0 for s in points]
        rates = [s.jobs_per_second or 0.0 for s in points]
        (line,) = seconds_axes.plot(x, medians, marker="o", label=f"batch {size:,}")
        seconds_axes.fill_between(
            x,
            [s.minimum or 0.0 for s in points],
            [s.maximum or 0.0 for s in points],
            color=line.get_color(),
            alpha=0.2,
        )
        rate_axes.plot(x, rates, marker="o", color=line.get_color(), label=f"batch {size:,}")
        knee = knees.get(size)
        if knee is not None:
            at = x.index(knee)
            for axes, y in ((seconds_axes, medians[at]), (rate_axes, rates[at])):
                axes.plot([knee], [y], marker="*", markersize=18, color=line.get_color())
                axes.annotate(
                    f"knee P={knee}",
                    (knee, y),
                    textcoords="offset points",
                    xytext=(8, 8),
                    color=line.get_color(),
                )
    seconds_axes.set_yscale("log")
    seconds_axes.yaxis.set_major_formatter(plain)
    seconds_axes.yaxis.set_minor_formatter(NullFormatter())  # labelled minors would overlap
    seconds_axes.set_ylabel("seconds per batch (median; band: min-max)")
    rate_axes.set_ylabel("jobs per second (median)")
    for axes in (seconds_axes, rate_axes):
        axes.set_xscale("log")
        axes.set_xticks(degrees, [str(p) for p in degrees])
        axes.xaxis.set_minor_formatter(NullFormatter())
        axes.set_xlabel("parallelism degree (threads)")
        axes.grid(True, which="both", alpha=0.3)
        axes.legend()
    figure.suptitle(f"{title}\n★ knee: {KNEE_RULE}", fontsize=10)
    with path.open("xb") as file:
        figure.savefig(file, format="png", dpi=110)
