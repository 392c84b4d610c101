"""Execution outcomes in the dashboard: the Outcomes page (counts per task, the newest failures
first, then every final outcome, paged newest first), the timeline on a job's page and the
outcome of each recent firing on the Recurring page, from outcomes stored as a worker's plugin
stores them (``record_outcomes``)."""

from __future__ import annotations

import html
import re

from flask.testing import FlaskClient

from parallel_scheduler import Client
from storage_adapters import NewJob, OutcomeEvent, OutcomeState, Storage

S = OutcomeState
LISTED = re.compile(
    r'<tr class="outcome-(\w+)">\s*<td>[^<]*</td>\s*<td><a href="[^"]*">([^<]+)</a>'
)


def ran(job_id: str, at: float, final: OutcomeState, task: str = "t.work") -> list[OutcomeEvent]:
    error = "ValueError: bad <input>" if final is S.FAILED else None
    return [
        OutcomeEvent(job_id, task, S.RECEIVED, at, "w1@host"),
        OutcomeEvent(job_id, task, S.STARTED, at + 0.1, "w1@host"),
        OutcomeEvent(job_id, task, final, at + 0.3, "w1@host", runtime=0.2, error=error),
    ]


def listed(page: str, table: str) -> list[tuple[str, str]]:
    part = page.split(f'id="{table}"', 1)[1].split("</table>", 1)[0]
    return [(state, html.unescape(job)) for state, job in LISTED.findall(part)]


def test_the_outcomes_page_lists_failures_first_then_every_outcome_newest_first(
    web: FlaskClient, storage: Storage
) -> None:
    # Given outcomes of five runs, one of them a failure, and one run still going
    now = storage.now()
    events = ran("a", now - 50, S.SUCCEEDED) + ran("b", now - 40, S.FAILED)
    events += ran("c", now - 30, S.RETRIED) + ran("d", now - 20, S.REVOKED, task="t.other")
    events += ran("e", now - 10, S.SUCCEEDED) + ran("f", now, S.STARTED)[:2]
    storage.record_outcomes(events)
    # When the page is read
    response = web.get("/outcomes")
    assert response.status_code == 200
    page = response.get_data(as_text=True)
    # Then the failure leads, its error shown as text, and the rest follow newest first
    assert listed(page, "outcome-failures") == [("failed", "b")]
    assert "ValueError: bad &lt;input&gt;" in page
    assert listed(page, "outcome-list") == [
        ("succeeded", "e"),
        ("revoked", "d"),
        ("retried", "c"),
        ("failed", "b"),
        ("succeeded", "a"),
    ]
    # And the counts per task, and the nav link
    counts = page.split('id="outcome-counts"', 1)[1].split("</table>", 1)[0]
    assert re.search(r"t\.work</a></td><td>2</td><td>1</td><td>1</td><td>0</td>", counts)
    assert 'id="nav-outcomes"' in page
    # And a page of two walks on to the older ones, one outcome or task at a time when asked
    first = web.get("/outcomes?limit=2").get_data(as_text=True)
    assert [job for _, job in listed(first, "outcome-list")] == ["e", "d"]
    older = re.search(r'id="outcomes-next" href="([^"]+)"', first)
    assert older is not None
    second = web.get(html.unescape(older.group(1))).get_data(as_text=True)
    assert [job for _, job in listed(second, "outcome-list")] == ["c", "b"]
    retried = web.get("/outcomes?state=retried").get_data(as_text=True)
    assert listed(retried, "outcome-list") == [("retried", "c")]
    other = web.get("/outcomes?task=t.other").get_data(as_text=True)
    assert listed(other, "outcome-list") == [("revoked", "d")]
    assert web.get("/outcomes?state=started").status_code == 400


def test_a_jobs_page_shows_its_timeline(web: FlaskClient, storage: Storage) -> None:
    # Given a job that was cancelled (its record's last change) and outcomes of a run
    now = storage.now()
    storage.add_jobs([NewJob("j1", "t.work", '{"args":[],"kwargs":{},"options":{}}', now + 60)])
    assert storage.cancel("j1")
    storage.record_outcomes(ran("j1", now + 1, S.FAILED))
    # When its page is read
    page = web.get("/jobs/detail?id=j1").get_data(as_text=True)
    # Then the timeline lists each change in order, with who and why
    timeline = page.split('id="job-timeline"', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r'<tr class="timeline-([\w-]+)">', timeline)
    assert rows == ["created", "cancelled", "received", "started", "failed"]
    assert "w1@host" in timeline and "ValueError: bad &lt;input&gt;" in timeline
    assert "0.200" in timeline


def test_each_recent_firing_shows_its_outcome(
    web: FlaskClient, client: Client, storage: Storage
) -> None:
    # Given a recurring job triggered once, whose firing a worker ran
    client.recurring.save("hourly", "t.report", "0 * * * *")
    firing = client.recurring.trigger("hourly")
    storage.record_outcomes(ran(firing, storage.now(), S.SUCCEEDED, task="t.report"))
    # When the Recurring page is read, Then the firing shows its outcome
    page = html.unescape(web.get("/recurring").get_data(as_text=True))
    assert f'>{firing}</a> <span class="firing-outcome outcome-succeeded">succeeded</span>' in page


def test_the_outcomes_page_renders_with_nothing_recorded(web: FlaskClient) -> None:
    page = web.get("/outcomes")
    assert page.status_code == 200
    text = page.get_data(as_text=True)
    assert text.count("<td colspan=") == 3  # the counts, the failures and the listing: none
