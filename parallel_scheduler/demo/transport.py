"""The demo's broker: kombu's filesystem transport, made safe and fast for a real backlog.

kombu's own filesystem transport creates a message file and then writes it, so a consumer can move
and read the file in between and crash on an empty message; and it lists and sorts the whole
folder for every message it takes, which slows to a crawl with thousands waiting. This subclass
writes each message under a hidden name and renames it into place (atomic on one file system),
and takes messages from a sorted listing that it refreshes only when it has used it up.
"""

from __future__ import annotations

import os
import time
import uuid
from collections import defaultdict, deque
from queue import Empty
from typing import Any

from kombu.transport import TRANSPORT_ALIASES, filesystem
from kombu.utils.json import dumps, loads

ALIAS = "psdemo"
RELIST_AFTER = 0.02  # seconds


class Channel(filesystem.Channel):
    def _put(self, queue: Any, payload: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        name = f"{time.monotonic_ns():020d}_{uuid.uuid4().hex}.{queue}.msg"
        hidden = os.path.join(self.data_folder_out, f".{name}.tmp")
        with open(hidden, "wb") as f:
            f.write(dumps(payload).encode())  # type: ignore[no-untyped-call]
        os.rename(hidden, os.path.join(self.data_folder_out, name))

    def _listing(self, queue: str) -> deque[str]:
        """Messages waiting in ``queue``, oldest first, from one folder listing shared by all
        queues and refreshed at most every ``RELIST_AFTER`` seconds."""
        state: dict[str, Any] = self.__dict__.setdefault("_ps_state", {"at": 0.0, "queues": {}})
        queues: dict[str, deque[str]] = state["queues"]
        pending = queues.setdefault(queue, deque())
        if pending or time.monotonic() - state["at"] < RELIST_AFTER:
            return pending
        buckets: dict[str, list[str]] = defaultdict(list)
        for name in os.listdir(self.data_folder_in):
            if name.endswith(".msg") and not name.startswith("."):
                buckets[name.partition(".")[2][: -len(".msg")]].append(name)
        for name, waiting in buckets.items():
            queues[name] = deque(sorted(waiting))
        state["at"] = time.monotonic()
        return queues.setdefault(queue, deque())

    def _get(self, queue: Any, timeout: Any = None) -> Any:
        pending = self._listing(queue)
        while pending:
            source = os.path.join(self.data_folder_in, pending.popleft())
            taken = f"{source}.taken-{os.getpid()}"
            try:
                os.rename(source, taken)  # only one consumer wins the rename
            except FileNotFoundError:
                continue
            with open(taken, "rb") as f:
                payload = f.read()
            os.unlink(taken)
            return loads(payload.decode())  # type: ignore[no-untyped-call]
        raise Empty()


class Transport(filesystem.Transport):
    Channel = Channel


TRANSPORT_ALIASES[ALIAS] = f"{__name__}:Transport"
