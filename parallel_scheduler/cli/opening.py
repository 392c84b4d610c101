"""Opening the store a command works on, and saying which one it is.

Every command names the store it opened on stderr (password masked; for SQLite also the file's
absolute path), so a user who forgot ``--storage-url`` sees at once that they are looking at
``./parallel-scheduler.db``. A read-only command (``list``, ``show``, ``status``, ``recurring
list``) never creates a store: an SQLite file that does not exist is reported as "no store at
<path>" instead of being created empty.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import storage_adapters
from parallel_scheduler.cli.options import overrides
from parallel_scheduler.client import Client
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.errors import ParallelSchedulerError
from parallel_scheduler.log_format import say
from parallel_scheduler.opening_storage import describe_storage, sqlite_file
from parallel_scheduler.settings import Settings
from storage_adapters import mask_url, shards_of

__all__ = [
    "INTERACTIVE_RETRY_SECONDS",
    "NoStoreError",
    "announce_storage",
    "describe_storage",
    "open_client",
    "read",
    "sqlite_file",
]

T = TypeVar("T")
#: A person waiting at a prompt wants an answer soon, not 30 s of silent retries.
INTERACTIVE_RETRY_SECONDS = 3.0


class NoStoreError(ParallelSchedulerError):
    """A read-only command was pointed at a store that does not exist; nothing was created."""


def announce_storage(settings: Settings) -> None:
    url = settings.storage_url or storage_adapters.DEFAULT_URL
    say(f"parallel-scheduler: storage {describe_storage(url)}", logging.INFO)


@contextmanager
def open_client(ns: argparse.Namespace, *, read_only: bool = False) -> Iterator[Client]:
    """A client on the store the options, environment and defaults name, set up and announced.

    ``read_only``: refuse (``NoStoreError``) rather than create an SQLite file that is missing.
    """
    settings = Settings.load(overrides(ns))
    url = settings.storage_url or storage_adapters.DEFAULT_URL
    path = sqlite_file(url)
    if read_only and path is not None and not path.exists():
        raise NoStoreError(
            f"no store at {path} ({mask_url(url)}); nothing was created. Pass --storage-url "
            "or set PARALLEL_SCHEDULER_STORAGE_URL to the store your jobs are in"
        )
    announce_storage(settings)
    client = Client(settings=settings, retry_for=INTERACTIVE_RETRY_SECONDS)
    try:
        home = shards_of(client.storage)[0]
        # PostgreSQL and Redis: a read must not create tables or keys under a mistyped prefix
        if read_only and hasattr(home, "exists") and not read(client, home.exists):
            raise NoStoreError(
                f"no store under prefix {settings.prefix!r} at {mask_url(url)}; nothing was "
                "created. Pass --storage-url/--prefix (or set PARALLEL_SCHEDULER_STORAGE_URL, "
                "PARALLEL_SCHEDULER_PREFIX) to the store your jobs are in"
            )
        client.setup()
        yield client
    finally:
        client.close()


def read(client: Client, fn: Callable[[], T]) -> T:
    """A storage read, retried as briefly as every interactive call (``Client``'s own reads
    decode rows, and the CLI must show even rows that do not decode)."""
    return call_storage(fn, give_up_after=client.retry_for)
