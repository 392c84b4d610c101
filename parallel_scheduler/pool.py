"""The bounded thread pool that gives a scheduler pass its ``max_degree_of_parallelism``.

One pool lives as long as its scheduler, so threads (and the storage connections they hold) are
reused from pass to pass. A parallelism of 1 runs inline: sequential, as Hangfire's default.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["BoundedPool"]

T = TypeVar("T")
R = TypeVar("R")


class BoundedPool:
    def __init__(self, max_degree_of_parallelism: int, name: str = "parallel-scheduler") -> None:
        self.size = max_degree_of_parallelism
        self._executor = (
            ThreadPoolExecutor(max_degree_of_parallelism, thread_name_prefix=name)
            if max_degree_of_parallelism > 1
            else None
        )

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """``fn`` over ``items`` with at most ``size`` running at once; results in input order.

        Waits for every call to finish even when one raises, so nothing is left half-done in
        the background; then raises the first error.
        """
        if self._executor is None:
            return [fn(item) for item in items]
        futures = [self._executor.submit(fn, item) for item in items]
        errors = [f.exception() for f in futures]
        first = next((e for e in errors if e is not None), None)
        if first is not None:
            raise first
        return [f.result() for f in futures]

    def shutdown(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
