"""A readable dashboard (issue 22 §3): one time rule everywhere (``display.when``: relative text,
the absolute time in the viewer's zone on hover, UTC in ``datetime``, to the second), durations
in words, stored epochs such as ``expires`` shown as times, and the Jobs page's paging: previous
and next, a page-size choice and a count of the matches."""

from __future__ import annotations

import html
import re
import zoneinfo
from datetime import datetime, timezone

from flask.testing import FlaskClient

from parallel_scheduler import Client
from parallel_scheduler.dashboard import display
from parallel_scheduler.dashboard.browse import JobFilter, count_matches
from storage_adapters import JobState

ROW = re.compile(r'class="job-row" data-job-id="([^"]+)"')
TOKYO = zoneinfo.ZoneInfo("Asia/Tokyo")
EPOCH = 1_900_000_000.25  # 2030-03-17T17:46:40.25Z


def _link(page: str, link_id: str) -> str | None:
    found = re.search(rf'id="{link_id}" href="([^"]+)"', page)
    return None if found is None else html.unescape(found.group(1))


def test_the_time_rule_relative_with_the_absolute_time_on_hover() -> None:
    shown = str(display.when(EPOCH, TOKYO, EPOCH - 7300))
    assert shown == (
        '<time class="when" datetime="2030-03-17T17:46:40+00:00" '
        'title="2030-03-18T02:46:40+09:00">in 2 h</time>'
    )
    assert ">3 min ago<" in str(display.when(EPOCH, TOKYO, EPOCH + 200))
    assert ">now<" in str(display.when(EPOCH, timezone.utc, EPOCH + 0.5))
    # a datetime or ISO text (as the status report and the timeline give them) reads the same
    aware = datetime.fromtimestamp(EPOCH, tz=timezone.utc)
    assert str(display.when(aware, TOKYO, EPOCH)) == str(display.when(EPOCH, TOKYO, EPOCH))
    assert str(display.when(aware.isoformat(), TOKYO, EPOCH)) == str(
        display.when(EPOCH, TOKYO, EPOCH)
    )
    # never a raw float, never a 500: out of range or not an instant is shown as its text
    assert str(display.when(None, TOKYO, EPOCH)) == "-"
    assert "outside the valid range" in str(display.when(1e300, TOKYO, EPOCH))
    assert "&lt;b&gt;" in str(display.when("<b>", TOKYO, EPOCH))
    assert display.absolute(EPOCH, TOKYO) == "2030-03-18 02:46:40"  # to the second


def test_durations_in_words_and_expires_as_a_time() -> None:
    assert display.duration(0.2) == "0.200 s"
    assert display.duration(45) == "45 s"
    assert display.duration(90) == "1 min 30 s"
    assert display.duration(7500) == "2 h 5 min"
    assert display.duration(3 * 86400 + 7200) == "3 d 2 h"
    assert display.duration(None) == display.duration(float("nan")) == "-"
    assert display.relative(-3 * 86400) == "3 d ago"
    assert (
        display.relative(-400 * 86400) == "1 y ago" and display.duration(400 * 86400) == "1 y 35 d"
    )
    options = display.shown_options({"queue": "q", "expires": EPOCH}, TOKYO)
    assert options == {"queue": "q", "expires": "2030-03-18T02:46:40+09:00"}
    assert display.shown_options({"queue": "q"}, TOKYO) == {"queue": "q"}


def test_every_page_names_the_zone_once_and_shows_no_raw_epoch(
    web: FlaskClient, client: Client
) -> None:
    client.schedule("t.a", [1], eta=EPOCH, job_id="e-1", queue="q", expires=EPOCH + 3600)
    detail = web.get("/jobs/detail?id=e-1&tz=Asia/Tokyo").get_data(as_text=True)
    assert 'id="job-expires"' in detail and 'title="2030-03-18T03:46:40+09:00"' in detail
    assert "&#34;expires&#34;: &#34;2030-03-18T03:46:40+09:00&#34;" in detail
    assert str(EPOCH + 3600) not in detail
    for url in ("/", "/jobs", "/errors", "/recurring", "/outcomes", "/jobs/detail?id=e-1"):
        page = web.get(url).get_data(as_text=True)
        assert not re.search(r"<th>[^<]*\((UTC|Asia/Tokyo)\)</th>", page), url  # no zone per column
        assert '<label for="zone-select">Times in</label>' in page, url
        assert not re.search(r"\d\d:\d\d:\d\d\.\d", page), url  # no microseconds


def test_jobs_page_previous_next_page_size_and_count(web: FlaskClient, client: Client) -> None:
    for n in range(9):
        client.schedule("t.a", countdown=600 + n, job_id=f"p-{n}")
    client.schedule("t.b", countdown=900, job_id="other")
    first = web.get("/jobs?limit=4&task=t.a").get_data(as_text=True)
    assert ROW.findall(first) == ["p-0", "p-1", "p-2", "p-3"]
    assert 'data-count="9" data-exact="yes"' in first and "9 jobs match." in first
    assert _link(first, "prev-page") is None
    second_url = _link(first, "next-page")
    assert second_url is not None
    second = web.get(second_url).get_data(as_text=True)
    third_url = _link(second, "next-page")
    assert third_url is not None
    third = web.get(third_url).get_data(as_text=True)
    assert ROW.findall(third) == ["p-8"] and _link(third, "next-page") is None
    back_url = _link(third, "prev-page")
    assert back_url is not None
    back = web.get(back_url).get_data(as_text=True)
    assert ROW.findall(back) == ["p-4", "p-5", "p-6", "p-7"]
    front_url = _link(back, "prev-page")
    assert front_url is not None
    assert ROW.findall(web.get(front_url).get_data(as_text=True)) == ROW.findall(first)
    # the page sizes keep the filters; the count of a state alone is exact from the counts
    sizes = re.findall(r'class="page-size" href="([^"]+)"', first)
    assert len(sizes) == 4 and all("task=t.a" in html.unescape(u) for u in sizes)
    everything = web.get("/jobs").get_data(as_text=True)
    assert 'data-count="10" data-exact="yes"' in everything
    scanned = web.get("/jobs?queue=nope").get_data(as_text=True)
    assert "Matches are not counted" in scanned
    assert web.get("/jobs?back=nonsense&after=1.0:p-1").status_code == 400


def test_a_count_past_its_bound_says_more_than(client: Client) -> None:
    for n in range(5):
        client.schedule("t.a", countdown=600 + n, job_id=f"c-{n}")
    storage = client.storage
    by_task = JobFilter(state=JobState.SCHEDULED, task="t.a")
    assert count_matches(storage, storage.count_by_state, by_task, 1.0, bound=3) == (3, False)
    assert count_matches(storage, storage.count_by_state, by_task, 1.0, bound=5) == (5, True)
    by_queue = JobFilter(state=JobState.SCHEDULED, queue="q")
    assert count_matches(storage, storage.count_by_state, by_queue, 1.0) is None
