"""Searching the Jobs page and the API's job list (the operations console): by the start of a job
id, the start of a task name, the text of the last error, with the state, queue and due-range
filters, on every storage kind. The prefixes are served by storage and counted; the error text is
a bounded scan that says so, and whose "Next page" goes on where it stopped, so no match is
silently missed. Every bad value is a 400 naming its field. Also: the banner fragment that
live.js refreshes on every page, the live parts of the Jobs page, and the grouped zone lists."""

from __future__ import annotations

import html
import re
from collections.abc import Callable

import pytest
from flask import Flask
from flask.testing import FlaskClient

from devtools.waiting import wait_until
from parallel_scheduler import Client
from parallel_scheduler.dashboard.inputs import OTHER_ZONES, zone_groups, zone_names, zone_options
from parallel_scheduler.dashboard.pages import jobs as jobs_page
from storage_adapters import JobState
from tests.dashboard.conftest import csrf_token
from tests.dashboard.test_health_banner import WAIT, register_dead

ROW = re.compile(r'class="job-row" data-job-id="([^"]+)"')
NEXT = re.compile(r'id="next-page" href="([^"]+)"')
BASE = 1_900_000_000.0
TOKEN = "search-token-123"


def text(response: object) -> str:
    return response.get_data(as_text=True)  # type: ignore[attr-defined,no-any-return]


def ids(web: FlaskClient, url: str) -> list[str]:
    """Every job id reached by following the "Next page" links from ``url``."""
    seen: list[str] = []
    for _ in range(100):
        page = web.get(url)
        assert page.status_code == 200, text(page)[:500]
        body = text(page)
        seen.extend(ROW.findall(body))
        link = NEXT.search(body)
        if link is None:
            return seen
        url = html.unescape(link.group(1))
    raise AssertionError("paging did not end")


def with_errors(client: Client, errors: dict[str, str]) -> None:
    """The due jobs claimed and put back scheduled, those of ``errors`` with their error."""
    storage = client.storage
    lock = storage.acquire_lock("dash-search", "tester", 30)
    assert lock is not None
    claims = storage.claim_due(1000, lock, 300)
    assert {c.id for c in claims} >= set(errors)
    for claim in claims:
        storage.unclaim([claim], errors.get(claim.id))


def orders_and_invoices(client: Client) -> None:
    """Due jobs (so they can be given errors) with ids, tasks and errors to search."""
    now = client.storage.now()
    jobs = [
        ("order-1", "mail.send", "emails", "SMTPServerDisconnected: 50%_done"),
        ("order-2", "mail.digest", "emails", None),
        ("order-10", "report.build", "reports", "Timeout after 30 s"),
        ("Order-3", "mail.send", "emails", None),
        ("invoice-1", "mail_send", "billing", "timeout: the broker is down"),
        ("invoice-2", "report.build", "billing", None),
        ("o%der", "mail.send", "emails", None),
    ]
    for n, (job_id, task, queue, _) in enumerate(jobs):
        client.schedule(task, eta=now - 100 + n, job_id=job_id, queue=queue)
    with_errors(client, {job_id: error for job_id, _, _, error in jobs if error})


