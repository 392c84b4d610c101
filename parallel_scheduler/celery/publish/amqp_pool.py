"""The AMQP fast path's connections: a ``Link`` is one connection and one channel in transaction
(or confirm) mode, used by one thread at a time; a ``LinkPool`` keeps the idle ones for the next
chunks, drops any that failed, and forgets its parent's after a fork."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Sequence
from typing import Any, Literal

import amqp  # type: ignore[import-untyped]
from amqp import spec

from ...dispatchers import KeepGoing, lease_lost
from ...errors import ConfigurationError, DispatchError
from .amqp_frames import Message, frames
from .broker_urls import masked_broker_url

__all__ = ["Guarantee", "Link", "LinkPool"]

logger = logging.getLogger(__name__)

Guarantee = Literal["transaction", "confirms"]
#: Idle connections kept for the next chunks (one per concurrent caller is what gets used).
_MAX_IDLE_LINKS = 16


class Link:
    """One connection and one channel; dropped after any error, so a failed connection is never
    used again."""

    def __init__(self, app: Any, guarantee: Guarantee, timeout: float) -> None:
        options = dict(app.conf.broker_transport_options or {})
        options["confirm_publish"] = False  # py-amqp would wait after every message
        options.setdefault("write_timeout", timeout)
        self.client = app.connection_for_write(transport_options=options)
        try:
            self.client.connect()
            self.connection = self.client.connection
            if not isinstance(self.connection, amqp.Connection):
                raise ConfigurationError(
                    f"the AMQP fast path needs kombu's py-amqp transport, not "
                    f"{type(self.connection).__name__}"
                )
            self.channel = self.client.channel()
            self.channel.events["basic_return"].add(self._on_return)
            self.guarantee = guarantee
            self.timeout = timeout
            self.declared: set[str] = set()
            self.returned: list[str] = []
            self.published = 0  # confirm mode: delivery tags handed out ...
            self.confirmed = 0  # ... and acknowledged
            self.rejected = False
            self.broken = False
            if guarantee == "transaction":
                self.channel.tx_select()
            else:
                self.channel.events["basic_ack"].add(self._on_ack)
                self.channel.events["basic_nack"].add(self._on_nack)
                self.channel.confirm_select()
        except BaseException:
            self.close()
            raise

    def _on_return(self, exc: Any, exchange: str, routing_key: str, message: Any) -> None:
        self.returned.append(str(message.properties.get("correlation_id")))

    def _on_ack(self, delivery_tag: int, multiple: bool) -> None:
        self.confirmed = max(self.confirmed, delivery_tag)

    def _on_nack(self, delivery_tag: int, multiple: bool) -> None:
        self.rejected = True

    def alive(self) -> bool:
        """False when the broker closed the idle connection (read without waiting)."""
        try:
            self.connection.drain_events(timeout=0)
        except TimeoutError:
            return True
        except Exception:
            return False
        return True

    def declare(self, queue: Any) -> None:
        if queue.name not in self.declared:
            queue(self.channel).declare()
            self.declared.add(queue.name)

    def publish(self, messages: Sequence[Message], keep_going: KeepGoing) -> list[str]:
        """Publish ``messages`` durably; returns the ids of messages the broker sent back."""
        chunk = frames(messages, self.channel.channel_id, self.connection.frame_max)
        for message in messages:
            self.declare(message.template.queue)
        self.returned = []
        if self.guarantee == "confirms" and not keep_going():
            raise lease_lost()
        self.connection.transport.write(chunk)
        if self.guarantee == "transaction":
            if not keep_going():  # the last moment to step aside: nothing is committed yet
                try:
                    self.channel.tx_rollback()
                except Exception:
                    self.broken = True  # the transaction dies with the connection
                raise lease_lost()
            self.channel.send_method(spec.Tx.Commit)
            self.channel.wait(spec.Tx.CommitOk, timeout=self.timeout)
        else:
            self.published += len(messages)
            while self.confirmed < self.published and not self.rejected:
                self.channel.wait([spec.Basic.Ack, spec.Basic.Nack], timeout=self.timeout)
            if self.rejected:
                raise DispatchError("the broker rejected (nacked) a published message")
        return self.returned

    def close(self) -> None:
        with contextlib.suppress(Exception):  # a broken connection has nothing to release
            self.client.release()


class LinkPool:
    """Idle links for the next chunks: thread-safe, one link per concurrent caller."""

    def __init__(self, app: Any, guarantee: Guarantee, timeout: float) -> None:
        self.app = app
        self.guarantee: Guarantee = guarantee
        self.timeout = timeout
        self.idle: list[Link] = []
        self._guard = threading.Lock()
        self._pid = os.getpid()

    def checkout(self) -> Link:
        """An idle link that is still alive, or a new one."""
        with self._guard:
            if self._pid != os.getpid():  # forked: the parent's sockets are not ours to use
                self.idle, self._pid = [], os.getpid()
            link = self.idle.pop() if self.idle else None
        while link is not None and not link.alive():
            link.close()
            with self._guard:
                link = self.idle.pop() if self.idle else None
        if link is not None:
            return link
        link = Link(self.app, self.guarantee, self.timeout)
        logger.info(
            "fast publish: connected to the AMQP broker %s (%s per chunk)",
            masked_broker_url(self.app),
            "one transaction" if self.guarantee == "transaction" else "publisher confirms",
        )
        return link

    def give_back(self, link: Link, keep: bool) -> None:
        """Keep ``link`` for the next chunk, or close it (when told, or the pool is full)."""
        if keep:
            with self._guard:
                if len(self.idle) < _MAX_IDLE_LINKS and self._pid == os.getpid():
                    self.idle.append(link)
                    return
        link.close()

    def close(self) -> None:
        """Close the idle links (a checkout after this one opens new ones)."""
        with self._guard:
            idle, self.idle = self.idle, []
        for link in idle:
            link.close()
