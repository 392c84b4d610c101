"""Shards (``shards`` = 8) with three ``SchedulerService``s on one prefix, as three processes
would run them (each opens its own storage): every job is released exactly once, the live
services split the shards between them (disjoint, covering, fair), and a service that stops
hands its shards to the others, which give a share back when it returns. On every adapter."""

from __future__ import annotations

import json
import logging
import os
import signal
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import storage_adapters
from devtools.processes import ChildProcess
from devtools.scheduler_process import run_command
from devtools.waiting import wait_until
from parallel_scheduler import CallableDispatcher, Client, ConfigurationError, JobSpec, Settings
from parallel_scheduler.cli import main
from parallel_scheduler.opening_storage import open_storage
from parallel_scheduler.process.service import SchedulerService
from parallel_scheduler.process.startup import log_start
from storage_adapters import Storage
from tests.conftest import ADAPTERS, storage_url, unique_prefix
from tests.recording_dispatcher import Recorder

SHARDS = 8
#: A heartbeat older than this is not counted when reading the assignment from the records.
FRESH = 1.0
#: The lease of the tests that assert exactly once with graceful hand-overs: a claim outlived by
#: a stall of its process is recovered and may be sent twice, by design (the "may run twice"
#: warning), and a loaded 2-core machine has stalled three services on one SQLite file for
#: longer than the 2 s the take-over test needs.
GRACEFUL_LEASE = 10.0


class Cluster:
    """Scheduler services on one sharded store, and a client and a storage to watch them."""

    def __init__(self, url: str, prefix: str) -> None:
        self.settings = Settings(
            storage_url=url,
            prefix=prefix,
            shards=SHARDS,
            lock_lease=2,
            heartbeat_interval=0.2,
            poll_interval=0.05,
            max_degree_of_parallelism=4,
        )
        self.client = Client(settings=self.settings)
        self.client.setup()
        self.storage: Storage = self.client.storage
        self.sent = Recorder()
        self.services: dict[str, SchedulerService] = {}

    def start(self, owner: str, **overrides: Any) -> SchedulerService:
        settings = replace(self.settings, **overrides)
        storage = open_storage(settings)
        service = SchedulerService.build(
            storage, CallableDispatcher(self.sent), settings, owner=owner, owns_storage=True
        )
        service.start()
        self.services[owner] = service
        return service

    def stop(self, owner: str) -> None:
        self.services.pop(owner).close()

    def close(self) -> None:
        for owner in list(self.services):
            self.stop(owner)
        self.client.close()

    def due_jobs(self, count: int, tag: str) -> set[str]:
        specs = [JobSpec("tasks.add", args=[i, i], id=f"{tag}-{i}") for i in range(count)]
        return {result.job_id for result in self.client.schedule_many(specs)}

    def assignment(self) -> dict[str, list[int]]:
        """The shards each live service says it serves, from the instance records."""
        now = self.storage.now()
        return {
            record.id: json.loads(record.details)["shards"]
            for record in self.storage.list_instances()
            if now - record.heartbeat_at <= FRESH
        }

    def settled(self, others: int = 0) -> dict[str, list[int]] | None:
        """The assignment once exactly the running services (and ``others``: processes of
        their own) serve the shards, disjoint, covering and fair (2 or 3 of 8 each among 3);
        ``None`` until then."""
        got = self.assignment()
        if not set(self.services) <= set(got) or len(got) != len(self.services) + others:
            return None
        every = sorted(shard for shards in got.values() for shard in shards)
        if every != list(range(SHARDS)):
            return None
        low, high = SHARDS // len(got), -(-SHARDS // len(got))
        assert all(low <= len(shards) <= high for shards in got.values()), got
        return got


#: For what is the service's own code, the same on every backend (how it reads the storage's
#: shard count, its records and its start-up line): one backend proves it. What differs per backend
#: under it (the stored shard count, refusing another) is in tests/storage/test_sharding.py on
#: each; the release and hand-over tests here run on every backend, the SIGSTOP take-over on the
#: ones it concerns.
SHARED_CODE = pytest.mark.parametrize("adapter_kind", ["sqlite"])


@pytest.fixture
def cluster(adapter_kind: str, tmp_path: Path) -> Iterator[Cluster]:
    url = storage_url(adapter_kind, tmp_path)
    prefix = unique_prefix()
    made = Cluster(url, prefix)
    try:
        yield made
    finally:
        made.close()
        cleaner = storage_adapters.from_url(url, prefix=prefix, shards=SHARDS)
        cleaner.drop()
        cleaner.close()


