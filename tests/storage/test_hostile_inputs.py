"""Hostile input, refused the same way at every door (issue 19, sections 4 and 5).

The same bad input goes to every entry point that stores a call: ``Client.schedule``,
``Client.schedule_many``, ``Client.recurring.save``, the Celery plugin (``task.schedule`` and an
above-threshold ``apply_async``), and the command line (``schedule``, ``recurring add``), on every
storage. Each must be refused with the project's error naming the field, on one line (exit status
2 on the command line, no traceback), and nothing may be stored. The limits are the documented
ones (``parallel_scheduler.ranges``): nesting, listing pages; ids that cannot exist are simply not
found, on every backend alike.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from celery import Celery

import storage_adapters
from parallel_scheduler import Client, InvalidJobError, JobSpec, JobState
from parallel_scheduler.cli import main
from parallel_scheduler.dashboard.inputs import zone_names
from parallel_scheduler.ranges import MAX_NESTING, MAX_PAGE
from storage_adapters import InvalidArgumentError, Storage, StorageUnavailableError, list_jobs
from tests.storage.entry_points import EntryPoints, opened, producer


def nested(depth: int) -> list[Any]:
    """A list nesting ``depth`` levels of lists (itself the first): ``nested(2) == [[]]``."""
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


def nested_text(depth: int) -> str:
    return "[" * depth + "]" * depth


@dataclass(frozen=True)
class Bad:
    """One bad call: its arguments, their command-line spelling (``None``: the command line
    cannot say it), and the words the error must hold."""

    args: Any = field(default_factory=lambda: [1])
    kwargs: Any = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    countdown: Any = 120
    cli: tuple[str, ...] | None = ()
    named: tuple[str, ...] = ()


BAD = {
    "args 50,000 deep": Bad(
        args=nested(50_000),
        cli=("--args", nested_text(50_000)),
        named=("args", f"{MAX_NESTING} levels"),
    ),
    "args one past the limit": Bad(
        args=nested(MAX_NESTING + 1),
        cli=("--args", nested_text(MAX_NESTING + 1)),
        named=("args", f"{MAX_NESTING} levels"),
    ),
    "kwargs 50,000 deep": Bad(
        kwargs={"k": nested(50_000)},
        cli=("--kwargs", '{"k": ' + nested_text(50_000) + "}"),
        named=("kwargs", f"{MAX_NESTING} levels"),
    ),
    "a lone surrogate in args": Bad(
        args=["a\ud800"], cli=("--args", '["a\\ud800"]'), named=("args", "\\ud800")
    ),
    "a lone surrogate in kwargs": Bad(
        kwargs={"k": "\udcff"}, cli=("--kwargs", '{"k": "\\udcff"}'), named=("kwargs", "\\udcff")
    ),
    "an empty keyword name": Bad(
        kwargs={"": 1}, cli=("--kwargs", '{"": 1}'), named=("kwargs", "keyword name", "''")
    ),
    "a keyword name that is not a string": Bad(kwargs={1: 2}, cli=None, named=("kwargs", "1")),
    "a header name that is not a string": Bad(
        options={"headers": {1: 2}}, cli=None, named=("headers", "header name")
    ),
    "an empty header name": Bad(
        options={"headers": {"": "x"}}, cli=None, named=("headers", "header name")
    ),
    "countdown 10**400": Bad(
        countdown=10**400, cli=("--countdown", "1" + "0" * 400), named=("countdown", "lands after")
    ),
}


@dataclass
class Target:
    url: str
    prefix: str
    storage: Storage

    def snapshot(self) -> tuple[dict[JobState, int], int]:
        """Everything a refused call could have written: the jobs and the recurring jobs."""
        return self.storage.count_by_state(), self.storage.count_recurring()


@pytest.fixture
def target(adapter_kind: str, tmp_path: Path) -> Iterator[Target]:
    yield from opened(Target, adapter_kind, tmp_path)


def _plugin_task(app: Celery) -> Any:
    @app.task(name="tasks.ok", shared=False)  # type: ignore[untyped-decorator]
    def task(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("never runs here")

    return task


# -- the entry points: each makes one call with ``bad`` and returns the error's text ----------


def _refused(call: Callable[[], object]) -> str:
    with pytest.raises(InvalidJobError) as error:
        call()
    return str(error.value)


def _client_schedule(target: Target, bad: Bad) -> str:
    client = Client(target.storage)
    return _refused(
        lambda: client.schedule(
            "tasks.ok", bad.args, bad.kwargs, countdown=bad.countdown, **bad.options
        )
    )


def _client_schedule_many(target: Target, bad: Bad) -> str:
    good = JobSpec("tasks.ok", countdown=5)
    spec = JobSpec(
        "tasks.ok", args=bad.args, kwargs=bad.kwargs, options=bad.options, countdown=bad.countdown
    )
    return _refused(lambda: Client(target.storage).schedule_many([good, spec]))


def _recurring_save(target: Target, bad: Bad) -> str:
    jobs = Client(target.storage).recurring
    return _refused(
        lambda: jobs.save(
            "nightly", "tasks.ok", every=60, args=bad.args, kwargs=bad.kwargs, **bad.options
        )
    )


def _plugin_schedule(target: Target, bad: Bad) -> str:
    task = _plugin_task(producer("hostile", target))
    return _refused(
        lambda: task.schedule(bad.args, bad.kwargs, countdown=bad.countdown, **bad.options)
    )


def _plugin_apply_async(target: Target, bad: Bad) -> str:
    task = _plugin_task(producer("hostile", target))
    return _refused(
        lambda: task.apply_async(bad.args, bad.kwargs, countdown=bad.countdown, **bad.options)
    )


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """The command's exit status, stdout and stderr (argparse's own refusals included)."""
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exit_info:
        code = int(exit_info.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _one_error_line(code: int, err: str) -> str:
    assert code == 2, err
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1, err
    return errors[0]


def _cli_schedule(target: Target, bad: Bad, capsys: pytest.CaptureFixture[str]) -> str:
    assert bad.cli is not None
    when = () if "--countdown" in bad.cli else ("--countdown", "120")
    argv = ["--storage-url", target.url, "--prefix", target.prefix, "schedule", "tasks.ok"]
    code, _, err = run_cli([*argv, *when, *bad.cli], capsys)
    return _one_error_line(code, err)


def _cli_recurring_add(target: Target, bad: Bad, capsys: pytest.CaptureFixture[str]) -> str:
    assert bad.cli is not None
    argv = ["--storage-url", target.url, "--prefix", target.prefix, "recurring", "add"]
    code, _, err = run_cli([*argv, "nightly", "tasks.ok", "--every", "60", *bad.cli], capsys)
    return _one_error_line(code, err)


_CLI = ("cli schedule", "cli recurring add")


def _applies(entry: str, bad: Bad) -> bool:
    """A recurring job has no countdown; the command line cannot spell some inputs; Celery's own
    ``apply_async`` checks keyword names against the task's signature before the plugin sees
    the call (a ``TypeError`` of Celery's, ``task.schedule`` refuses it first)."""
    if entry == "plugin apply_async" and any(not isinstance(k, str) for k in bad.kwargs):
        return False
    if entry in ("Client.recurring.save", "cli recurring add") and bad.countdown != 120:
        return False
    return entry not in _CLI or bad.cli is not None


ENTRY_POINTS = EntryPoints(
    {
        "Client.schedule": _client_schedule,
        "Client.schedule_many": _client_schedule_many,
        "Client.recurring.save": _recurring_save,
        "plugin task.schedule": _plugin_schedule,
        "plugin apply_async": _plugin_apply_async,
        "cli schedule": _cli_schedule,
        "cli recurring add": _cli_recurring_add,
    },
    cli=_CLI,
    bad=BAD,
    applies=_applies,
)


@pytest.mark.parametrize(("entry", "case"), ENTRY_POINTS.cases())
def test_every_entry_point_refuses_it_by_name_and_stores_nothing(
    target: Target, entry: str, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    refused = ENTRY_POINTS.refuse(entry, case, target, capsys)
    message = refused.message
    assert all(word in message for word in refused.bad.named), message
    assert "\n" not in message and len(message) < 400, message
    assert refused.after == refused.before


@pytest.mark.parametrize("entry", list(ENTRY_POINTS.calls))
def test_arguments_nested_to_the_limit_are_stored_whole(
    target: Target, entry: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = nested(MAX_NESTING)
    kwargs = {"k": nested(MAX_NESTING - 1)}  # the keyword object is the first level
    if entry in _CLI:
        words = ("--args", json.dumps(args), "--kwargs", json.dumps(kwargs))
        argv = ["--storage-url", target.url, "--prefix", target.prefix]
        if entry == "cli schedule":
            argv += ["schedule", "tasks.ok", "--countdown", "120", "--json", *words]
        else:
            argv += ["recurring", "add", "nightly", "tasks.ok", "--every", "60", *words]
        code, _, err = run_cli(argv, capsys)
        assert code == 0, err
    elif entry == "Client.recurring.save":
        Client(target.storage).recurring.save(
            "nightly", "tasks.ok", every=60, args=args, kwargs=kwargs
        )
    elif entry.startswith("plugin"):
        task = _plugin_task(producer("hostile", target))
        call = task.schedule if entry == "plugin task.schedule" else task.apply_async
        call(args, kwargs, countdown=120)
    else:
        spec = JobSpec("tasks.ok", args=args, kwargs=kwargs, countdown=120)
        Client(target.storage).schedule_many([spec])
    if "recurring" in entry:
        (stored,) = Client(target.storage).recurring.list()
    else:
        (stored,) = Client(target.storage).list()
    assert (stored.args, stored.kwargs) == (args, kwargs)


# -- listing pages: checked before any storage call -------------------------------------------


@pytest.mark.parametrize(
    "words",
    [
        ("list", "--limit", str(10**20)),
        ("list", "--offset", str(10**20)),
        ("list", "--limit", str(MAX_PAGE + 1)),
        ("recurring", "list", "--limit", str(10**20)),
        ("recurring", "list", "--offset", str(10**20)),
    ],
)
def test_a_page_past_the_limit_is_refused_before_storage_is_asked(
    target: Target, words: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--storage-url", target.url, "--prefix", target.prefix, *words]
    line = _one_error_line(*run_cli(argv, capsys)[::2])
    assert str(MAX_PAGE) in line and words[-2] in line, line


@pytest.mark.parametrize(("limit", "offset"), [(10**20, 0), (10, 10**20), (0, 0), (5, -1)])
def test_client_list_refuses_a_page_past_the_limit_by_name(
    target: Target, limit: int, offset: int
) -> None:
    with pytest.raises(InvalidJobError, match=str(MAX_PAGE)):
        Client(target.storage).list(limit=limit, offset=offset)


@pytest.mark.parametrize(("limit", "offset"), [(10**20, 0), (10, 10**20), (MAX_PAGE + 1, 0)])
def test_recurring_list_refuses_a_page_past_the_limit_by_name(
    target: Target, limit: int, offset: int
) -> None:
    with pytest.raises(InvalidJobError, match=str(MAX_PAGE)):
        Client(target.storage).recurring.list(limit=limit, offset=offset)


@pytest.mark.parametrize(
    ("limit", "offset"),
    [(10**20, 0), (10, 10**20), (10**5000, 0)],
    ids=["limit 10**20", "offset 10**20", "limit 10**5000"],
)
def test_every_backend_refuses_a_page_past_the_limit_itself(
    storage: Storage, limit: int, offset: int
) -> None:
    """The storage API called directly: its own bound, never the driver's error text."""
    with pytest.raises(InvalidArgumentError, match=str(MAX_PAGE)):
        list_jobs(storage, None, limit, offset)
    with pytest.raises(InvalidArgumentError, match=str(MAX_PAGE)):
        storage.list_recurring(limit, offset)


def test_the_largest_page_is_served(target: Target) -> None:
    client = Client(target.storage)
    client.schedule("tasks.ok", countdown=60)
    assert len(client.list(limit=MAX_PAGE)) == 1
    assert client.list(limit=1, offset=MAX_PAGE) == []


# -- ids that cannot exist --------------------------------------------------------------------

IMPOSSIBLE_IDS = ["a\x00b", "a\nb", "a\ud800", "a b", "", "x" * 5000]

#: A storage's calls that take a job id, each with its answer for an id it does not hold:
#: ``None`` (not found) or ``False`` (nothing done).
STORAGE_JOB_ID_CALLS: dict[str, tuple[Callable[[Storage, str], object], object]] = {
    "get_job": (lambda storage, job_id: storage.get_job(job_id), None),
    "cancel": (lambda storage, job_id: storage.cancel(job_id), False),
    "reschedule": (lambda storage, job_id: storage.reschedule(job_id, storage.now() + 60), False),
}
#: The same calls through the public API too.
JOB_ID_CALLS = {
    **STORAGE_JOB_ID_CALLS,
    "Client.get": (lambda storage, job_id: Client(storage).get(job_id), None),
    "Client.cancel": (lambda storage, job_id: Client(storage).cancel(job_id), False),
    "Client.reschedule": (
        lambda storage, job_id: Client(storage).reschedule(job_id, countdown=60),
        False,
    ),
}
#: The calls that take a recurring id, in the storage and through the public API.
RECURRING_ID_CALLS: dict[str, tuple[Callable[[Storage, str], object], object]] = {
    "get_recurring": (lambda storage, rid: storage.get_recurring(rid), None),
    "remove_recurring": (lambda storage, rid: storage.remove_recurring(rid), False),
    "set_recurring_enabled": (
        lambda storage, rid: storage.set_recurring_enabled(rid, False, None),
        False,
    ),
    "Client.recurring.get": (lambda storage, rid: Client(storage).recurring.get(rid), None),
    "Client.recurring.remove": (lambda storage, rid: Client(storage).recurring.remove(rid), False),
}


def _not_found(
    storage: Storage,
    the_id: str,
    calls: dict[str, tuple[Callable[[Storage, str], object], object]],
) -> None:
    """Each of ``calls`` answers for ``the_id`` as for an id that is not there."""
    for name, (call, answer) in calls.items():
        assert call(storage, the_id) is answer, name


@pytest.mark.parametrize("job_id", IMPOSSIBLE_IDS)
def test_an_id_that_cannot_exist_is_not_found_on_every_backend(
    storage: Storage, job_id: str
) -> None:
    _not_found(storage, job_id, JOB_ID_CALLS)


@pytest.mark.parametrize("recurring_id", IMPOSSIBLE_IDS)
def test_a_recurring_id_that_cannot_exist_is_not_found_on_every_backend(
    storage: Storage, recurring_id: str
) -> None:
    _not_found(storage, recurring_id, RECURRING_ID_CALLS)
    with pytest.raises(InvalidJobError, match="does not exist"):
        Client(storage).recurring.pause(recurring_id)


@pytest.mark.parametrize("job_id", IMPOSSIBLE_IDS)
def test_an_id_that_cannot_exist_is_not_found_in_a_sharded_store(
    tmp_path: Path, job_id: str
) -> None:
    store = storage_adapters.from_url(f"sqlite:///{tmp_path / 's.db'}", prefix="t1", shards=3)
    store.setup()
    try:
        _not_found(store, job_id, STORAGE_JOB_ID_CALLS)
    finally:
        store.close()


@pytest.mark.parametrize(
    ("command", "options", "shown"),
    [
        (("show",), (), "a\\nb"),
        (("cancel",), (), "a\\nb"),
        (("reschedule",), ("--countdown", "60"), "a\\nb"),
        (("show",), (), "a\\x00b"),
        (("cancel",), (), "a\\x1b[31mb"),
        (("recurring", "remove"), (), "a\\nb"),
        (("recurring", "pause"), (), "a\\x1b[31mb"),
    ],
)
def test_the_command_line_says_an_impossible_id_is_not_found_on_one_line(
    target: Target,
    command: tuple[str, ...],
    options: tuple[str, ...],
    shown: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    raw = shown.replace("\\n", "\n").replace("\\x00", "\x00").replace("\\x1b", "\x1b")
    argv = ["--storage-url", target.url, "--prefix", target.prefix, *command, raw, *options]
    code, out, err = run_cli(argv, capsys)
    assert code in (1, 2), out + err  # not found (pause: the error that it does not exist)
    said = [line for line in (out + err).splitlines() if shown in line]
    assert len(said) == 1, out + err
    assert "\x1b" not in out + err and "\x00" not in out + err


@pytest.mark.postgresql
def test_an_unreachable_postgresql_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """libpq words a refused connection over two lines, the second indented by a tab."""
    store = storage_adapters.from_url("postgresql://postgres@127.0.0.1:1/test", prefix="t1")
    try:
        with pytest.raises(StorageUnavailableError) as error:
            store.count_by_state()
    finally:
        store.close()
    assert "\n" not in str(error.value) and "\t" not in str(error.value), str(error.value)
    assert "Connection refused" in str(error.value)
    argv = ["--storage-url", "postgresql://postgres@127.0.0.1:1/test", "list"]
    line = _one_error_line(*run_cli(argv, capsys)[::2])
    assert "Connection refused Is the server running" in line, line


# -- time zones that are not IANA zone names ---------------------------------------------------

MACHINE_ZONES = ["localtime", "Factory", "posixrules", "posix/Europe/Paris", "right/UTC"]


@pytest.mark.parametrize("zone", MACHINE_ZONES)
def test_a_zone_key_that_is_no_iana_zone_is_refused_for_recurring_jobs(
    target: Target, zone: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = target.snapshot()
    jobs = Client(target.storage).recurring
    message = _refused(lambda: jobs.save("nightly", "tasks.ok", "0 9 * * *", timezone=zone))
    assert repr(zone) in message, message
    argv = ["--storage-url", target.url, "--prefix", target.prefix, "recurring", "add"]
    words = ["nightly", "tasks.ok", "--cron", "0 9 * * *", "--timezone", zone]
    line = _one_error_line(*run_cli([*argv, *words], capsys)[::2])
    assert repr(zone) in line, line
    assert target.snapshot() == before


def test_the_dashboard_offers_only_iana_zones() -> None:
    offered = set(zone_names())
    assert {"UTC", "Europe/Berlin", "America/New_York"} <= offered
    assert not offered & set(MACHINE_ZONES)
