"""Which broker and storage the demo runs on, and how it knows the broker has drained.

``--broker auto`` (the default) takes the product's default fast path whenever it can with no
server for the user to install or start: when a ``redis-server`` binary is installed, the demo
starts a throwaway one (``redis_server.py``) and uses it as both the Celery broker and the job
storage, so the defaults release each due batch by one script, storage to broker. Otherwise, or
with ``--broker filesystem``, it runs on SQLite and kombu's filesystem broker, which has no fast
path (``send_task`` per job), and the summary says why and what to install.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from parallel_scheduler.demo.redis_server import INSTALL_HINT, missing, throwaway_redis
from parallel_scheduler.errors import ConfigurationError

__all__ = ["BROKER_CHOICES", "DemoBroker", "demo_broker"]

#: ``--broker``'s choices (the command line names them too, without importing the demo).
BROKER_CHOICES = ("auto", "redis", "filesystem")
#: Where kombu's Redis transport keeps messages delivered to a worker and not yet acknowledged.
_UNACKED = "unacked"
_PRIORITY_SEPARATOR = "\x06\x16"


@dataclass(frozen=True)
class DemoBroker:
    """The demo's broker and storage for one run."""

    #: The Celery broker URL; ``None``: the demo's filesystem broker.
    broker_url: str | None
    storage_url: str
    #: How the summary names broker and storage.
    description: str
    #: Why this run is not on the default fast path and what to install; ``None`` when it is.
    not_fast: str | None
    #: True once no message waits in (or is held unacknowledged by) the broker.
    drained: Callable[[], bool]


def _kind(choice: str) -> str:
    """``redis`` or ``filesystem`` for ``--broker choice``; ``ConfigurationError`` for ``redis``
    when something it needs is missing, naming what to install."""
    if choice not in BROKER_CHOICES:
        raise ConfigurationError(f"demo: --broker must be one of {BROKER_CHOICES}, not {choice!r}")
    if choice == "auto":
        return "filesystem" if missing() else "redis"
    problem = missing() if choice == "redis" else None
    if problem is not None:
        raise ConfigurationError(f"demo: --broker redis cannot run: {problem}")
    return choice


@contextmanager
def demo_broker(choice: str, folder: Path) -> Iterator[DemoBroker]:
    """The broker and storage for ``--broker choice`` in ``folder``, for the ``with`` block (a
    throwaway ``redis-server`` is stopped at its end)."""
    if _kind(choice) == "filesystem":
        yield _filesystem(folder, choice)
        return
    import redis  # the optional [redis] extra; ``missing()`` found it

    from parallel_scheduler.demo.app import (
        QUEUE,  # not at the top: the module's app reads the demo's folder
    )

    # kombu's Redis transport: one list per priority step (a bare queue name for step 0)
    lists = [QUEUE, *(f"{QUEUE}{_PRIORITY_SEPARATOR}{step}" for step in (3, 6, 9))]
    with throwaway_redis(folder) as url:
        link = redis.Redis.from_url(url)
        try:
            yield DemoBroker(
                broker_url=url,
                storage_url=url,
                description=f"the demo's own redis-server at {url}, as broker and storage",
                not_fast=None,
                drained=lambda: link.hlen(_UNACKED) == 0 and not any(map(link.llen, lists)),
            )
        finally:
            link.close()


def _filesystem(folder: Path, choice: str) -> DemoBroker:
    no_fast_path = "the filesystem broker has no fast path (send_task per job)"
    if choice == "filesystem":
        why = (
            f"--broker filesystem: {no_fast_path}; for the default fast path run without it "
            f"(the demo then starts its own redis-server; {INSTALL_HINT} if it is missing)"
        )
    else:
        why = (
            f"{missing()}, so {no_fast_path}; for the default fast path, a Redis broker and "
            "storage, install it and run the demo again"
        )
    queue_dir = folder / "broker"
    return DemoBroker(
        broker_url=None,
        storage_url=f"sqlite:///{folder / 'demo.db'}",
        description=f"SQLite and a filesystem broker in {folder}",
        not_fast=why,
        drained=lambda: not queue_dir.exists() or not any(queue_dir.iterdir()),
    )