def test_search_by_id_prefix_task_prefix_and_error_text(web: FlaskClient, client: Client) -> None:
    orders_and_invoices(client)
    # the prefixes: case included, no wildcard, counted exactly (few enough)
    assert ids(web, "/jobs?id_prefix=order-") == ["order-1", "order-2", "order-10"]
    assert ids(web, "/jobs?id_prefix=Order") == ["Order-3"]
    assert ids(web, "/jobs?id_prefix=o%25") == ["o%der"]
    assert ids(web, "/jobs?id_prefix=o_") == []
    assert ids(web, "/jobs?task_prefix=mail.") == ["order-1", "order-2", "Order-3", "o%der"]
    assert ids(web, "/jobs?task_prefix=mail_") == ["invoice-1"]
    page = text(web.get("/jobs?id_prefix=order-&task_prefix=mail"))
    assert ROW.findall(page) == ["order-1", "order-2"]
    assert 'data-count="2" data-exact="yes"' in page and "2 jobs match." in page
    assert 'id="scan-note"' not in page
    # the filled-in form shows what was searched, escaped
    assert (
        'id="filter-id-prefix" name="id_prefix" type="search" maxlength="200" value="order-"'
        in page
    )
    # the error text: case included, a bounded scan that says how much it searched
    assert ids(web, "/jobs?error_contains=Timeout") == ["order-10"]
    assert ids(web, "/jobs?error_contains=imeout") == ["order-10", "invoice-1"]
    assert ids(web, "/jobs?error_contains=50%25_") == ["order-1"]
    scanned = text(web.get("/jobs?error_contains=imeout"))
    assert "Matches are not counted" in scanned
    note = re.search(r'<p id="scan-note"[^>]*data-scanned="(\d+)" data-bounded="no">', scanned)
    assert note is not None and note.group(1) == "7"
    assert "searched the next 7 jobs in due order" in scanned
    # with the other filters
    assert ids(web, "/jobs?id_prefix=invoice&error_contains=broker&queue=billing") == ["invoice-1"]
    assert ids(web, "/jobs?task_prefix=report&error=1") == ["order-10"]
    assert ids(web, "/jobs?task=mail.send&id_prefix=o") == ["order-1", "o%der"]
    assert ids(web, "/jobs?state=cancelled&id_prefix=order") == []
    client.cancel("order-2")
    assert ids(web, "/jobs?state=cancelled&id_prefix=order") == ["order-2"]
    assert ids(web, "/jobs?state=any&id_prefix=order-") == ["order-1", "order-2", "order-10"]
    # the links of the page keep the search (page sizes, bulk cancel)
    kept = text(web.get("/jobs?id_prefix=order-&task_prefix=mail&error_contains=x"))
    sizes = [html.unescape(u) for u in re.findall(r'class="page-size" href="([^"]+)"', kept)]
    assert sizes and all("id_prefix=order-" in u and "task_prefix=mail" in u for u in sizes)
    assert all("error_contains=x" in u for u in sizes)
    bulk = re.search(r'id="bulk-cancel-link" href="([^"]+)"', kept)
    assert bulk is not None and "id_prefix=order-" in html.unescape(bulk.group(1))


def test_a_bounded_error_search_says_so_and_next_page_searches_on(
    web: FlaskClient, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given 12 due jobs of which only the last has the error searched for
    now = client.storage.now()
    for n in range(12):
        client.schedule("t.b", eta=now - 100 + n, job_id=f"b-{n:02d}")
    with_errors(client, {"b-11": "ConnectionResetError", "b-02": "other"})
    # When a page may search 5 jobs at most
    monkeypatch.setattr(jobs_page, "SCAN_BOUND", 5)
    first = text(web.get("/jobs?error_contains=Reset"))
    # Then it says it stopped at its bound, shows no match yet, and offers to search on
    assert ROW.findall(first) == []
    assert 'data-scanned="5" data-bounded="yes"' in first
    assert 'id="scan-bounded"' in first and "more jobs may match further on" in first
    assert "refine the filters" in first
    # And following "Next page" finds the match: nothing is silently missed
    assert ids(web, "/jobs?error_contains=Reset") == ["b-11"]
    # The API's list (its own bound: 2,000 rows a page) says what it searched
    api = web.get("/api/v1/jobs?error_contains=Reset&limit=5")
    assert api.status_code == 200
    body = api.get_json()
    assert [j["id"] for j in body["jobs"]] == ["b-11"]
    assert (body["scanned"], body["bounded"], body["next"]) == (12, False, None)


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("id_prefix=a%20b", "id_prefix &#39;a b&#39; has a space"),
        ("id_prefix=" + "x" * 201, "id_prefix is 201 characters; the limit is 200"),
        ("task_prefix=" + "t" * 256, "task_prefix is 256 characters; the limit is 255"),
        ("task_prefix=a%07b", "task_prefix contains a control character"),
        ("error_contains=" + "e" * 501, "error_contains is 501 characters; the limit is 500"),
        ("error_contains=a%00b", "error_contains contains a control character"),
    ],
)
def test_bad_search_input_is_a_400_naming_the_field(
    web: FlaskClient, query: str, named: str
) -> None:
    for url in (f"/jobs?{query}", f"/jobs/bulk-cancel?state=scheduled&{query}"):
        answer = web.get(url)
        assert answer.status_code == 400, url
        assert named in text(answer), (url, text(answer)[:800])


