"""The dashboard's red banner (on every page) when the scheduling is unhealthy, the "dead" badge
of a dead instance on the overview, and ``/metrics`` behind the dashboard's auth."""

from __future__ import annotations

import base64
import json
import re
import time

from flask.testing import FlaskClient

from devtools.waiting import wait_until
from parallel_scheduler import Client, Settings
from parallel_scheduler.dashboard import create_app, parse_basic_auth
from storage_adapters import InstanceRecord, Storage
from tests.conftest import SLOW_MACHINE_FACTOR

PAGES = ("/", "/jobs", "/recurring", "/errors")
BANNER = re.compile(r'<div id="health-banner".*?</div>', re.S)
WAIT = 30 * SLOW_MACHINE_FACTOR


def web(storage: Storage, **settings: float) -> FlaskClient:
    """A fresh app (a fresh health cache) over ``storage``, with ``settings``."""
    app = create_app(Client(storage, Settings(**settings), retry_for=1.0))  # type: ignore[arg-type]
    app.testing = True
    return app.test_client()


def banner(web: FlaskClient, url: str = "/") -> list[str]:
    page = web.get(url)
    assert page.status_code == 200, page.data
    found = BANNER.search(page.get_data(as_text=True))
    if found is None:
        return []
    return re.findall(r'<li class="health-problem">(.*?)</li>', found.group(0))


def register_dead(storage: Storage, instance_id: str) -> None:
    """A liveness record that beat every 0.05 s with a 0.2 s lease: dead 0.15 s after now."""
    details = {"settings": {"heartbeat_interval": 0.05, "lock_lease": 0.2}}
    storage.register_instance(
        InstanceRecord(instance_id, "host-d", 4242, "0.0", time.time(), 0.0, json.dumps(details))
    )


def register_alive(storage: Storage, instance_id: str) -> None:
    details = {"settings": {"heartbeat_interval": 3600}}
    storage.register_instance(
        InstanceRecord(instance_id, "host-a", 4343, "0.0", time.time(), 0.0, json.dumps(details))
    )


def test_a_healthy_store_shows_no_banner(storage: Storage) -> None:
    Client(storage).schedule("t.later", countdown=3600)
    board = web(storage)
    for url in PAGES:
        assert banner(board, url) == [], url


def test_no_live_scheduler_while_jobs_are_due_is_on_every_page(storage: Storage) -> None:
    Client(storage).schedule("t.due", eta=storage.now() - 5)
    board = web(storage)
    for url in PAGES:
        (problem,) = banner(board, url)
        assert problem.startswith("no live scheduler while jobs are due (lag "), url


def test_lag_above_the_setting(storage: Storage) -> None:
    register_alive(storage, "alive-1")
    Client(storage).schedule("t.late", eta=storage.now() - 30)
    assert banner(web(storage)) == []  # 30 s is within the default minute
    (problem,) = banner(web(storage, lag_alert=10))
    assert re.fullmatch(r"lag \d+ s is above 10 s: the earliest due job is waiting", problem)


def test_a_dead_instance_holding_a_lock_is_on_the_banner_and_badged_dead(
    storage: Storage,
) -> None:
    register_alive(storage, "alive-1")
    register_dead(storage, "zombie-1")
    assert storage.acquire_lock("delayed-scheduler", "zombie-1", 300) is not None
    problems = wait_until(lambda: banner(web(storage)), WAIT, interval=0.1)
    assert len(problems) == 1
    assert problems[0].startswith("lock delayed-scheduler is held by dead instance zombie-1 ")
    page = web(storage).get("/").get_data(as_text=True)
    dead_row = re.search(
        r'<tr class="instance dead" data-instance-id="zombie-1">.*?</tr>', page, re.S
    )
    assert dead_row is not None
    assert '<span class="badge dead-badge">dead</span>' in dead_row.group(0)
    alive_row = re.search(
        r'<tr class="instance alive" data-instance-id="alive-1">.*?</tr>', page, re.S
    )
    assert alive_row is not None and 'class="instance-state">alive</td>' in alive_row.group(0)


def test_metrics_are_served_behind_the_dashboards_auth(storage: Storage) -> None:
    Client(storage).schedule("t.due", eta=storage.now() - 5, queue="emails")
    app = create_app(
        Client(storage, retry_for=1.0), auth=parse_basic_auth("ops:s3cret"), read_only=True
    )
    app.testing = True
    board = app.test_client()
    assert board.get("/metrics").status_code == 401
    credentials = base64.b64encode(b"ops:s3cret").decode()
    answer = board.get("/metrics", headers={"Authorization": f"Basic {credentials}"})
    assert answer.status_code == 200
    assert answer.content_type.startswith("text/plain")
    text = answer.get_data(as_text=True)
    for line in (
        "parallel_scheduler_storage_up 1.0",
        'parallel_scheduler_jobs{state="scheduled"} 1.0',
        "parallel_scheduler_due_jobs 1.0",
        'parallel_scheduler_due_jobs_by_queue{queue="emails"} 1.0',
        'parallel_scheduler_schedulers{state="alive"} 0.0',
        "parallel_scheduler_healthy 0.0",
        'parallel_scheduler_health_problems{kind="no_live_scheduler"} 1.0',
    ):
        assert line in text.splitlines(), line
    assert "parallel_scheduler_build_info{version=" in text
    assert "_created" not in text
