"""The Recurring page's "Trigger now" counts as a run: the page then shows the trigger as the
last run and as a recent firing marked "(triggered)", and the next run stays where it was."""

from __future__ import annotations

import html

from flask.testing import FlaskClient

from parallel_scheduler import Client
from tests.dashboard.conftest import csrf_token


def test_trigger_now_shows_as_the_last_run_and_a_triggered_firing(
    web: FlaskClient, client: Client
) -> None:
    # Given a recurring job that never ran
    client.recurring.save("hourly", "t.report", "0 * * * *")
    before = client.recurring.get("hourly")
    assert before is not None and before.next_run_at is not None
    page = web.get("/recurring").get_data(as_text=True)
    assert "<li>none</li>" in page
    # When "Trigger now" is posted with the session's CSRF token and the confirmation
    form = {"id": "hourly", "action": "trigger", "confirm": "yes"}
    done = web.post("/recurring/action", data={**form, "csrf_token": csrf_token(web, "/recurring")})
    assert done.status_code == 303
    # Then the page lists the trigger's job as a recent firing, marked, and as the last run
    after = client.recurring.get("hourly")
    assert after is not None and after.last_run_at is not None
    (firing,) = after.recent_firings()
    assert firing.trigger and firing.job_id is not None
    assert firing.job_id.startswith("hourly@trigger-")
    page = html.unescape(web.get("/recurring").get_data(as_text=True))
    assert f">{firing.job_id}</a> (triggered)</li>" in page
    # (every instant is shown by the one time rule: ``datetime`` carries it in UTC, to the second)
    assert f'datetime="{after.last_run_at.replace(microsecond=0).isoformat()}"' in page
    assert "<li>none</li>" not in page
    # And the schedule did not move
    assert after.next_run_at == before.next_run_at
    assert f'datetime="{before.next_run_at.replace(microsecond=0).isoformat()}"' in page
