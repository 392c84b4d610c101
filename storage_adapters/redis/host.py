"""What ``RedisStorage`` provides to the mixins it inherits: one declaration of its plumbing, so
each mixin is type-checked against the same host instead of repeating these stubs."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from storage_adapters.records import JobState

__all__ = ["RedisHost"]


class RedisHost:
    """The plumbing ``RedisStorage`` defines; empty at run time (declarations for mypy only)."""

    if TYPE_CHECKING:  # provided by RedisStorage

        def _key(self, rest: str) -> str: ...

        def _state_key(self, state: JobState) -> str: ...

        def _finished_key(self, state: JobState) -> str: ...

        def _talking(self) -> AbstractContextManager[Any]: ...

        def _run(self, script: str, keys: Sequence[str], args: Sequence[str | int]) -> Any: ...

        def now(self) -> float: ...
