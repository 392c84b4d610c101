"""``parallel-scheduler profile``: where parallelism pays, measured and verified.

Sweeps batch sizes by parallelism degrees on a chosen storage and broker, times one scheduler
pass per repetition after warm-up passes, verifies every pass (each job released exactly once,
none lost) before printing a figure, and reports the seed's table, a JSON record and a PNG of the
curve with its knee. ``--latency-ms`` puts a delaying proxy between the scheduler and the database.

This module stays light: ``cli.py`` imports it to build its parser, and the heavy parts (the
sweep, matplotlib) load only when the command runs.
"""

from __future__ import annotations

import argparse

from parallel_scheduler.profiling.options import add_arguments

__all__ = ["add_arguments", "run_from_namespace"]


def run_from_namespace(ns: argparse.Namespace) -> int:
    """The ``profile`` command's body, given the parsed command line."""
    from parallel_scheduler.profiling.options import ProfileOptions
    from parallel_scheduler.profiling.runner import run_profile

    return run_profile(ProfileOptions.from_namespace(ns))
