"""``recurring list`` and ``recurring show`` with execution outcomes, on every backend: each
job's last outcome (its newest firing's latest recorded outcome) and each recent firing's
outcome, in text and in ``--json``, read in batches (never one storage call per row), in the
HTTP API's very shapes; and bad JSON given to ``recurring add --update`` changes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from parallel_scheduler import Client
from parallel_scheduler.cli import main
from parallel_scheduler.views import with_outcomes
from storage_adapters import OutcomeEvent, OutcomeState, OutcomeStore, Storage
from tests.conftest import set_up_storage, storage_url

S = OutcomeState
BEARER = {"Authorization": "Bearer anything-at-all"}


@pytest.fixture
def store(adapter_kind: str, tmp_path: Path) -> Iterator[tuple[list[str], Storage]]:
    """A fresh store of ``adapter_kind`` and the CLI arguments that reach it; dropped after."""
    url = storage_url(adapter_kind, tmp_path)
    prefix, storage = set_up_storage(url)
    try:
        yield ["--log-level", "WARNING", "--storage-url", url, "--prefix", prefix], storage
    finally:
        storage.drop()
        storage.close()


def run(args: list[str], capsys: pytest.CaptureFixture[str], code: int = 0) -> str:
    got = main(args)
    out, err = capsys.readouterr()
    assert got == code, err
    return out if code == 0 else err


def fired(storage: Storage) -> dict[str, str]:
    """``failing`` (its newest firing failed on w1), ``pending`` (an older firing succeeded, the
    newest has no outcome yet) and ``never`` (no firing); their newest firings' job ids."""
    assert isinstance(storage, OutcomeStore)
    client = Client(storage, retry_for=1.0)
    for name in ("failing", "pending", "never"):
        client.recurring.save(name, f"t.{name}", every=3600, args=[name])
    failing = client.recurring.trigger("failing")
    older = client.recurring.trigger("pending")
    newest = client.recurring.trigger("pending")
    now = storage.now()
    storage.record_outcomes(
        [
            OutcomeEvent(failing, "t.failing", S.RECEIVED, now, "w1@box"),
            OutcomeEvent(failing, "t.failing", S.STARTED, now + 1, "w1@box"),
            OutcomeEvent(failing, "t.failing", S.FAILED, now + 2, "w1@box", 1.0, "KeyError: 'k'"),
            OutcomeEvent(older, "t.pending", S.SUCCEEDED, now, "w2@box", 0.1),
        ]
    )
    return {"failing": failing, "pending": newest, "pending-older": older}


def test_list_and_show_give_each_jobs_outcomes_in_text_and_json(
    store: tuple[list[str], Storage], capsys: pytest.CaptureFixture[str]
) -> None:
    base, storage = store
    ids = fired(storage)
    views = {v["id"]: v for v in json.loads(run([*base, "recurring", "list", "--json"], capsys))}
    last = views["failing"]["last_outcome"]
    assert last["job_id"] == ids["failing"] and last["state"] == "failed"
    assert (last["worker"], last["runtime"], last["error"]) == ("w1@box", 1.0, "KeyError: 'k'")
    assert views["pending"]["last_outcome"] is None  # its newest firing: none recorded yet
    assert views["pending"]["firing_outcomes"] == {ids["pending-older"]: "succeeded"}
    assert views["failing"]["firing_outcomes"] == {ids["failing"]: "failed"}
    assert views["never"]["last_outcome"] is None and views["never"]["recent_firings"] == []

    table = run([*base, "recurring", "list"], capsys).splitlines()  # piped: tab-separated
    header = table[0].split("\t")
    column = header.index("last outcome")
    rows = {line.split("\t")[0]: line.split("\t") for line in table[1:]}
    assert (rows["failing"][column], rows["pending"][column], rows["never"][column]) == (
        "failed",
        "-",
        "-",
    )

    shown = json.loads(run([*base, "recurring", "show", "failing", "--json"], capsys))
    assert shown == views["failing"]
    text = run([*base, "recurring", "show", "pending"], capsys).splitlines()
    firings = [line for line in text if line.startswith("firing ")]
    assert len(firings) == 2
    assert firings[0].endswith(f"  {ids['pending']}  -  (triggered)")
    assert firings[1].endswith(f"  {ids['pending-older']}  succeeded  (triggered)")
    assert any(line.startswith("last outcome ") and line.endswith("  -") for line in text)
    text = run([*base, "recurring", "show", "failing"], capsys).splitlines()
    (last_line,) = [line for line in text if line.startswith("last outcome ")]
    assert last_line.endswith("  failed on w1@box in 1.000 s (KeyError: 'k')")
    assert any(line.startswith("args ") and line.endswith('["failing"]') for line in text)
    never = run([*base, "recurring", "show", "never"], capsys).splitlines()
    assert any(line.startswith("firing ") and line.endswith("none yet") for line in never)
    error = run([*base, "recurring", "show", "nope"], capsys, code=1)
    assert "no such recurring job: nope" in error


