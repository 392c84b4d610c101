"""A worker started with ``--parallel-scheduler`` logs one start-up line: version, instance id
(its lock owner), storage with the password masked, settings, and the publisher the broker gave
the scheduler. With ``log_format`` json that line
and the scheduler's others are JSON objects, while Celery's own lines keep Celery's format."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import pytest

import storage_adapters
from devtools.waiting import wait_until
from tests.celery_integration.celery_cluster import Cluster
from tests.cli.test_operator_output import START, with_password
from tests.conftest import POSTGRESQL_URL, require_server

pytestmark = [pytest.mark.celery, pytest.mark.redis, pytest.mark.postgresql]


def _worker_log(cluster: Cluster) -> Path:
    return next(cluster.tmp_path.glob("w0-*.log"))


@pytest.mark.parametrize("log_format", ["plain", "json"])
def test_the_worker_bootstep_logs_one_start_line(redis_cluster: Cluster, log_format: str) -> None:
    require_server("postgresql")
    url, password = with_password(POSTGRESQL_URL)
    redis_cluster.env["PARALLEL_SCHEDULER_STORAGE_URL"] = url
    redis_cluster.env["PARALLEL_SCHEDULER_LOG_FORMAT"] = log_format
    del redis_cluster.env["PARALLEL_SCHEDULER_FAST_PUBLISH"]  # the defaults: batch, fast publish
    storage = storage_adapters.from_url(url, prefix=redis_cluster.prefix)
    storage.setup()
    # Given a worker running the scheduler on a store whose URL has a password
    worker = redis_cluster.start_worker("--parallel-scheduler")
    try:
        # When it has started and its scheduler has registered
        wait_until(lambda: any(r.pid == worker.pid for r in storage.list_instances()), 60)
        log = _worker_log(redis_cluster)
        wait_until(lambda: "ready." in log.read_text(), 30)  # Celery's own line
        text = log.read_text()
        # Then its log has the start-up line once, the password masked
        assert password not in text
        if log_format == "json":
            ours = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
            starts = [line for line in ours if START.match(line["message"])]
            assert len(starts) == 1, text
            (start,) = starts
            assert start["instance"].endswith(f":{worker.pid}")
            assert start["storage"] == storage_adapters.mask_url(url)
            assert start["settings"]["prefix"] == redis_cluster.prefix
            # and which publish path the Redis broker gives the default fast_publish
            assert start["settings"]["fast_publish"] is True
            assert start["settings"]["release_mode"] == "batch"
            assert start["publish"] == "RedisPublisher, one round trip per chunk"
            # and Celery's own lines keep Celery's format
            assert re.search(r"^\[.*\] .*ready\.$", text, re.MULTILINE), text
        else:
            starts = [m for line in text.splitlines() if (m := START.search(line))]
            assert len(starts) == 1, text
            instance, shown, settings = starts[0].groups()
            assert instance.endswith(f":{worker.pid}")  # its lock owner, as `status` lists it
            assert shown == storage_adapters.mask_url(url)
            assert f"prefix={redis_cluster.prefix}" in settings
            assert "release_mode=batch" in settings and "fast_publish=True" in settings
            assert settings.endswith(", publish RedisPublisher, one round trip per chunk")
    finally:
        worker.send_signal(signal.SIGTERM)  # the worker first, then its store
        worker.wait(timeout=60)
        storage.drop()
        storage.close()
