"""A dispatcher for scheduler tests: it records every job it is handed, from any thread, and can
be told to fail after some sends or to call a hook per job first."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any


class Recorder:
    """Remembers each send in order (``sent``) and counts sends per id (``counts``)."""

    def __init__(
        self, fail_after: int | None = None, hook: Callable[[str], object] | None = None
    ) -> None:
        self.sent: list[tuple[str, str, list[Any], dict[str, Any], dict[str, Any]]] = []
        self.counts: Counter[str] = Counter()
        self.fail_after = fail_after
        self.hook = hook
        self.guard = threading.Lock()

    def __call__(
        self,
        task: str,
        args: list[Any],
        kwargs: dict[str, Any],
        options: dict[str, Any],
        job_id: str,
    ) -> None:
        if self.hook is not None:
            self.hook(job_id)
        with self.guard:
            if self.fail_after is not None and len(self.sent) >= self.fail_after:
                raise ConnectionError("broker unreachable")
            self.sent.append((job_id, task, args, kwargs, options))
            self.counts[job_id] += 1

    @property
    def ids(self) -> list[str]:
        """Every id sent, in order, repeats included."""
        with self.guard:
            return [s[0] for s in self.sent]

    def has(self, ids: set[str]) -> bool:
        """Whether every one of ``ids`` was sent at least once."""
        with self.guard:
            return ids <= self.counts.keys()

    def released(self) -> Counter[str]:
        """Sends per id, a copy."""
        with self.guard:
            return Counter(self.counts)
