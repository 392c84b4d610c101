"""RabbitMQ's raw publish limit: the same persistent Celery messages the project's publisher sends,
built before the clock starts, published with py-amqp directly under the same guarantee (one
transaction per chunk of 50, or publisher confirms awaited once per chunk) on ``parallelism``
connections, as many as the scheduler's pool uses. Checked like the project's path: every job
id consumed back exactly once; the queue is deleted afterwards."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

import amqp  # type: ignore[import-untyped]
from amqp import spec
from kombu.connection import Connection

from benchmarks.harness.amqp import delete_queue, drain_ids
from benchmarks.harness.raw_limits import timed
from benchmarks.harness.release_runs import CheckFailed, expect_each_once
from parallel_scheduler import JobSpec

__all__ = ["amqp_messages", "amqp_publish"]

CHUNK = 50  # the scheduler's chunk (parallel_scheduler.delayed.scheduler.CHUNK)


def amqp_messages(app: Any, specs: Sequence[JobSpec]) -> list[Any]:
    """Each job's message as Celery builds it (``as_task_v2``): headers, JSON body, persistent."""
    messages = []
    for job in specs:
        made = app.amqp.as_task_v2(job.id, job.task, list(job.args), dict(job.kwargs))
        messages.append(
            amqp.Message(
                body=json.dumps(made.body).encode(),
                content_type="application/json",
                content_encoding="utf-8",
                application_headers=made.headers,
                delivery_mode=2,
                priority=0,
                correlation_id=job.id,
            )
        )
    return messages


def _connect(broker_url: str) -> Any:
    parts = Connection(broker_url)  # type: ignore[no-untyped-call]
    connection = amqp.Connection(
        host=f"{parts.hostname}:{parts.port or 5672}",
        userid=parts.userid,
        password=parts.password,
        virtual_host=parts.virtual_host,
    )
    connection.connect()
    return connection


def _publisher(
    broker_url: str, queue: str, guarantee: str, chunks: list[Sequence[Any]], guard: Any
) -> None:
    connection = _connect(broker_url)
    try:
        channel = connection.channel()
        acked, nacked = [0], []

        def on_ack(tag: int, multiple: bool) -> None:
            acked[0] = max(acked[0], tag)

        if guarantee == "transaction":
            channel.tx_select()
        else:
            channel.events["basic_ack"].add(on_ack)
            channel.events["basic_nack"].add(lambda tag, multiple: nacked.append(tag))
            channel.confirm_select()
        published = 0
        while True:
            with guard:
                if not chunks:
                    return
                chunk = chunks.pop()
            for message in chunk:
                channel.basic_publish(message, exchange="", routing_key=queue)
            if guarantee == "transaction":
                channel.tx_commit()
            else:
                published += len(chunk)
                while acked[0] < published and not nacked:
                    channel.wait([spec.Basic.Ack, spec.Basic.Nack], timeout=15)
                if nacked:
                    raise CheckFailed(f"the broker nacked {len(nacked)} message(s)")
    finally:
        connection.close()


def amqp_publish(
    broker_url: str, queue: str, messages: Sequence[Any], guarantee: str, parallelism: int
) -> tuple[float, float]:
    """Publish ``messages`` to a durable ``queue`` (``guarantee``: transaction or confirms)."""
    declaring = _connect(broker_url)
    declaring.channel().queue_declare(queue, durable=True, auto_delete=False)
    declaring.close()
    chunks = [messages[i : i + CHUNK] for i in range(0, len(messages), CHUNK)][::-1]
    guard = threading.Lock()
    failures: list[BaseException] = []

    def publisher() -> None:
        try:
            _publisher(broker_url, queue, guarantee, chunks, guard)
        except BaseException as exc:
            failures.append(exc)

    def publish() -> None:
        threads = [threading.Thread(target=publisher) for _ in range(parallelism)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    try:
        figures = timed(publish, len(messages))
        if failures:
            raise CheckFailed(f"raw AMQP publish ({guarantee}): {failures[0]!r}")
        ids = drain_ids(broker_url, queue, len(messages))[1]
        expect_each_once(f"raw AMQP publish ({guarantee})", dict(ids), len(messages))
        return figures
    finally:
        delete_queue(broker_url, queue)