def test_the_command_line_and_the_api_give_the_same_shapes(
    store: tuple[list[str], Storage], capsys: pytest.CaptureFixture[str]
) -> None:
    from parallel_scheduler.dashboard import create_app

    base, storage = store
    fired(storage)
    api = create_app(Client(storage, retry_for=1.0)).test_client()
    listed = api.get("/api/v1/recurring", headers=BEARER).get_json()["recurring"]
    assert json.loads(run([*base, "recurring", "list", "--json"], capsys)) == listed
    for recurring_id in ("failing", "pending", "never"):
        one = api.get(f"/api/v1/recurring/{recurring_id}", headers=BEARER).get_json()
        shown = run([*base, "recurring", "show", recurring_id, "--json"], capsys)
        assert json.loads(shown) == one


def test_a_listing_reads_the_outcomes_in_batches(
    store: tuple[list[str], Storage],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base, storage = store
    assert isinstance(storage, OutcomeStore)
    client = Client(storage, retry_for=1.0)
    for n in range(12):
        client.recurring.save(f"r-{n:02d}", "t.x", every=3600)
        client.recurring.trigger(f"r-{n:02d}")
    calls: list[int] = []
    read = type(storage).latest_outcomes

    def counted(self: Any, job_ids: Any) -> Any:
        calls.append(len(job_ids))
        return read(self, job_ids)

    monkeypatch.setattr(type(storage), "latest_outcomes", counted)
    assert len(json.loads(run([*base, "recurring", "list", "--json"], capsys))) == 12
    assert calls == [12]  # one call for the page, not one per row
    calls.clear()
    ids = [f"r-{n}@trigger-2030-01-01T00:00:00.{n:06d}Z" for n in range(2100)]
    views: list[dict[str, Any]] = [
        {"id": f"r-{n}", "recent_firings": [{"job_id": job_id, "trigger": True}]}
        for n, job_id in enumerate(ids)
    ]
    assert len(with_outcomes(client, views)) == 2100
    assert calls == [1000, 1000, 100]
    assert all(view["last_outcome"] is None for view in views)
    assert all(view["firing_outcomes"] == {} for view in views)


@pytest.mark.parametrize(
    ("option", "value", "reason"),
    [
        ("--args", "[1,", "argument --args: not JSON"),
        ("--args", '{"a": 1}', "argument --args: must be a JSON list"),
        ("--kwargs", "[1]", "argument --kwargs: must be a JSON dict"),
        ("--args", "[" * 40 + "]" * 40, "args nest deeper than 32"),
        ("--kwargs", '{"a": ' + "[" * 5000 + "]" * 5000 + "}", "kwargs"),
    ],
)
def test_bad_json_given_to_an_update_changes_nothing(
    store: tuple[list[str], Storage],
    capsys: pytest.CaptureFixture[str],
    option: str,
    value: str,
    reason: str,
) -> None:
    base, storage = store
    client = Client(storage, retry_for=1.0)
    client.recurring.save("nightly", "t.r", "30 2 * * *", args=["eu"], queue="reports")
    before = storage.get_recurring("nightly")
    update = [*base, "recurring", "add", "nightly", "t.r", "--cron", "0 3 * * *", "--update"]
    with pytest.raises(SystemExit) as exit_info:
        main([*update, option, value])
    assert exit_info.value.code == 2
    assert reason in capsys.readouterr().err
    assert storage.get_recurring("nightly") == before
