"""The health banner in a real browser: red, above every page's content, naming the problem;
and a dead instance badged "dead" on the overview, not dimmed."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from playwright.sync_api import expect

from devtools.waiting import wait_until
from parallel_scheduler import Client
from storage_adapters import InstanceRecord


def test_the_banner_is_red_on_every_page_and_a_dead_instance_is_badged(
    page: Any, serve: Callable[..., str], client: Client
) -> None:
    # Given a job due and one instance, dead (it beat every 0.05 s, long ago by now)
    client.schedule("t.due", eta=client.storage.now() - 5)
    details = {"settings": {"heartbeat_interval": 0.05}}
    client.storage.register_instance(
        InstanceRecord("gone-1", "host-g", 4242, "0.0", time.time(), 0.0, json.dumps(details))
    )
    (record,) = client.storage.list_instances()
    wait_until(lambda: client.storage.now() - record.heartbeat_at > 0.5, 30)  # shown dead
    url = serve(client)
    for path, title in (("/", "Overview"), ("/jobs", "Jobs"), ("/recurring", "Recurring")):
        response = page.goto(url + path)
        assert response is not None and response.status == 200
        assert page.title().startswith(title)
        banner = page.locator("#health-banner")
        expect(banner).to_be_visible()
        expect(banner).to_contain_text("no live scheduler while jobs are due")
        color = banner.evaluate("b => getComputedStyle(b).backgroundColor")
        assert color == "rgb(164, 14, 38)", color
    page.goto(url + "/")
    state = page.locator("#instances tr[data-instance-id='gone-1'] .instance-state")
    badge = state.locator(".dead-badge")
    expect(badge).to_have_text("dead")
    assert badge.evaluate("b => getComputedStyle(b).backgroundColor") == "rgb(164, 14, 38)"
    row_color = page.locator("#instances tr[data-instance-id='gone-1']").evaluate(
        "r => getComputedStyle(r).color"
    )
    assert row_color == "rgb(29, 35, 43)", row_color  # the page's own text colour: not dimmed
