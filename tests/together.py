"""Races on purpose: threads released at the same instant, so a test can show that two callers
never get the same thing (claims, firings, a schema migration)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

A = TypeVar("A")
T = TypeVar("T")


def together(work: Callable[[A], T], args: Sequence[A]) -> list[T]:
    """``work(arg)`` for each of ``args``, one thread each, all released by one barrier; the
    results in the order of ``args``."""
    barrier = threading.Barrier(len(args))

    def released(arg: A) -> T:
        barrier.wait()
        return work(arg)

    with ThreadPoolExecutor(len(args)) as pool:
        return list(pool.map(released, args))
