"""Which scheduler instance ``status`` and the dashboard name active, against real processes on
real storage: the one that holds, or last held, a lock and released under it, never one that only
peeks; a killed holder lists no lock once its lease ran out; with shards, each shard's lock is
attributed to its own holder; and records written in the earlier shape still read.
"""

from __future__ import annotations

import itertools
import json
import re
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from devtools.waiting import wait_until
from parallel_scheduler import Client, JobSpec, Settings
from parallel_scheduler.cli import main, status_report
from parallel_scheduler.dashboard import create_app
from storage_adapters import InstanceRecord, JobState, Storage, shard_of
from tests.conftest import ADAPTERS, storage_url, unique_prefix
from tests.faults.harness import ServiceProcess

HEARTBEAT = 0.2
LEASE = 2.0
#: Consecutive ``status`` snapshots that must all name the same active instance.
SNAPSHOTS = 12


@dataclass
class Store:
    url: str
    prefix: str
    shards: int
    client: Client

    @property
    def storage(self) -> Storage:
        return self.client.storage


@pytest.fixture(params=ADAPTERS)
def adapter(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def opened_store(adapter: str, tmp_path: Path, shards: int) -> Iterator[Store]:
    """A store of the test's own with ``shards`` shards, dropped afterwards."""
    url, prefix = storage_url(adapter, tmp_path), unique_prefix()
    settings = Settings(storage_url=url, prefix=prefix, shards=shards)
    client = Client(settings=settings, retry_for=1.0)
    client.setup()
    made = Store(url, prefix, shards, client)
    yield made
    made.storage.drop()
    made.client.close()


@pytest.fixture
def store(adapter: str, tmp_path: Path) -> Iterator[Store]:
    yield from opened_store(adapter, tmp_path, 1)


@pytest.fixture
def sharded_store(adapter: str, tmp_path: Path) -> Iterator[Store]:
    yield from opened_store(adapter, tmp_path, 2)


class Service:
    """A real ``SchedulerService`` process (``tests.faults.harness.ServiceProcess``); its
    instance id, which is also its lock owner, is read from its ready file."""

    def __init__(self, store: Store, tmp_path: Path, name: str, **settings: Any) -> None:
        self.child = ServiceProcess(
            tmp_path, name, store.url, store.prefix, store.shards,
            heartbeat_interval=HEARTBEAT, lock_lease=LEASE, **settings,
        )  # fmt: skip
        self.id = ""

    def wait_ready(self) -> str:
        self.id = str(self.child.wait_ready()["owner"])
        return self.id


@pytest.fixture
def services() -> Iterator[list[Service]]:
    started: list[Service] = []
    yield started
    for service in started:
        service.child.end(grace=10)


def start(services: list[Service], service: Service) -> Service:
    services.append(service)
    service.wait_ready()
    return service


def status(store: Store, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    args = ["--log-level", "WARNING", "--storage-url", store.url, "--prefix", store.prefix]
    assert main([*args, "--shards", str(store.shards), "status", "--json"]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return report


def views(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {view["id"]: view for view in report["schedulers"]}


def actives(report: dict[str, Any]) -> dict[str, list[str]]:
    return {view["id"]: view["active_for"] for view in report["schedulers"]}


def dashboard_rows(web: FlaskClient) -> dict[str, tuple[str, str]]:
    """Each instance row of the Overview page: its "Locks held" and "Active for" cells."""
    body = web.get("/").get_data(as_text=True)
    rows = re.findall(
        r'data-instance-id="([^"]+)">.*?<td class="instance-locks">([^<]*)</td>\s*'
        r'<td class="instance-active">([^<]*)</td>',
        body,
        re.DOTALL,
    )
    return {instance: (locks, active) for instance, locks, active in rows}


def schedule_due(store: Store, ids: list[str]) -> None:
    store.client.schedule_many([JobSpec("tasks.add", args=[1, 2], id=job_id) for job_id in ids])


def released(store: Store, ids: list[str]) -> bool:
    jobs = [store.client.get(job_id) for job_id in ids]
    return all(job is not None and job.state is JobState.ENQUEUED for job in jobs)


def test_only_the_instance_that_released_under_the_lock_is_active(
    store: Store, tmp_path: Path, services: list[Service], capsys: pytest.CaptureFixture[str]
) -> None:
    # Given one scheduler that released jobs under the delayed lock, alone on the store
    holder = start(services, Service(store, tmp_path, "holder", poll_interval=1.0))
    ids = [f"due-{i}" for i in range(3)]
    schedule_due(store, ids)
    wait_until(lambda: released(store, ids), timeout=30, interval=0.05)
    # When a second one joins that only peeks (nothing is due any more), and peeks far more
    # often than the first
    peeker = start(services, Service(store, tmp_path, "peeker", poll_interval=0.05))

    def both_alive_and_one_active() -> bool:
        shown = views(status(store, capsys))
        alive = {holder.id, peeker.id} <= {i for i, view in shown.items() if view["alive"]}
        return alive and any("delayed" in view["active_for"] for view in shown.values())

    wait_until(both_alive_and_one_active, timeout=60, interval=0.05)
    web = create_app(store.client).test_client()
    # Then every status snapshot, and every dashboard Overview, names the holder active for
    # the delayed lock and the peeker for nothing (neither ever held the recurring lock)
    for _ in range(SNAPSHOTS):
        report = status(store, capsys)
        assert actives(report) == {holder.id: ["delayed"], peeker.id: []}, report
        assert report["lock_holder"] is None  # between passes: the lock is free
        rows = dashboard_rows(web)
        assert rows == {holder.id: ("-", "delayed"), peeker.id: ("-", "-")}, rows


def test_a_killed_holder_lists_no_lock_once_its_lease_ran_out(
    store: Store, tmp_path: Path, services: list[Service], capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a scheduler in the middle of a long pass (each hand-off takes 0.5 s), whose
    # heartbeat record says it holds the delayed lock
    options = {"dispatch_delay": 0.5, "parallelism": 1, "release_mode": "per_job"}
    holder = start(services, Service(store, tmp_path, "holder", poll_interval=0.1, **options))
    schedule_due(store, [f"slow-{i}" for i in range(20)])

    def holding_and_recorded() -> bool:
        report = status(store, capsys)
        record = next((r for r in store.storage.list_instances() if r.id == holder.id), None)
        recorded = record is not None and json.loads(record.details)["locks"] != []
        holding = (report["lock_holder"] or {}).get("owner") == holder.id
        return holding and recorded and views(report)[holder.id]["locks"] == ["delayed-scheduler"]

    wait_until(holding_and_recorded, timeout=60, interval=0.05)
    # When it is killed outright
    holder.child.send(signal.SIGKILL)
    holder.child.wait(timeout=10)

    # Then once its lease has run out (and its heartbeat is old), status shows it dead with no
    # lock and active for nothing, and the dashboard says the same
    def dead_and_lock_free() -> dict[str, Any] | None:
        report = status(store, capsys)
        view = views(report)[holder.id]
        return report if report["lock_holder"] is None and not view["alive"] else None

    report = wait_until(dead_and_lock_free, timeout=30, interval=0.05)
    view = views(report)[holder.id]
    assert (view["locks"], view["active_for"]) == ([], []), view
    web = create_app(store.client).test_client()
    assert dashboard_rows(web) == {holder.id: ("-", "-")}
    assert "Delayed lock: free" in web.get("/").get_data(as_text=True)


def ids_in_shard(shard: int, shards: int, count: int) -> list[str]:
    candidates = (f"job-{i}" for i in itertools.count())
    return list(itertools.islice((i for i in candidates if shard_of(i, shards) == shard), count))


def test_with_shards_each_shard_lock_is_attributed_to_its_holder(
    sharded_store: Store,
    tmp_path: Path,
    services: list[Service],
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = sharded_store
    # Given two schedulers that split two shards between them
    first = start(services, Service(store, tmp_path, "first", poll_interval=0.1))
    second = start(services, Service(store, tmp_path, "second", poll_interval=0.1))

    def split() -> dict[str, int] | None:
        shown = views(status(store, capsys))
        served = {i: view["shards"] for i, view in shown.items() if view["alive"]}
        if set(served) != {first.id, second.id} or sorted(map(len, served.values())) != [1, 1]:
            return None
        shards = {i: s[0] for i, s in served.items()}
        return shards if sorted(shards.values()) == [0, 1] else None

    shard_of_instance = wait_until(split, timeout=60, interval=0.05)
    # When each releases jobs of its own shard
    ids = ids_in_shard(0, 2, 2) + ids_in_shard(1, 2, 2)
    schedule_due(store, ids)
    wait_until(lambda: released(store, ids), timeout=30, interval=0.05)
    expected = {i: [f"delayed#{shard}"] for i, shard in shard_of_instance.items()}
    wait_until(lambda: actives(status(store, capsys)) == expected, timeout=30, interval=0.05)
    # Then every snapshot names each the active one for its own shard's delayed lock only
    web = create_app(store.client).test_client()
    for _ in range(SNAPSHOTS):
        report = status(store, capsys)
        assert actives(report) == expected, report
        for instance, view in views(report).items():
            assert set(view["locks"]) <= {
                f"{kind}-scheduler#{shard_of_instance[instance]}"
                for kind in ("delayed", "recurring")
            }, view
        rows = dashboard_rows(web)
        assert {i: active for i, (_, active) in rows.items()} == {
            i: active[0] for i, active in expected.items()
        }


def old_record(instance_id: str, details: dict[str, Any]) -> InstanceRecord:
    return InstanceRecord(instance_id, "host-a", 4242, "0.1.0", 1.0, 0.0, json.dumps(details))


def test_records_of_the_earlier_shape_still_read(storage: Storage) -> None:
    # Given records written by the earlier release (no ``last_held``), on this backend: one
    # whose last delayed pass held the lock, one whose later passes only peeked, both claiming
    # in their details a lock that storage says is free; and records whose ``last_held`` is
    # not what this release writes
    now = storage.now()
    locked = {"at": now - 5, "duration_seconds": 0.01, "lock_acquired": True, "idle": False}
    peeked = {"at": now - 1, "duration_seconds": 0.001, "lock_acquired": False, "idle": True}
    storage.register_instance(
        old_record(
            "old-holder",
            {"last_pass": {"delayed": locked}, "locks": ["delayed-scheduler"], "settings": {}},
        )
    )
    storage.register_instance(
        old_record(
            "old-peeker",
            {
                "last_pass": {"delayed": peeked, "recurring": peeked},
                "locks": ["delayed-scheduler", "recurring-scheduler"],
                "settings": {},
            },
        )
    )
    storage.register_instance(old_record("odd-list", {"last_held": ["delayed-scheduler"]}))
    storage.register_instance(old_record("odd-time", {"last_held": {"delayed-scheduler": "x"}}))
    # and the recurring lock held now by the peeker, by storage's word
    assert storage.acquire_lock("recurring-scheduler", "old-peeker", 30) is not None
    # When status reads them
    report = status_report(Client(storage, retry_for=1.0))
    shown = views(report)
    # Then the old holder is active for the delayed lock, the peeker for the recurring one it
    # holds, and each lists only the lock storage says it holds now
    assert actives(report) == {
        "old-holder": ["delayed"],
        "old-peeker": ["recurring"],
        "odd-list": [],
        "odd-time": [],
    }
    assert shown["old-holder"]["locks"] == []
    assert shown["old-peeker"]["locks"] == ["recurring-scheduler"]
    # and the records it cannot make sense of are flagged, not fatal
    assert "last_held" in shown["odd-list"]["problem"]
    assert "last_held" in shown["odd-time"]["problem"]
    assert shown["old-holder"]["problem"] is None
