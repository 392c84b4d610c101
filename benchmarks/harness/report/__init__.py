"""How every scenario records and shows its results, in one place.

* what a figure was measured on: ``environment`` (versions, CPUs, the commit and whether the
  product code changed since, the load average at the start; ``load_average`` again at the end);
* results written once: ``refuse_existing`` before any run, ``write_once`` (JSON to a new file,
  never replacing one someone kept), ``append_record`` (one JSON line added to a log of runs);
* the end of a run: ``conclude`` (every failed check on stderr, or the summary; the document
  written once; the exit status);
* Markdown: ``markdown_table`` and the millisecond distributions ``ms_summary``.

The summaries of the scenarios whose tables are long live beside this module:
``report.burst``, ``report.memory``, ``report.steady``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks.harness.measure import distribution

__all__ = [
    "append_record",
    "conclude",
    "environment",
    "git_commit",
    "load_average",
    "markdown_table",
    "ms_summary",
    "options",
    "refuse_existing",
    "write_once",
]

ROOT = Path(__file__).resolve().parents[3]
#: The code a figure measures: a change here since the commit makes the commit alone not enough.
PRODUCT_CODE = ("parallel_scheduler", "storage_adapters")


def load_average() -> list[float]:
    """The machine's 1, 5 and 15 minute load averages: figures from a busy shared machine say so."""
    return [round(x, 2) for x in os.getloadavg()]


def git_commit() -> str:
    """The checkout's short commit, with " (code changed since)" when the product code has
    uncommitted changes."""
    return _git("rev-parse", "--short", "HEAD") + (
        " (code changed since)" if _product_code_changed() else ""
    )


def _product_code_changed() -> bool:
    """Uncommitted changes (new files included) under the product code."""
    return bool(_git("status", "--porcelain", "--", *PRODUCT_CODE))


def environment(redis_url: str | None = None) -> dict[str, Any]:
    """Versions, CPUs, load average at the start and the checkout's commit, so a figure can be
    traced to the code and the machine that produced it."""
    import celery
    import kombu
    import redis

    info: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_at_start": load_average(),
        "celery": celery.__version__,
        "kombu": kombu.__version__,
        "redis-py": redis.__version__,
        "argv": sys.argv,
    }
    if redis_url is not None:
        info["redis_server"] = redis.Redis.from_url(redis_url).info("server")["redis_version"]
    info["git_commit"] = _git("rev-parse", "HEAD")
    info["git_dirty"] = bool(_git("status", "--porcelain", "--untracked-files=no"))
    info["product_code_changed"] = _product_code_changed()
    return info


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    return done.stdout.strip()


def refuse_existing(parser: argparse.ArgumentParser, *paths: Path | None) -> None:
    """Fail at once, before any run, when an output file already exists."""
    for path in paths:
        if path is not None and path.exists():
            parser.error(f"{path} exists; the benchmark never overwrites results")


def options(ns: argparse.Namespace) -> dict[str, Any]:
    """The command's options as JSON values."""
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(ns).items()}


def write_once(path: Path | None, document: Any, *, text: bool = False) -> None:
    """Write ``document`` as JSON (``text``: a string as it is, e.g. Markdown) to a new file; an
    existing one is never replaced ("x")."""
    if path is None:
        return
    with path.open("x") as out:
        if text:
            out.write(str(document))
        else:
            json.dump(document, out, indent=2)
            out.write("\n")
    print(f"\nwrote {path}")


def append_record(path: Path | None, document: Any) -> None:
    """Append ``document`` as one JSON line to ``path`` (created if missing): for benchmarks
    whose runs accumulate in one file; an earlier record is never touched."""
    if path is None:
        return
    with path.open("a") as out:
        out.write(json.dumps(document, separators=(",", ":")) + "\n")
    print(f"\nappended to {path}")


def conclude(
    scenario: str,
    document: dict[str, Any],
    failures: Sequence[tuple[str, Any]],
    summary: Callable[[dict[str, Any]], str],
    out: Path | None,
) -> int:
    """The end of every scenario: each failure (what, found) on stderr, or, only when none
    failed, the summary; the document written once; the exit status."""
    for what, found in failures:
        print(f"{scenario}: FAILED {what}: {found}", file=sys.stderr)
    if not failures:
        print()
        print(summary(document))
    write_once(out, document)
    return 1 if failures else 0


def markdown_table(columns: Sequence[str], rows: Iterable[Sequence[object]], align: str) -> str:
    """A Markdown table: ``align`` has one letter a column, ``l`` (text) or ``r`` (a figure)."""
    if len(align) != len(columns) or set(align) - {"l", "r"}:
        raise ValueError(f"align {align!r} does not fit {len(columns)} columns")
    rule = "|" + "".join("---|" if a == "l" else "--:|" for a in align)
    lines = ["| " + " | ".join(columns) + " |", rule]
    for row in rows:
        if len(row) != len(columns):
            raise ValueError(f"{len(row)} cells for {len(columns)} columns: {row}")
        lines.append("| " + " | ".join(str(cell) for cell in row) + " |")
    return "\n".join(lines)


def ms_summary(values: Sequence[float], *, with_min: bool = False) -> dict[str, float]:
    """Seconds as a millisecond distribution (mean, p50, p90, p99, max; and min), 0.1 ms."""
    summary = asdict(distribution([v * 1000 for v in values]))
    if with_min:
        summary["min"] = min(values) * 1000 if values else 0.0
        return {k: (v if k == "count" else round(v, 1)) for k, v in summary.items()}
    summary.pop("count")
    return {k: round(v, 1) for k, v in summary.items()}
