"""The catch-up window (issue 25, item 5) on every adapter: after an outage, a recurring job
fires only the missed ticks inside its window, whatever its misfire policy, counted against
ticks listed by brute force; and a bad window is refused by name at every entry point, with
nothing written."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from flask.testing import FlaskClient

from parallel_scheduler import Client, InvalidJobError
from parallel_scheduler.cli import main
from parallel_scheduler.dashboard import create_app
from parallel_scheduler.recurring.jobs import firing_id
from storage_adapters import Storage, list_jobs
from tests.dashboard.conftest import csrf_token
from tests.scheduler.test_recurring import run_pass
from tests.storage.entry_points import Store, opened

HOUR = 3600.0


@pytest.mark.parametrize(("policy", "cap"), [("run_all", 100), ("run_all", 2), ("run_once", 1)])
def test_after_an_outage_only_the_ticks_inside_the_window_fire(
    storage: Storage, policy: str, cap: int
) -> None:
    # Given an hourly job with a 3.5-hour window whose scheduler was down for ten hours
    client = Client(storage)
    client.recurring.save(
        "hourly", "t.h", "0 * * * *", misfire_policy=policy, misfire_cap=cap,  # type: ignore[arg-type]
        catch_up_window=3.5 * HOUR,
    )  # fmt: skip
    last = math.floor(storage.now() / HOUR) * HOUR
    assert storage.set_recurring_enabled("hourly", True, last - 10 * HOUR)
    # When a scheduler runs again
    now_before = storage.now()
    stats = run_pass(storage)
    now_after = storage.now()
    # Then what fired is, of the ticks since the outage (listed hour by hour) at most 3.5 hours
    # old, those on time (within the 60 s grace) and the latest ``cap`` missed ones
    ticks = [last - k * HOUR for k in range(10, -1, -1)]

    def expected(now: float) -> list[float]:
        inside = [t for t in ticks if now - t <= 3.5 * HOUR]
        on_time = [t for t in inside if now - t <= 60]
        missed = [t for t in inside if t not in on_time]
        return missed[-cap:] + on_time

    fired = sorted(j.due_at for j in list_jobs(storage, None, 100))
    assert fired in (expected(now_before), expected(now_after))
    assert all(storage.get_job(firing_id("hourly", t)) is not None for t in fired)
    assert stats.missed >= len(ticks) - 4  # at most four ticks are inside 3.5 hours
    saved = client.recurring.get("hourly")
    assert saved is not None and saved.next_run_at is not None
    assert saved.next_run_at.timestamp() == last + HOUR


BAD_WINDOWS: list[tuple[Any, str]] = [(0, "0"), (-5, "-5"), (math.inf, "inf"), ("soon", "soon")]


@pytest.mark.parametrize(("bad", "spelled"), BAD_WINDOWS)
def test_the_client_refuses_a_bad_window_by_name(storage: Storage, bad: Any, spelled: str) -> None:
    client = Client(storage)
    with pytest.raises(InvalidJobError, match="catch-up window") as error:
        client.recurring.save("r", "t.r", "0 * * * *", catch_up_window=bad)
    assert spelled in str(error.value)
    with pytest.raises(InvalidJobError, match="catch-up window"):
        client.recurring.save_many(
            [{"id": "ok", "task": "t.r", "every": 60}, {"id": "r", "task": "t.r", "every": 60,
              "catch_up_window": bad}]
        )  # fmt: skip
    assert storage.count_recurring() == 0


@pytest.mark.parametrize("value", ["0", "-5", "nan"])
def test_the_command_line_refuses_a_bad_window_by_name(
    adapter_kind: str, tmp_path: Any, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for target in opened(Store, adapter_kind, tmp_path):
        command = ["recurring", "add", "r", "t.r", "--every", "60", "--catch-up-window", value]
        capsys.readouterr()
        code = main(["--storage-url", target.url, "--prefix", target.prefix, *command])
        err = capsys.readouterr().err
        assert code == 2 and "Traceback" not in err, err
        assert "catch-up window" in err and value in err, err
        assert target.storage.count_recurring() == 0


@pytest.mark.parametrize(("bad", "spelled"), [(0, "0"), (-5, "-5"), ("soon", "not str")])
def test_the_api_and_the_form_refuse_a_bad_window_by_name(
    storage: Storage, bad: Any, spelled: str
) -> None:
    app = create_app(Client(storage))
    app.testing = True
    web: FlaskClient = app.test_client()
    body = {"id": "r", "task": "t.r", "every": 60, "catch_up_window": bad}
    answer = web.post("/api/v1/recurring", json=body, headers={"Authorization": "Bearer x"})
    assert answer.status_code == 400, answer.get_json()
    message = answer.get_json()["error"]["message"]
    assert ("catch-up window" in message or "catch_up_window" in message) and spelled in message
    form = {"csrf_token": csrf_token(web, "/recurring/new"), "id": "r", "task": "t.r",
            "every": "60", "catch_up_window": str(bad), "confirm": "yes"}  # fmt: skip
    page = web.post("/recurring/new", data=form)
    assert page.status_code == 400
    assert "catch" in page.get_data(as_text=True)
    assert storage.count_recurring() == 0


def test_the_recurring_page_shows_the_jitter_and_the_window(storage: Storage) -> None:
    client = Client(storage)
    client.recurring.save("plain", "t.p", "0 * * * *")
    client.recurring.save(
        "spread", "t.s", "0 * * * *", jitter=900, catch_up_window=6 * HOUR, misfire_policy="skip"
    )
    app = create_app(client)
    app.testing = True
    page = app.test_client().get("/recurring").get_data(as_text=True)
    cells = re.findall(r'<td class="recurring-policy"><span [^>]*>([^<]*)</span>', page)
    assert sorted(cells) == ["run_once", "skip · jitter 15 min · window 6 h"]