def test_the_api_job_list_takes_the_same_search(
    make_app: Callable[..., Flask], client: Client
) -> None:
    from parallel_scheduler.dashboard import TokenAuth

    orders_and_invoices(client)
    app = make_app(auth=TokenAuth(TOKEN))
    api = app.test_client()
    bearer = {"Authorization": f"Bearer {TOKEN}"}

    def listed(query: str) -> list[str]:
        answer = api.get(f"/api/v1/jobs?{query}", headers=bearer)
        assert answer.status_code == 200, answer.get_json()
        return [job["id"] for job in answer.get_json()["jobs"]]

    assert listed("id_prefix=order-") == ["order-1", "order-2", "order-10"]
    assert listed("task_prefix=mail.&state=scheduled") == ["order-1", "order-2", "Order-3", "o%der"]
    assert listed("error_contains=imeout") == ["order-10", "invoice-1"]
    assert listed("id_prefix=invoice&error_contains=broker&queue=billing") == ["invoice-1"]
    bad = api.get("/api/v1/jobs?id_prefix=a%20b", headers=bearer)
    assert bad.status_code == 400
    assert bad.get_json()["error"]["code"] == "bad_request"
    assert "id_prefix" in bad.get_json()["error"]["message"]
    document = api.get("/api/v1/openapi.json", headers=bearer).get_json()
    names = {p["name"] for p in document["paths"]["/jobs"]["get"]["parameters"]}
    assert {"id_prefix", "task_prefix", "error_contains", "due_from", "due_to"} <= names


def test_bulk_cancel_acts_on_the_searched_jobs_only(web: FlaskClient, client: Client) -> None:
    for n in range(3):
        client.schedule("t.c", countdown=600 + n, job_id=f"keep-{n}")
        client.schedule("t.c", countdown=600 + n, job_id=f"drop-{n}")
    preview = text(web.get("/jobs/bulk-cancel?state=scheduled&id_prefix=drop-"))
    assert "drop-0" in preview and "keep-0" not in preview
    token = csrf_token(web)
    done = web.post(
        "/jobs/bulk-cancel",
        data={"state": "scheduled", "id_prefix": "drop-", "confirm": "yes", "csrf_token": token},
    )
    assert done.status_code == 303
    states = {job_id: client.get(job_id).state for job_id in ("drop-1", "keep-1")}  # type: ignore[union-attr]
    assert states == {"drop-1": JobState.CANCELLED, "keep-1": JobState.SCHEDULED}


