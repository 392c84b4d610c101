"""A backfill skips the ticks on dates the job's calendars exclude, as the scheduler would have:
the fired ticks are the brute-force ``zoneinfo`` oracle's minus the excluded local dates (two
calendars in two zones, across both 2026 DST changes), counted as ``excluded``, the same through
the Client, the command line, the HTTP API and the dashboard's form."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from parallel_scheduler import Client
from parallel_scheduler.cli import main
from parallel_scheduler.dashboard import create_app
from storage_adapters import Storage, list_jobs
from tests.dashboard.conftest import csrf_token
from tests.scheduler.test_calendars import HOLIDAYS, START, US_DAYS, oracle
from tests.storage.entry_points import Store, opened

#: 1 March to 30 November 2026: both of Berlin's DST changes and every excluded date.
END = datetime(2026, 11, 30, tzinfo=timezone.utc).timestamp()
LOW, HIGH = (datetime.fromtimestamp(t, timezone.utc) for t in (START, END))
BEARER = {"Authorization": "Bearer x"}


def excluding(client: Client, *ids: str) -> None:
    """Jobs at 02:30 Berlin time excluding a Berlin and a New York calendar."""
    client.put_calendar("holidays-de", HOLIDAYS, timezone="Europe/Berlin")
    client.put_calendar("us-days", US_DAYS, timezone="America/New_York")
    for rid in ids:
        client.recurring.save(rid, "t.job", "30 2 * * *", timezone="Europe/Berlin",
                              exclude=["holidays-de", "us-days"])  # fmt: skip


def fired(storage: Storage, rid: str) -> list[float]:
    return sorted(j.due_at for j in list_jobs(storage, None, 1000) if j.id.startswith(f"{rid}@"))


def test_the_client_fires_the_oracles_ticks_minus_the_excluded_dates(storage: Storage) -> None:
    client = Client(storage)
    excluding(client, "job")
    every, kept = oracle(30, 2, None, START, END, exclude=False), oracle(30, 2, None, START, END)
    assert len(every) - len(kept) == 10  # 7 Berlin dates and 3 New York evenings fall on ticks
    done = client.recurring.backfill("job", LOW, HIGH)
    assert done.to_dict() == {
        "ticks": len(every), "created": len(kept), "existing": 0, "excluded": len(every) - len(kept)
    }  # fmt: skip
    assert fired(storage, "job") == kept
    # a job without calendars reports no "excluded"
    client.recurring.save("plain", "t.job", "30 2 * * *", timezone="Europe/Berlin")
    assert "excluded" not in client.recurring.backfill("plain", LOW, HIGH).to_dict()


def test_the_command_line_says_how_many_ticks_were_on_excluded_dates(
    adapter_kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    every, kept = oracle(30, 2, None, START, END, exclude=False), oracle(30, 2, None, START, END)
    for target in opened(Store, adapter_kind, tmp_path):
        excluding(Client(target.storage), "job", "again")
        base = ["--storage-url", target.url, "--prefix", target.prefix, "recurring", "backfill"]
        span = ["--from", LOW.isoformat(), "--to", HIGH.isoformat()]
        capsys.readouterr()
        assert main([*base, "job", *span, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["excluded"] == len(every) - len(kept)
        assert main([*base, "again", *span, "--overlap", "skip"]) == 0
        assert capsys.readouterr().out == (
            f"again: from {LOW.isoformat()} to {HIGH.isoformat()}: {len(every)} tick(s), "
            f"1 fired, 0 already there, {len(every) - len(kept)} on excluded dates, "
            f"{len(kept) - 1} skipped (overlap skip)\n"
        )
        assert fired(target.storage, "job") == kept and fired(target.storage, "again") == kept[-1:]


def test_the_api_and_the_dashboard_form_skip_the_excluded_dates(storage: Storage) -> None:
    excluding(Client(storage), "by-api", "by-form", "by-form-skip")
    every, kept = oracle(30, 2, None, START, END, exclude=False), oracle(30, 2, None, START, END)
    app = create_app(Client(storage))
    app.testing = True
    web = app.test_client()
    body = {"from": LOW.isoformat(), "to": HIGH.isoformat()}
    answer = web.post("/api/v1/recurring/by-api/backfill", json=body, headers=BEARER)
    assert answer.status_code == 200, answer.get_json()
    assert answer.get_json()["excluded"] == len(every) - len(kept)
    form = {"csrf_token": csrf_token(web, "/recurring/edit?id=by-form"), "id": "by-form",
            "from": body["from"], "to": body["to"], "confirm": "yes"}  # fmt: skip
    done = web.post("/recurring/backfill", data=form, follow_redirects=True)
    said = f"{len(every) - len(kept)} on excluded dates"
    assert done.status_code == 200 and said in done.get_data(as_text=True)
    # the form's overlap: skip fires the latest tick only; buffer_one is the command line's
    held_open = web.post("/recurring/backfill", data={**form, "overlap": "buffer_one"})
    assert held_open.status_code == 400 and "command line" in held_open.get_data(as_text=True)
    skip = {**form, "id": "by-form-skip", "overlap": "skip"}
    done = web.post("/recurring/backfill", data=skip, follow_redirects=True)
    assert f"{len(kept) - 1} skipped (overlap skip)" in done.get_data(as_text=True)
    assert fired(storage, "by-api") == fired(storage, "by-form") == kept
    assert fired(storage, "by-form-skip") == kept[-1:]
