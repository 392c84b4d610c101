"""Every page renders what storage holds: counts, the release chart, instances, the job list
with its filters and keyset paging, one job's detail, recurring jobs, expired jobs and errors."""

from __future__ import annotations

import json
import re
import sys

import pytest
from flask.testing import FlaskClient
from werkzeug.middleware.dispatcher import DispatcherMiddleware
from werkzeug.test import Client as WsgiClient

from parallel_scheduler import Client
from parallel_scheduler.dashboard import create_app
from storage_adapters import InstanceRecord, JobState, MissingExtraError

NEXT = re.compile(r'id="next-page" href="([^"]+)"')
ROW = re.compile(r'class="job-row" data-job-id="([^"]+)"')


def text(response: object) -> str:
    return response.get_data(as_text=True)  # type: ignore[attr-defined,no-any-return]


def test_every_page_renders_with_an_empty_store(web: FlaskClient) -> None:
    for url in ("/", "/jobs", "/jobs?state=any", "/recurring", "/errors", "/pauses"):
        page = web.get(url)
        assert page.status_code == 200, (url, page.data[:500])
        assert page.mimetype == "text/html"


def test_script_in_job_arguments_renders_as_text(web: FlaskClient, client: Client) -> None:
    evil = "<script>alert('x')</script>"
    client.schedule("t.evil", [evil], {"k": evil}, countdown=60, job_id="evil-1", queue="q")
    for url in ("/jobs/detail?id=evil-1", "/jobs"):
        body = text(web.get(url))
        assert "<script>" not in body
    assert "&lt;script&gt;" in text(web.get("/jobs/detail?id=evil-1"))


def test_job_detail_shows_the_call_and_the_due_time_in_the_viewers_zone(
    web: FlaskClient, client: Client
) -> None:
    eta = 1_900_000_000.0  # 2030-03-17T17:46:40Z
    client.schedule("t.add", [1, 2], {"x": "y"}, eta=eta, job_id="j-1", queue="fast")
    body = text(web.get("/jobs/detail?id=j-1&tz=Asia/Tokyo"))
    assert 'id="job-task">t.add<' in body
    assert "2030-03-17T17:46:40+00:00" in body
    assert "2030-03-18T02:46:40+09:00" in body  # Tokyo, chosen with ?tz=
    assert '"queue": &#34;fast&#34;' in body or "&#34;queue&#34;: &#34;fast&#34;" in body
    assert 'id="job-celery-id"><code>j-1</code>' in body
    # the zone is remembered for the session
    assert "2030-03-18T02:46:40+09:00" in text(web.get("/jobs/detail?id=j-1"))
    missing = web.get("/jobs/detail?id=nope")
    assert missing.status_code == 404 and "no job with id" in text(missing)


def test_search_by_id_opens_the_detail_page(web: FlaskClient, client: Client) -> None:
    client.schedule("t.a", countdown=60, job_id="find-me")
    found = web.get("/jobs?id=find-me")
    assert found.status_code == 302 and found.headers["Location"].endswith(
        "/jobs/detail?id=find-me"
    )


def _ids(web: FlaskClient, url: str) -> list[str]:
    """Every job id reached by following the "next page" links from ``url``."""
    seen: list[str] = []
    for _ in range(100):
        body = text(web.get(url))
        seen.extend(ROW.findall(body))
        link = NEXT.search(body)
        if link is None:
            return seen
        url = link.group(1).replace("&amp;", "&")
    raise AssertionError("paging did not end")