def test_the_banner_fragment_is_the_banner_alone_escaped_and_never_cached(
    web: FlaskClient, client: Client, make_app: Callable[..., Flask]
) -> None:
    healthy = web.get("/live/health")
    assert healthy.status_code == 200 and healthy.mimetype == "text/html"
    assert healthy.headers["Cache-Control"] == "no-store"
    body = text(healthy).strip()
    assert body.startswith('<div id="health-slot" data-live>') and body.endswith("</div>")
    assert 'id="health-banner"' not in body and "<html" not in body
    # Given a due job and a dead instance holding a lock, its id written to be markup
    client.schedule("t.due", eta=client.storage.now() - 5)
    register_dead(client.storage, "<i>zombie</i>")
    assert client.storage.acquire_lock("delayed-scheduler", "<i>zombie</i>", 300) is not None

    def problems() -> str | None:
        found = text(make_app().test_client().get("/live/health"))  # a fresh health cache
        return found if "held by dead instance" in found else None

    # Then the fragment holds the banner, the id escaped, as the pages do
    banner = wait_until(problems, WAIT, interval=0.1)
    assert 'id="health-banner"' in banner and "no live scheduler while jobs are due" in banner
    assert "dead instance &lt;i&gt;zombie&lt;/i&gt;" in banner and "<i>" not in banner
    page = text(make_app().test_client().get("/jobs"))
    slot = re.search(r'<div id="health-slot" data-live>.*?</div>\s*</div>', page, re.S)
    assert slot is not None and "dead instance &lt;i&gt;zombie&lt;/i&gt;" in slot.group(0)


def test_every_page_names_the_banner_fragment_and_the_jobs_page_is_live(
    web: FlaskClient, client: Client
) -> None:
    client.schedule("t.a", countdown=600, job_id="live-1")
    client.recurring.save("nightly", "t.r", "0 2 * * *")
    for url in ("/", "/jobs", "/recurring", "/errors", "/outcomes", "/jobs/detail?id=live-1"):
        page = text(web.get(url))
        assert 'data-health-url="/live/health" data-health-seconds="5"' in page, url
        assert '<div id="health-slot" data-live>' in page, url
    jobs = text(web.get("/jobs"))
    assert 'data-live-seconds="5"' in jobs
    results = re.search(r'<div id="jobs-results" data-live>(.*)</div>', jobs, re.S)
    assert results is not None
    for part in ('id="match-count"', 'id="jobs-table"', 'class="pager"', 'id="bulk-selected-form"'):
        assert part in results.group(1), part
    assert 'id="job-filter"' not in results.group(1)  # the filter form is never replaced
    assert "data-live-seconds" not in text(web.get("/recurring"))


def test_zone_lists_are_grouped_by_region_with_utc_first() -> None:
    groups = zone_groups()
    regions = [region for region, _ in groups]
    assert regions[-1] == OTHER_ZONES and regions[:-1] == sorted(regions[:-1])
    for region in ("Africa", "America", "Asia", "Europe", "Pacific", "Etc"):
        assert region in regions
    named = [name for _, names in groups for name in names]
    assert sorted(named) == sorted(zone_names()[1:]) and len(set(named)) == len(named)
    assert all(name.startswith(f"{region}/") for region, names in groups[:-1] for name in names)
    assert all("/" not in name for name in groups[-1][1])
    shown = str(zone_options("Asia/Tokyo"))
    assert shown.startswith(
        '<option value="UTC">UTC</option><optgroup label="Africa" class="zone-region">'
    )
    assert shown.count("<option ") == len(zone_names()) and shown.count(" selected") == 1
    assert '<option value="Asia/Tokyo" selected>Asia/Tokyo</option>' in shown
    assert shown.count("<optgroup ") == len(groups) and shown.endswith("</optgroup>")
    assert str(zone_options("UTC")).startswith('<option value="UTC" selected>UTC</option>')


def test_every_zone_list_is_grouped_without_the_script(web: FlaskClient, client: Client) -> None:
    client.schedule("t.a", countdown=600, job_id="z-1")
    for url, select_id in (
        ("/jobs", "zone-select"),
        ("/recurring/new", "new-timezone"),
        ("/jobs/detail?id=z-1", "reschedule-tz"),
    ):
        page = text(web.get(url))
        found = re.search(rf'<select id="{select_id}" name="\w+">(.*?)</select>', page, re.S)
        assert found is not None, url
        assert '<optgroup label="Europe" class="zone-region">' in found.group(1), url
        assert '<option value="Europe/Paris">Europe/Paris</option>' in found.group(1), url
