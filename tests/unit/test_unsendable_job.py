"""A job whose stored payload cannot be decoded is that one job's fault: the dispatcher names it
(``UnsendableJobError``) so the release can tell it apart from a broker failure of the batch."""

from __future__ import annotations

from typing import Any

import pytest

from parallel_scheduler.dispatchers import BatchDispatchError, CallableDispatcher
from parallel_scheduler.errors import UnsendableJobError
from storage_adapters import ClaimedJob

#: Arguments nested deeper than ``json`` decodes: a row stored before accept refused them.
TOO_DEEP = '{"args":[' + "[" * 100_000 + "]" * 100_000 + '],"kwargs":{},"options":{}}'
ORDINARY = '{"args":[1],"kwargs":{},"options":{}}'


def claim(job_id: str, payload: str) -> ClaimedJob:
    return ClaimedJob(job_id, "tasks.add", payload, 0.0, 0, 1)


@pytest.mark.parametrize("payload", [TOO_DEEP, "not json", "[1, 2]"])
def test_a_payload_that_does_not_decode_is_unsendable_naming_the_job(payload: str) -> None:
    calls: list[str] = []

    def send(task: str, args: list[Any], kwargs: dict[str, Any], o: dict[str, Any], i: str) -> None:
        calls.append(i)

    with pytest.raises(UnsendableJobError) as raised:
        CallableDispatcher(send).dispatch(claim("poison-1", payload))
    assert raised.value.job_id == "poison-1"
    assert "poison-1" in str(raised.value) and "do not decode" in raised.value.reason
    assert calls == []


def test_a_batch_stops_at_the_unsendable_job_saying_which_and_how_many_went() -> None:
    calls: list[str] = []

    def send(task: str, args: list[Any], kwargs: dict[str, Any], o: dict[str, Any], i: str) -> None:
        calls.append(i)

    jobs = [claim("a", ORDINARY), claim("poison-2", TOO_DEEP), claim("b", ORDINARY)]
    with pytest.raises(BatchDispatchError) as raised:
        CallableDispatcher(send).dispatch_many(jobs)
    assert raised.value.sent == 1 and calls == ["a"]
    assert isinstance(raised.value.cause, UnsendableJobError)
    # The release logs str(error): it names the job that is at fault.
    assert "poison-2" in str(raised.value)


def test_the_redis_fast_path_names_the_job_whose_arguments_do_not_decode() -> None:
    from celery import Celery

    from parallel_scheduler.celery.publish.redis_lists import RedisPublisher

    app = Celery("unsendable", broker="redis://127.0.0.1:1/0")  # never reached: nothing is sent
    app.conf.update(task_serializer="json", accept_content=["json"])
    jobs = [claim("a", ORDINARY), claim("poison-3", TOO_DEEP), claim("b", ORDINARY)]
    with pytest.raises(UnsendableJobError) as raised:
        RedisPublisher(app).dispatch_many(jobs)
    assert raised.value.job_id == "poison-3" and "do not decode" in raised.value.reason