def test_keyset_paging_visits_every_job_once_in_due_order(web: FlaskClient, client: Client) -> None:
    base = 1_900_000_000.0
    for i in range(23):  # three jobs share each due time: ties are ordered by id
        client.schedule("t.p", eta=base + i // 3, job_id=f"p-{i:02d}")
    ids = _ids(web, "/jobs?limit=5")
    assert sorted(ids) == [f"p-{i:02d}" for i in range(23)] and len(ids) == 23
    assert ids == sorted(ids)  # ids were numbered in due order


def test_filters_by_task_queue_state_and_due_range(web: FlaskClient, client: Client) -> None:
    base = 1_900_000_000.0
    for i in range(12):
        client.schedule(
            "t.even" if i % 2 == 0 else "t.odd",
            eta=base + 60 * i,
            job_id=f"f-{i:02d}",
            queue="q-a" if i % 3 == 0 else "q-b",
        )
    client.cancel("f-00")
    assert _ids(web, "/jobs?task=t.even") == ["f-02", "f-04", "f-06", "f-08", "f-10"]
    assert _ids(web, "/jobs?queue=q-a&limit=2") == ["f-03", "f-06", "f-09"]
    assert _ids(web, "/jobs?state=cancelled") == ["f-00"]
    assert len(_ids(web, "/jobs?state=any")) == 12
    # 2030-03-17T17:48:40 .. 17:50:40 UTC, given in UTC+1 as a datetime-local value
    ranged = "/jobs?due_from=2030-03-17T18:48:40&due_to=2030-03-17T18:50:40&tz=Europe/Paris"
    assert _ids(web, ranged) == ["f-02", "f-03", "f-04"]
    assert "not indexed" in text(web.get("/jobs?queue=q-a"))


def test_overview_shows_counts_due_now_lag_chart_and_instances(
    web: FlaskClient, client: Client
) -> None:
    storage = client.storage
    now = storage.now()
    client.schedule("t.due", eta=now - 30, job_id="due-1")
    client.schedule("t.due", eta=now - 10, job_id="due-2")
    client.schedule("t.later", countdown=3600, job_id="later")
    client.schedule("t.gone", eta=now - 5, job_id="gone")
    lock = storage.acquire_lock("dash-test", "tester", 30)
    assert lock is not None
    claimed = storage.claim("gone", lock, 30)
    assert claimed is not None
    assert storage.mark_enqueued([claimed]) == ["gone"]
    # its details claim a lock; the page shows the one storage says it holds
    details = {"locks": ["parallel_scheduler.delayed"], "last_pass": {}, "settings": {}}
    storage.register_instance(
        InstanceRecord("sched-1", "host-a", 4242, "0.1.0", now, now, json.dumps(details))
    )
    assert storage.acquire_lock("delayed-scheduler", "sched-1", 30) is not None
    body = text(web.get("/"))
    assert 'id="count-scheduled"' in body and ">3</td>" in body
    assert 'id="due-now">2<' in body
    lag = re.search(r'id="lag">([0-9.]+) s<', body)
    assert lag is not None and 29 <= float(lag.group(1)) <= 120
    bars = re.findall(r'class="bar" data-start="[^"]+" data-count="(\d+)"', body)
    assert len(bars) == 15 and sum(map(int, bars)) == 1
    assert 'data-instance-id="sched-1"' in body and "alive" in body
    assert '<td class="instance-locks">delayed-scheduler</td>' in body
    assert '<td class="instance-active">delayed</td>' in body
    assert "parallel_scheduler.delayed" not in body


def test_recurring_and_errors_pages(web: FlaskClient, client: Client) -> None:
    client.recurring.save("nightly", "t.report", "0 2 * * *", timezone="Europe/Paris")
    client.recurring.save("often", "t.tick", every=90)
    client.recurring.pause("often")
    body = text(web.get("/recurring"))
    assert 'data-recurring-id="nightly"' in body and "Europe/Paris" in body
    assert "every 90 s" in body and "paused" in body
    edit = web.get("/recurring/edit?id=nightly")
    assert edit.status_code == 200 and 'value="0 2 * * *"' in text(edit)
    assert web.get("/recurring/edit?id=nope").status_code == 400
    storage = client.storage
    client.schedule("t.x", eta=storage.now() - 1, job_id="will-expire")
    client.schedule("t.y", eta=storage.now() - 1, job_id="will-fail")
    lock = storage.acquire_lock("dash-test", "tester", 30)
    assert lock is not None
    expiring, failing = storage.claim("will-expire", lock, 30), storage.claim("will-fail", lock, 30)
    assert expiring is not None and failing is not None
    storage.expire([expiring], "expired before release")
    storage.unclaim([failing], "broker down: connection refused")
    errors = text(web.get("/errors"))
    assert 'data-job-id="will-expire"' in errors
    assert 'data-job-id="will-fail"' in errors and "broker down: connection refused" in errors
    assert client.get("will-fail").state is JobState.SCHEDULED  # type: ignore[union-attr]


def test_mounted_under_a_prefix_every_link_stays_under_it(client: Client) -> None:
    def elsewhere(environ: object, start_response: object) -> list[bytes]:
        raise AssertionError("the host app should not be reached")

    host = DispatcherMiddleware(elsewhere, {"/scheduler": create_app(client)})  # type: ignore[arg-type]
    web = WsgiClient(host)
    page = web.get("/scheduler/jobs")
    assert page.status_code == 200
    links = re.findall(r'(?:href|action)="([^"]+)"', page.get_data(as_text=True))
    assert links and all(link.startswith("/scheduler/") for link in links), links


def test_create_app_opens_its_own_client_from_settings(tmp_path: object) -> None:
    url = f"sqlite:///{tmp_path}/own.db"
    app = create_app(storage_url=url)
    assert app.test_client().get("/jobs").status_code == 200
    with Client(storage_url=url) as client:
        try:
            create_app(client, storage_url=url)
        except ValueError as exc:
            assert "either a client or settings" in str(exc)
        else:
            raise AssertionError("a client and settings together were accepted")


def test_without_flask_the_error_names_the_dashboard_extra(
    monkeypatch: pytest.MonkeyPatch, client: Client
) -> None:
    monkeypatch.setitem(sys.modules, "flask", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'parallel-scheduler\[dashboard\]'"):
        create_app(client)
