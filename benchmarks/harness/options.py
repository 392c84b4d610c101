"""Command-line options the worker-driven scenarios (burst, steady lateness, memory) share: the
broker, the seed and payload of the workload, the waits, and the output that is never
overwritten; checked once parsed."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from benchmarks.harness.brokers import is_redis
from benchmarks.harness.report import refuse_existing

__all__ = ["add_broker", "add_rounds", "add_run_options", "parse_checked"]


def add_broker(p: argparse.ArgumentParser, default: str = "redis://127.0.0.1:6379/5") -> None:
    p.add_argument(
        "--broker-url",
        default=default,
        help="a Redis broker; only this run's queue and keys are created and removed",
    )


def add_rounds(p: argparse.ArgumentParser, *, warmup: bool = True) -> None:
    """``--repetitions``, ``--warmup`` (discarded), ``--seed``, ``--out``: the options of the
    throughput scenarios (release_throughput, accept_rate, limits), which repeat short runs and
    report their median."""
    p.add_argument("--repetitions", type=int, default=3, help="measured runs (the median kept)")
    if warmup:
        p.add_argument("--warmup", type=int, default=1, help="warm-up runs (checked, discarded)")
    p.add_argument("--seed", type=int, default=7, help="fixes ids and payloads")
    p.add_argument("--out", type=Path, help="JSON results (never overwritten)")


def add_run_options(p: argparse.ArgumentParser, *, timeout: float, timeout_help: str) -> None:
    """``--payload-bytes``, ``--seed``, ``--timeout``, ``--settle``, ``--out``."""
    p.add_argument("--payload-bytes", type=int, default=64, help="size of each job's token")
    p.add_argument("--seed", type=int, default=20261130)
    p.add_argument("--timeout", type=float, default=timeout, help=timeout_help)
    p.add_argument("--settle", type=float, default=2.0, help="seconds to wait for late duplicates")
    p.add_argument("--out", type=Path, help="JSON results (never overwritten)")


def parse_checked(
    p: argparse.ArgumentParser,
    argv: Sequence[str] | None,
    *,
    redis_broker: bool = True,
    outputs: Sequence[str] = ("out",),
) -> argparse.Namespace:
    """Parse; refuse existing outputs, and (``redis_broker``) a broker that is not Redis."""
    ns = p.parse_args(argv)
    refuse_existing(p, *(getattr(ns, name) for name in outputs))
    if redis_broker and not is_redis(ns.broker_url):
        p.error("--broker-url must be a Redis URL")
    return ns
