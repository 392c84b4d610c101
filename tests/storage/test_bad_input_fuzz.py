"""Bad input, fuzzed: every rejection is a clear error and leaves the store unchanged.

Covers what the client tests do not: cron strings, time zones, dates and caps of recurring jobs,
storage URLs, key/table prefixes, and the command line. TLS options are passed through to the
drivers (``rediss://``, PostgreSQL ``sslmode``), shown here against servers without TLS.
"""

from __future__ import annotations

import string
import uuid
from datetime import timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import storage_adapters
from parallel_scheduler import Client, ConfigurationError, InvalidJobError, Settings
from parallel_scheduler.cli import main
from storage_adapters import InvalidIdentifierError, InvalidStorageURLError, Storage
from tests.conftest import POSTGRESQL_URL, REDIS_URL, require_server

fuzz = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
cron_fields = st.text(alphabet=string.digits + "*/,-LW#? abcxyz", min_size=0, max_size=30)


def stored(storage: Storage) -> tuple[int, int]:
    return storage.count_recurring(), sum(storage.count_by_state().values())


@fuzz
@given(
    cron=st.one_of(cron_fields, st.text(max_size=40)),
    zone=st.one_of(
        st.sampled_from(["UTC", "Europe/Berlin", "Mars/Base", ""]), st.text(max_size=20)
    ),
    cap=st.integers(min_value=-5, max_value=5),
)
def test_recurring_input_is_saved_whole_or_refused_cleanly(
    storage: Storage, cron: str, zone: str, cap: int
) -> None:
    client = Client(storage)
    before = stored(storage)
    try:
        client.recurring.save(
            "fuzz", "tasks.f", cron, timezone=zone, misfire_cap=cap, mode="upsert"
        )
    except InvalidJobError as exc:
        assert str(exc)  # names the problem
        assert stored(storage) == before
    else:
        saved = client.recurring.get("fuzz")
        assert saved is not None and saved.schedule.cron == cron and cap >= 1


@fuzz
@given(
    when=st.one_of(
        st.fixed_dictionaries({"eta": st.floats(allow_nan=True, allow_infinity=True)}),
        st.fixed_dictionaries({"countdown": st.floats(allow_nan=True, allow_infinity=True)}),
        st.fixed_dictionaries(
            {"eta": st.datetimes(timezones=st.timezones(), allow_imaginary=False)}
        ),
    ),
    task=st.one_of(st.just("tasks.f"), st.text(max_size=12)),
    queue=st.one_of(st.none(), st.text(max_size=8)),
)
def test_a_job_is_stored_inside_the_range_or_refused_by_name(
    storage: Storage, when: dict[str, Any], task: str, queue: str | None
) -> None:
    """Whatever comes in, what is stored can always be listed and shown: no row is ever flagged."""
    client = Client(storage)
    before = stored(storage)
    options = {} if queue is None else {"queue": queue}
    job_id = uuid.uuid4().hex  # examples share the store: each adds its own job
    try:
        client.schedule(task, job_id=job_id, **when, **options)
    except InvalidJobError as exc:
        assert str(exc)
        assert stored(storage) == before
    else:
        job = client.get(job_id)
        assert job is not None and job.problem is None
        assert job.task == task and task == task.strip() and task.isprintable()
        job.due_at.astimezone(timezone(timedelta(hours=-12))).isoformat()
        assert all(j.problem is None for j in client.list(limit=1000))


@fuzz
@given(
    url=st.one_of(st.text(max_size=60), st.from_regex(r"[a-z+]{2,12}://[^ ]{0,30}", fullmatch=True))
)
def test_storage_urls_are_parsed_or_refused_with_a_clear_error(url: str) -> None:
    try:
        storage_adapters.urls.scheme_of(url)
    except InvalidStorageURLError as exc:
        assert "URL" in str(exc) or "url" in str(exc)


@fuzz
@given(prefix=st.text(max_size=50))
def test_prefixes_are_safe_identifiers_or_refused(prefix: str) -> None:
    try:
        storage_adapters.validate_prefix(prefix)
    except InvalidIdentifierError as exc:
        assert "prefix" in str(exc)
    else:
        assert prefix.isidentifier() and prefix.isascii() and len(prefix) <= 40


@fuzz
@given(prefix=st.text(max_size=50))
def test_settings_refuse_unsafe_prefixes_by_name(prefix: str) -> None:
    try:
        Settings(prefix=prefix)
    except ConfigurationError as exc:
        assert "prefix" in str(exc)


@fuzz
@given(
    args=st.sampled_from(["[1]", "{}", "nope", "[1,", '"x"', "[NaN]"]),
    countdown=st.sampled_from(["5", "-1", "nan", "inf", "x", "1e400"]),
    job_id=st.text(max_size=30),
)
def test_the_cli_refuses_bad_input_and_writes_nothing(
    tmp_path: Path, args: str, countdown: str, job_id: str
) -> None:
    url = f"sqlite:///{tmp_path / 'fuzz.db'}"
    store = storage_adapters.from_url(url)
    store.setup()
    before = stored(store)
    argv = ["--storage-url", url, "schedule", "tasks.f", "--args", args, "--countdown", countdown]
    try:
        code = main([*argv, "--id", job_id])
    except SystemExit as exit_info:  # argparse refuses malformed values itself, with usage
        code = int(exit_info.code or 0)
    if code != 0:
        assert stored(store) == before
    store.close()


@pytest.mark.redis
def test_rediss_is_passed_through_to_the_driver() -> None:
    # The shared Redis speaks no TLS: a rediss:// URL must reach redis-py's TLS layer and fail
    # there, with a clear error and no password in it, rather than be silently downgraded.
    # (The server waits for a line the TLS hello never ends, so the handshake fails by redis-py's
    # socket timeout: 30 s by default, 1 s from the URL's query, which goes to redis-py as is.)
    require_server("redis")
    url = REDIS_URL.replace("redis://", "rediss://:s3cret@", 1)
    url += ("&" if "?" in url else "?") + "socket_timeout=1"
    storage = storage_adapters.from_url(url, prefix="tlsprobe")
    with pytest.raises(storage_adapters.StorageError) as error:
        storage.setup()
    assert "s3cret" not in str(error.value)
    storage.close()


@pytest.mark.postgresql
def test_sslmode_is_passed_through_to_the_driver() -> None:
    require_server("postgresql")
    separator = "&" if "?" in POSTGRESQL_URL else "?"
    refused = storage_adapters.from_url(f"{POSTGRESQL_URL}{separator}sslmode=require", prefix="tls")
    with pytest.raises(storage_adapters.StorageError, match=r"(?i)ssl"):
        refused.setup()
    refused.close()
    allowed = storage_adapters.from_url(f"{POSTGRESQL_URL}{separator}sslmode=disable", prefix="tls")
    assert allowed.now() > 0
    allowed.close()
