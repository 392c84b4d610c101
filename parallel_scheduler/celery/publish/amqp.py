"""The fast path to a RabbitMQ (AMQP 0-9-1) broker: a whole chunk of due jobs in one transaction.

This dispatcher takes each message's constant parts once per task and option set from Celery's
own ``app.amqp.as_task_v2`` (through ``message_template`` and ``amqp_routes``), keeps them as
ready AMQP bytes (``amqp_frames``), and per job encodes only what differs: the id, the argument
reprs, the body and the expiry. A chunk's frames go out in one socket write on one channel
(``amqp_pool``) inside an AMQP transaction, and ``dispatch_many`` returns only after the
broker's ``tx.commit-ok``, which RabbitMQ sends once every message of the chunk is in its queue
(persisted, for the durable queues and persistent messages Celery uses). A chunk is all or
nothing: when anything fails before the commit, none of it is delivered and
``BatchDispatchError(0, ...)`` is raised; the next call connects afresh. One message the broker
will not take (its exchange does not exist, no queue is bound for its route, or the broker nacks
it) is told apart from a failure of the chunk: the messages before it are delivered, and
``BatchDispatchError(its place, UnsendableJobError(job id, reason, taken_after))`` names it, so
the release sets that job aside and sends the ones after it, but for those the broker took all
the same (``taken_after``: after a return or a nack, the broker kept the later messages; after
it closed the channel for a missing exchange, it took none of them).

A worker receives what ``send_task`` would have published: protocol 2 headers with the job id as
task id and root id, the route's exchange and routing key, priority, delivery mode, the
``expires`` header and per-message TTL (``expiration``) when the job carries an expiry. The
routed queue is declared (with its exchange and binding) once per connection, as kombu's
``maybe_declare`` does, and every message is published ``mandatory``: a message the broker cannot
route (its queue was deleted after the declaration) comes back, and is declared and sent again;
one that comes back again is the job's fault. A route naming another exchange and routing key is
published there, as ``send_task`` does, but where Celery would lose a message for an exchange
that does not exist, or one no queue is bound for, the job is told it cannot be sent.

Not carried: serializers other than JSON, compression, queues on topic or fanout exchanges,
broadcast queues, and other exotic options; a chunk holding such a job goes through
``send_task`` whole. Celery's
``before_task_publish``/``after_task_publish`` signals are not sent for fast-path messages, and
``reply_to`` is empty (no caller waits on an RPC result of a job released later).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from parallel_scheduler.celery.publish.amqp_frames import Message, Template, TooLarge, properties
from parallel_scheduler.celery.publish.amqp_pool import Guarantee, Link, LinkPool, Refused
from parallel_scheduler.celery.publish.amqp_routes import make_template
from parallel_scheduler.celery.publish.broker_urls import (
    AMQP_SCHEMES,
    broker_scheme,
    masked_broker_url,
)
from parallel_scheduler.celery.publish.message_template import (
    carries_own_identity,
    options_key,
    origin,
)
from parallel_scheduler.celery.publish.send_task import CeleryDispatcher
from parallel_scheduler.delayed.envelopes import ReleaseFacts, release_facts
from parallel_scheduler.dispatchers import BatchDispatchError, KeepGoing, always, built_for_send
from parallel_scheduler.errors import (
    ConfigurationError,
    DispatchError,
    LeaseLost,
    UnsendableJobError,
)
from storage_adapters import ClaimedJob

__all__ = ["AmqpPublisher"]

logger = logging.getLogger(__name__)


class _Partway(Exception):
    """Sending a chunk again stopped after its first ``sent`` messages were delivered."""

    def __init__(self, sent: int, cause: Exception) -> None:
        super().__init__(str(cause))
        self.sent = sent
        self.cause = cause


class AmqpPublisher:
    """A ``Dispatcher`` for apps whose broker is RabbitMQ (``amqp://``, ``amqps://``,
    ``pyamqp://``): one transaction (one round trip) per chunk.

    Thread-safe: each concurrent ``dispatch_many`` uses its own connection from a small pool, and
    a connection that failed is dropped, so the next call reconnects. ``timeout`` bounds the wait
    for the broker's answer; when it runs out the chunk counts as not sent (it may then be
    delivered twice, never lost: the job id is the task id).

    ``guarantee="confirms"`` waits for publisher confirms of the whole chunk instead (the messages
    pipelined, one wait at the end; py-amqp's own ``confirm_publish`` would wait after every
    message). The broker has the chunk when the call returns either way; confirms cost RabbitMQ less
    CPU per message (docs/explanation/performance-results.md), but they are not all or nothing:
    after a failure part of the chunk may be queued already, and is then sent again. The transaction
    is the default for its all-or-nothing chunks.
    """

    publishes_chunks = True  # one transaction per chunk (see ``dispatchers.metrics_label``)

    def __init__(
        self, app: Any, *, timeout: float = 15.0, guarantee: Guarantee = "transaction"
    ) -> None:
        scheme = broker_scheme(app)
        if scheme not in AMQP_SCHEMES:
            raise ConfigurationError(
                "the AMQP fast publish path needs a RabbitMQ broker "
                f"({', '.join(s + '://' for s in AMQP_SCHEMES)}), not {masked_broker_url(app)!r}"
            )
        if guarantee not in ("transaction", "confirms"):
            raise ConfigurationError(
                f"guarantee must be transaction or confirms, not {guarantee!r}"
            )
        self.app = app
        self.timeout = timeout
        self.guarantee: Guarantee = guarantee
        self._fallback = CeleryDispatcher(app)
        self._origin = origin()
        self._json = app.conf.task_serializer == "json" and not app.conf.task_compression
        self._templates: dict[tuple[str, str], Template | None] = {}
        self._pool = LinkPool(app, guarantee, timeout)
        password = app.connection_for_write().password
        self._secret = password if isinstance(password, str) and password else None

    def dispatch(self, job: ClaimedJob) -> None:
        try:
            self.dispatch_many([job])
        except BatchDispatchError as exc:
            if isinstance(exc.cause, UnsendableJobError):
                raise exc.cause from exc
            raise

    def dispatch_many(self, jobs: Sequence[ClaimedJob], keep_going: KeepGoing = always) -> None:
        """One transaction for the chunk (or pipelined publishes and one wait for their
        confirms); a chunk with any job the fast path cannot carry goes through ``send_task``
        whole, in order."""
        messages: list[Message] = []
        for job in jobs:
            built = built_for_send(self._build, job) if self._json else None
            if built is None:
                self._fallback.dispatch_many(jobs, keep_going)
                return
            messages.append(built)
        if not messages:
            return
        try:
            self._send(messages, keep_going)
        except TooLarge:  # nothing was sent; what send_task makes of it is the answer
            self._fallback.dispatch_many(jobs, keep_going)

    def _send(self, messages: Sequence[Message], keep_going: KeepGoing) -> None:
        """Publish ``messages`` in order. When the broker will not take one (``Refused``), the
        ones before it are published (again, on a fresh connection, if they were in doubt) and
        ``BatchDispatchError(its place, UnsendableJobError)`` says which and why, naming as
        ``taken_after`` the ones after it the broker took all the same; the others after it are
        left to the caller, which sends them next."""
        pending = list(range(len(messages)))  # places still to publish, in order
        taken: set[int] = set()  # places in the broker's hands
        bad: int | None = None
        reason = ""
        retried: set[int] = set()
        while pending:
            try:
                link = self._pool.checkout()
            except Exception as exc:
                unreached = self._scrubbed(exc, "cannot connect to")
                raise BatchDispatchError(pending[0], unreached) from exc
            try:
                self._publish(link, [messages[p] for p in pending], keep_going)
            except Refused as refused:
                self._pool.give_back(link, keep=not link.broken)
                at = pending[refused.index]
                taken.update(pending[t] for t in refused.taken)
                if refused.retry and at not in retried:
                    retried.add(at)  # a fresh connection declares its route again
                    pending = [p for p in pending if p not in taken]
                else:  # those before it that are in doubt go again; the caller has the rest
                    bad, reason = at, refused.reason
                    pending = [p for p in pending[: refused.index] if p not in taken]
                continue
            except TooLarge:
                self._pool.give_back(link, keep=True)
                raise
            except _Partway as partway:
                cause, stopped = partway.cause, isinstance(partway.cause, LeaseLost)
                self._pool.give_back(link, keep=stopped and not link.broken)
                if not stopped:
                    cause = self._scrubbed(cause, "publishing failed on")
                raise BatchDispatchError(pending[partway.sent], cause) from partway.cause
            except LeaseLost as exc:
                self._pool.give_back(link, keep=not link.broken)
                raise BatchDispatchError(pending[0], exc) from exc
            except Exception as exc:
                link.close()
                failed = self._scrubbed(exc, "publishing failed on")
                raise BatchDispatchError(pending[0], failed) from exc
            self._pool.give_back(link, keep=True)
            taken.update(pending)
            pending = []
        if bad is not None:
            after = [messages[p].job_id for p in sorted(taken) if p > bad]
            unsendable = UnsendableJobError(messages[bad].job_id, reason, taken_after=after)
            raise BatchDispatchError(bad, unsendable)

    @staticmethod
    def _publish(link: Link, batch: Sequence[Message], keep_going: KeepGoing) -> None:
        """Publish ``batch`` on ``link``; messages sent back as unroutable (a queue deleted after
        its declaration) are declared and sent once more, and if they come back again, the first
        is ``Refused``: the others of the batch are delivered (they are its ``taken``), so the
        refusal is counted in places of the whole batch (``_Partway`` for any other failure of
        that second send)."""
        returned = link.publish(batch, keep_going)
        if not returned:
            return
        link.declared.clear()
        try:
            again = link.publish([batch[i] for i in returned], keep_going)
        except Refused as refused:
            raise refused.among(returned, len(batch)) from refused
        except Exception as exc:
            raise _Partway(returned[0], exc) from exc
        if again:  # of the batch, all but those sent back twice are in the broker's hands
            reason = link.returned[batch[returned[again[0]]].job_id]
            kept = set(range(len(returned))).difference(again)
            raise Refused(again[0], kept, reason).among(returned, len(batch))

    def close(self) -> None:
        """Close the idle connections (a call after this one opens new ones)."""
        self._pool.close()

    def _scrubbed(self, exc: BaseException, what: str) -> DispatchError:
        """The error as text naming the broker, with any password masked."""
        text = f"{type(exc).__name__}: {exc}"
        if self._secret:
            text = text.replace(self._secret, "***")
        return DispatchError(f"{what} the AMQP broker {masked_broker_url(self.app)}: {text}")

    def _build(self, job: ClaimedJob) -> Message | None:
        """One job's message, or ``None`` for the slow path."""
        facts = release_facts(job.payload)
        if carries_own_identity(facts.options):  # a stored retry: send_task keeps its task id
            return None
        template = self._template(job.task, facts)
        if template is None:
            return None
        spliced = properties(
            template, job.id, facts.args, facts.kwargs, facts.expires_at, time.time(), job.due_at
        )
        if spliced is None:
            return None
        body = f"[{facts.args_json},{facts.kwargs_json},{template.embed}]".encode()
        return Message(template, job.id, spliced, body)

    def _template(self, task: str, facts: ReleaseFacts) -> Template | None:
        stored = facts.options
        cache_key = (task, options_key(facts))
        if cache_key in self._templates:
            return self._templates[cache_key]
        try:
            template = make_template(self.app, task, stored, self._origin)
        except Exception as exc:  # send_task will meet (and report) the same problem
            logger.info(
                "the fast path does not carry %s with options %s: %s", task, sorted(stored), exc
            )
            template = None
        self._templates[cache_key] = template
        return template