def test_three_services_release_every_job_once_and_split_the_shards(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given 2,000 jobs due at once and three recurring jobs firing every second
    due = cluster.due_jobs(2000, "due")
    for name in ("tick-a", "tick-b", "tick-c"):
        cluster.client.recurring.save(name, "tasks.tick", "* * * * * *", misfire_policy="skip")
    # When three services run on the store
    for owner in ("svc-a", "svc-b", "svc-c"):
        cluster.start(
            owner, metrics_port=0 if owner == "svc-a" else None, lock_lease=GRACEFUL_LEASE
        )
    # Then every due job is released, and every recurring job's firings are
    wait_until(lambda: cluster.sent.has(due), timeout=8, interval=0.05)

    def fired_each() -> bool:
        ticks = {job_id.split("@")[0] for job_id in cluster.sent.released() if "@" in job_id}
        return ticks == {"tick-a", "tick-b", "tick-c"}

    wait_until(fired_each, timeout=5, interval=0.05)
    # and the services split the shards between them, as their records and status say
    settled = wait_until(cluster.settled, timeout=5, interval=0.05)
    for owner, service in cluster.services.items():
        assert sorted(service.served_shards()) == settled[owner]
        assert service.delayed_shards[3].lock_label == "delayed-scheduler#3"
    # and svc-a's lock gauges are per shard: a series for each shard whose lock it tried, and
    # none held among the shards it gave away (it served them all until the others started)
    metrics = cluster.services["svc-a"].metrics
    assert metrics is not None

    def gauge(shard: int) -> float | None:
        labels = {"lock": "delayed-scheduler", "shard": str(shard)}
        return metrics.registry.get_sample_value("parallel_scheduler_lock_held", labels)

    assert any(gauge(shard) is not None for shard in settled["svc-a"])
    given_away = set(range(SHARDS)) - set(settled["svc-a"])
    wait_until(lambda: all(gauge(shard) in (None, 0.0) for shard in given_away), timeout=2)

    def every_shard_shown_once() -> list[int] | None:
        """``status --json``'s shards, once every scheduler's last heartbeat (which carries its
        shards) was written after the split: a heartbeat written just before it still names a
        shard its writer has since given away."""
        code = main(
            [
                "--storage-url",
                str(cluster.settings.storage_url),
                "--prefix",
                cluster.settings.prefix,
                "--shards",
                str(SHARDS),
                "status",
                "--json",
            ]
        )
        out, _ = capsys.readouterr()
        assert code == 0
        shown = [s for view in json.loads(out)["schedulers"] for s in view["shards"]]
        return sorted(shown) if sorted(shown) == list(range(SHARDS)) else None

    # within a few heartbeats (0.2 s each), status shows each shard exactly once
    assert wait_until(every_shard_shown_once, timeout=3, interval=0.1) == list(range(SHARDS))
    # and once they stop, no job was released twice
    cluster.close()
    released = cluster.sent.released()
    assert due <= released.keys()
    assert released.most_common(1)[0][1] == 1, released.most_common(3)


def test_a_stopped_service_s_shards_are_taken_over_and_a_share_given_back(
    cluster: Cluster,
) -> None:
    # Given three services that have split the shards
    for owner in ("svc-a", "svc-b", "svc-c"):
        cluster.start(owner, lock_lease=GRACEFUL_LEASE)
    before = wait_until(cluster.settled, timeout=5, interval=0.05)
    # When one stops gracefully
    cluster.stop("svc-c")
    # Then the other two cover its shards, 4 each, within a couple of heartbeats
    after = wait_until(cluster.settled, timeout=3, interval=0.05)
    assert sorted(len(shards) for shards in after.values()) == [4, 4]
    for owner in ("svc-a", "svc-b"):  # they kept what they had: only svc-c's shards moved
        assert set(before[owner]) <= set(after[owner])
    # and jobs in every shard are released meanwhile
    first = cluster.due_jobs(200, "while-two")
    wait_until(lambda: cluster.sent.has(first), timeout=5, interval=0.05)
    # When it starts again
    cluster.start("svc-c", lock_lease=GRACEFUL_LEASE)
    # Then it gets a share back and the three split the shards again
    again = wait_until(cluster.settled, timeout=3, interval=0.05)
    assert len(again["svc-c"]) >= SHARDS // 3
    second = cluster.due_jobs(200, "three-again")
    wait_until(lambda: cluster.sent.has(second), timeout=5, interval=0.05)
    cluster.close()
    released = cluster.sent.released()
    assert released.most_common(1)[0][1] == 1, released.most_common(3)


@SHARED_CODE
def test_without_shards_the_record_says_shard_0_and_locks_keep_their_names(
    adapter_kind: str, tmp_path: Path
) -> None:
    storage = storage_adapters.from_url(storage_url(adapter_kind, tmp_path), prefix=unique_prefix())
    storage.setup()
    service = SchedulerService.build(storage, CallableDispatcher(Recorder()), Settings())
    try:
        assert service.assignment is None and service.served_shards() == {0}
        assert service.delayed_shards == [service.delayed]
        assert service.delayed.lock_label == "delayed-scheduler"
        assert json.loads(service.heartbeat.details())["shards"] == [0]
    finally:
        service.close()
        storage.drop()
        storage.close()


@SHARED_CODE
def test_a_service_follows_its_storage_s_shard_count_and_refuses_another(
    cluster: Cluster,
) -> None:
    dispatcher = CallableDispatcher(cluster.sent)
    # Given settings left at one shard, the service runs as many shards as its storage has
    service = SchedulerService.build(cluster.storage, dispatcher, Settings())
    try:
        assert service.settings.shards == SHARDS
        assert len(service.delayed_shards) == len(service.recurring_shards) == SHARDS
        assert [s.lock_label for s in service.recurring_shards[:2]] == [
            "recurring-scheduler#0",
            "recurring-scheduler#1",
        ]
    finally:
        service.close()
    # and settings naming another count are refused with both counts named
    with pytest.raises(ConfigurationError, match=r"has 8 shard.*shards=3"):
        SchedulerService.build(cluster.storage, dispatcher, Settings(shards=3))


# Not SQLite: a process stopped while it holds SQLite's one write lock stops every writer on the
# file (the others' heartbeats included) until it resumes; SQLite has one writer at a time, so a
# stall there is not a shard's problem (README: Scale-out, Limits).
@pytest.mark.parametrize("adapter_kind", [k for k in ADAPTERS if k != "sqlite"])
def test_a_stopped_process_s_shards_are_taken_over_and_it_rejoins_when_it_resumes(
    cluster: Cluster, tmp_path: Path
) -> None:
    # Given a real scheduler process and two services, which have split the shards
    env = {
        **os.environ,
        "PARALLEL_SCHEDULER_STORAGE_URL": str(cluster.settings.storage_url),
        "PARALLEL_SCHEDULER_PREFIX": cluster.settings.prefix,
        "PARALLEL_SCHEDULER_SHARDS": str(SHARDS),
        "PARALLEL_SCHEDULER_LOCK_LEASE": "2",
        "PARALLEL_SCHEDULER_HEARTBEAT_INTERVAL": "0.2",
        "PARALLEL_SCHEDULER_POLL_INTERVAL": "0.05",
    }
    process = ChildProcess(tmp_path, "process", run_command(broker_url="memory://"), env).process
    try:
        for owner in ("svc-a", "svc-b"):
            cluster.start(owner)
        wait_until(lambda: cluster.settled(others=1), timeout=8, interval=0.05)
        # When the process is stopped (SIGSTOP: no graceful hand-over, its record stays)
        os.kill(process.pid, signal.SIGSTOP)
        stopped_at = cluster.storage.now()
        # Then the two services cover every shard once its heartbeat is older than the
        # threshold (1 s: max(lease / 2, 2 heartbeats)), at their next heartbeat
        a, b = cluster.services["svc-a"], cluster.services["svc-b"]
        wait_until(lambda: a.served_shards() | b.served_shards() == set(range(SHARDS)), 5)
        assert cluster.storage.now() - stopped_at >= 1.0 - 0.3  # not before it counted as dead
        assert not a.served_shards() & b.served_shards()
        # and release jobs of every shard (its locks ran out: a lease, 2 s)
        due = cluster.due_jobs(100, "while-stopped")
        wait_until(lambda: cluster.sent.has(due), timeout=5, interval=0.05)
        # When it resumes, it is live again at its next heartbeat and gets its share back
        os.kill(process.pid, signal.SIGCONT)
        back = wait_until(lambda: cluster.settled(others=1), timeout=5, interval=0.05)
        (theirs,) = (shards for owner, shards in back.items() if owner not in cluster.services)
        assert len(theirs) >= SHARDS // 3
        assert cluster.sent.released().most_common(1)[0][1] == 1
    finally:
        os.kill(process.pid, signal.SIGCONT)
        process.terminate()
        process.wait(timeout=30)


@SHARED_CODE
def test_the_start_up_line_says_the_shards(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    service = SchedulerService.build(
        cluster.storage, CallableDispatcher(cluster.sent), cluster.settings
    )
    try:
        with caplog.at_level(logging.INFO, logger="parallel_scheduler.process.startup"):
            log_start(service)
    finally:
        service.close()
    (line,) = [r for r in caplog.records if r.name == "parallel_scheduler.process.startup"]
    assert line.getMessage().endswith(
        f", shards {SHARDS}: serving this process's share among the live schedulers"
    )
    assert line.event["shards"] == SHARDS  # type: ignore[attr-defined]
