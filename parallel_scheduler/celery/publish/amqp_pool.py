"""The AMQP fast path's connections: a ``Link`` is one connection and one channel in transaction
(or confirm) mode, used by one thread at a time, that tells which message of a chunk the broker
would not take (``Refused``); a ``LinkPool`` keeps the idle ones for the next chunks, drops any
that failed, and forgets its parent's after a fork."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import amqp  # type: ignore[import-untyped]
from amqp import spec
from amqp.exceptions import NotFound  # type: ignore[import-untyped]

from parallel_scheduler.celery.publish.amqp_frames import Message, frames
from parallel_scheduler.celery.publish.amqp_refusals import (
    missing_exchange,
    no_exchange_reason,
    returned_reason,
)
from parallel_scheduler.celery.publish.broker_urls import masked_broker_url
from parallel_scheduler.dispatchers import KeepGoing, lease_lost
from parallel_scheduler.errors import ConfigurationError, DispatchError

__all__ = ["Guarantee", "Link", "LinkPool", "Refused"]

logger = logging.getLogger(__name__)

Guarantee = Literal["transaction", "confirms"]
#: Idle connections kept for the next chunks (one per concurrent caller is what gets used).
_MAX_IDLE_LINKS = 16


class Refused(DispatchError):
    """The broker would not take one message of a published batch: ``index`` is its place in
    the batch, ``reason`` says why in words, and ``taken`` holds the places of the batch's
    messages known to be in the broker's hands, before it or after it (the others may be, and
    are sent again). ``retry``: a fresh connection, which declares the routes again, may yet get
    it through."""

    def __init__(self, index: int, taken: Iterable[int], reason: str, retry: bool = False) -> None:
        super().__init__(reason)
        self.index = index
        self.taken = frozenset(taken)
        self.reason = reason
        self.retry = retry

    def among(self, places: Sequence[int], size: int) -> Refused:
        """The same refusal of a batch made of the messages at ``places`` of a larger one of
        ``size`` messages, all of whose other messages were delivered, in that larger batch's
        places."""
        others = set(range(size)).difference(places)
        taken = others.union(places[t] for t in self.taken)
        return Refused(places[self.index], taken, self.reason, self.retry)


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
            self.returned: dict[str, str] = {}  # job id -> why the broker sent it back
            self.published = 0  # confirm mode: delivery tags handed out
            self.unconfirmed: set[int] = set()  # ... of the batch, not acked or nacked yet
            self.nacked: list[int] = []  # ... and nacked
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
        job_id = str(message.properties.get("correlation_id"))
        self.returned[job_id] = returned_reason(exc, exchange, routing_key)

    def _settle(self, delivery_tag: int, multiple: bool) -> list[int]:
        """Take the tags an ack or nack settles off the unconfirmed ones; returns them."""
        if not multiple:
            self.unconfirmed.discard(delivery_tag)
            return [delivery_tag]
        settled = [tag for tag in self.unconfirmed if tag <= delivery_tag]
        self.unconfirmed.difference_update(settled)
        return settled

    def _on_ack(self, delivery_tag: int, multiple: bool) -> None:
        self._settle(delivery_tag, multiple)

    def _on_nack(self, delivery_tag: int, multiple: bool) -> None:
        self.nacked.extend(self._settle(delivery_tag, multiple))

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

    def publish(self, messages: Sequence[Message], keep_going: KeepGoing) -> list[int]:
        """Publish ``messages`` durably; returns the places of those the broker sent back as
        unroutable (``returned`` says why), every other one being in its hands. A message it
        nacked, or whose exchange it does not have, is raised as ``Refused`` (the link is then
        ``broken`` when the broker closed the channel)."""
        chunk = frames(messages, self.channel.channel_id, self.connection.frame_max)
        for message in messages:
            self.declare(message.template.queue)
        self.returned = {}
        if self.guarantee == "confirms" and not keep_going():
            raise lease_lost()
        base = self.published
        self.connection.transport.write(chunk)
        try:
            if self.guarantee == "transaction":
                self._commit(keep_going)
            else:
                self._confirm(base, len(messages))
        except NotFound as exc:
            self.broken = True  # the broker closed the channel: the link is not used again
            delivered = 0 if self.guarantee == "transaction" else self._acked_prefix(base, messages)
            refused = self._no_exchange(exc, messages, delivered)
            if refused is None:
                raise
            raise refused from exc
        if not self.returned and not self.nacked:
            return []
        returned = [i for i, message in enumerate(messages) if message.job_id in self.returned]
        if self.nacked:  # the first message not taken is the one refused; the acked ones are in
            nacked = [tag - base - 1 for tag in self.nacked]
            first = min([*nacked, *returned])
            taken = set(range(len(messages))).difference(nacked, returned)
            if first in returned:
                raise Refused(first, taken, self.returned[messages[first].job_id])
            raise Refused(first, taken, "the broker refused the message (nack)")
        return returned

    def _commit(self, keep_going: KeepGoing) -> None:
        if not keep_going():  # the last moment to step aside: nothing is committed yet
            try:
                self.channel.tx_rollback()
            except Exception:
                self.broken = True  # the transaction dies with the connection
            raise lease_lost()
        self.channel.send_method(spec.Tx.Commit)
        self.channel.wait(spec.Tx.CommitOk, timeout=self.timeout)

    def _confirm(self, base: int, count: int) -> None:
        """Wait for the broker to ack or nack each of the batch's ``count`` messages (delivery
        tags ``base + 1`` on): one wait for the pipelined batch, not one per message."""
        self.published = base + count
        self.unconfirmed = set(range(base + 1, base + count + 1))
        self.nacked = []
        while self.unconfirmed:
            self.channel.wait([spec.Basic.Ack, spec.Basic.Nack], timeout=self.timeout)

    def _acked_prefix(self, base: int, messages: Sequence[Message]) -> int:
        """How many of the batch's first messages the broker acked (confirm mode)."""
        first_open = min(self.unconfirmed | set(self.nacked), default=base + len(messages) + 1)
        return first_open - base - 1

    @staticmethod
    def _no_exchange(exc: Any, messages: Sequence[Message], delivered: int) -> Refused | None:
        """A channel closed for an exchange the broker does not have, as the ``Refused`` of the
        batch's first message published there (the broker stopped at that one: of the batch,
        only the first ``delivered`` messages are taken); ``None`` when the broker's words name
        none of the batch's exchanges."""
        exchange = missing_exchange(exc)
        for index, message in enumerate(messages):
            template = message.template
            if exchange is not None and template.exchange == exchange:
                # the queue's own exchange is declared with it: deleted behind our back?
                own = exchange == getattr(template.queue.exchange, "name", None)
                reason = no_exchange_reason(exchange)
                return Refused(index, range(min(delivered, index)), reason, retry=own)
        return None

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
