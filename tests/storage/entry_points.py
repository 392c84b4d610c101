"""What the "one bad input, refused the same way at every door" tests share
(``test_hostile_inputs.py``, ``test_valid_ranges.py``): a store of the test's own on every
backend, the Celery producer the plugin's entry points are called on, and a table of entry
points to run one bad input through.

Each entry point makes one call with the bad input and returns its error's text; the command
line's also take pytest's ``capsys``, to read what the command wrote.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Protocol, TypeVar

import pytest
from celery import Celery

import parallel_scheduler.celery
from storage_adapters import Storage
from tests.conftest import set_up_storage, storage_url


class Target(Protocol):
    """A store of the test's own: its URL and prefix (for the command line and the plugin), the
    storage, and a snapshot of everything a refused call could have written."""

    url: str
    prefix: str
    storage: Storage

    def snapshot(self) -> object: ...


T = TypeVar("T", bound=Target)
Bad = TypeVar("Bad")


def opened(
    make: Callable[[str, str, Storage], T], adapter_kind: str, tmp_path: Path
) -> Iterator[T]:
    """``make(url, prefix, storage)`` over a new store on ``adapter_kind``, dropped afterwards: a
    fixture's body (``yield from``)."""
    url = storage_url(adapter_kind, tmp_path)
    prefix, storage = set_up_storage(url)
    yield make(url, prefix, storage)
    storage.drop()
    storage.close()


class Store:
    """A ``Target`` with nothing of its own: its snapshot is the job counts by state and the
    number of recurring jobs."""

    def __init__(self, url: str, prefix: str, storage: Storage) -> None:
        self.url, self.prefix, self.storage = url, prefix, storage

    def snapshot(self) -> object:
        return self.storage.count_by_state(), self.storage.count_recurring()


def producer(name: str, target: Target) -> Celery:
    """A producer app (in memory, no broker) with the plugin installed on ``target``, deferring
    every call due more than a second ahead."""
    app = Celery(name, broker="memory://")
    app.conf.update(task_serializer="json", parallel_scheduler_eta_threshold=1.0)
    parallel_scheduler.celery.install(app, storage_url=target.url, prefix=target.prefix)
    return app


@dataclass(frozen=True)
class Refusal(Generic[Bad]):
    """One bad input through one entry point: the input, the error's text, and the target's
    snapshots before and after the call."""

    bad: Bad
    message: str
    before: object
    after: object


@dataclass(frozen=True)
class EntryPoints(Generic[Bad]):
    """Entry points by name (``calls``; those in ``cli`` take ``capsys`` too), the bad inputs by
    case, and which case ``applies`` to which entry point."""

    calls: Mapping[str, Callable[..., str]]
    cli: Collection[str]
    bad: Mapping[str, Bad]
    applies: Callable[[str, Bad], bool]

    def cases(self) -> list[tuple[str, str]]:
        """Every (entry point, case) pair that applies: the parameters of a test."""
        return [
            (entry, case)
            for entry in self.calls
            for case, bad in self.bad.items()
            if self.applies(entry, bad)
        ]

    def refuse(
        self, entry: str, case: str, target: Target, capsys: pytest.CaptureFixture[str]
    ) -> Refusal[Bad]:
        """``case``'s bad input through ``entry`` on ``target``."""
        bad = self.bad[case]
        before = target.snapshot()
        call = self.calls[entry]
        message = call(target, bad, capsys) if entry in self.cli else call(target, bad)
        return Refusal(bad, message, before, target.snapshot())
