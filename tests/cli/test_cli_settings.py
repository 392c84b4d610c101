"""Every setting reaches the scheduler from each of its three sources: the command-line option,
the ``PARALLEL_SCHEDULER_<NAME>`` variable and the Celery app's ``parallel_scheduler_<name>`` key.

One test over all ``Settings`` fields, so a setting cannot again be silently dropped by one source
(``run --fast-publish`` once was): it runs ``run --once`` for real (SQLite store, real Redis
broker) and reads the settings the pass ran with from its report. A new field without a sample
value here fails until one is added, and so is checked from all three sources too.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from parallel_scheduler import Settings
from parallel_scheduler.cli import main
from parallel_scheduler.cli.options import GLOBAL_SETTINGS, option_name
from parallel_scheduler.settings import SETTING_KINDS
from tests.conftest import REDIS_URL, require_server

#: A valid value unlike the default for every setting: (text for the option and the
#: environment variable, the value in a Celery configuration and in the effective Settings).
SAMPLES: dict[str, tuple[str, Any]] = {
    "storage_url": ("<url>", "<url>"),  # a second SQLite file, filled in per test
    "prefix": ("cli_alt", "cli_alt"),
    "max_degree_of_parallelism": ("3", 3),
    "batch_size": ("7", 7),
    "poll_interval": ("0.5", 0.5),
    "lock_lease": ("12.5", 12.5),
    "release_mode": ("per_job", "per_job"),
    "max_send_attempts": ("3", 3),
    "max_payload_bytes": ("4096", 4096),
    "eta_threshold": ("5.5", 5.5),
    "fast_publish": ("false", False),  # the opt-out, --no-fast-publish as an option
    "accept_time_messages": ("false", False),
    "connect_timeout": ("3.5", 3.5),
    "fallback_to_celery": ("true", True),
    "metrics_port": ("0", 0),
    "metrics_host": ("localhost", "localhost"),
    "retention": ("3600", 3600.0),
    "heartbeat_interval": ("2.5", 2.5),
    "shards": ("3", 3),
    "log_format": ("json", "json"),
    "lag_alert": ("90", 90.0),
    "record_outcomes": ("false", False),  # the opt-out
}
KINDS = {kind.name: kind for kind in SETTING_KINDS}


def _sample(name: str, tmp_path: Path) -> tuple[str, Any]:
    if name not in SAMPLES:
        pytest.fail(
            f"setting {name!r} has no sample value in {__name__}.SAMPLES: add a valid, "
            "non-default value so the test checks its option, variable and Celery key"
        )
    text, value = SAMPLES[name]
    if name == "storage_url":
        url = f"sqlite:///{tmp_path / 'other.db'}"
        return url, url
    return text, value


def _celery_app_module(tmp_path: Path, key: str, value: Any) -> str:
    module = f"ps_settings_{uuid.uuid4().hex[:12]}"
    (tmp_path / f"{module}.py").write_text(
        "from celery import Celery\n"
        f"app = Celery('settings-check', broker={REDIS_URL!r})\n"
        f"app.conf[{key!r}] = {value!r}\n"
    )
    return f"{module}:app"


def test_every_setting_has_a_sample_value() -> None:
    assert set(SAMPLES) == {f.name for f in fields(Settings)}


@pytest.mark.redis
@pytest.mark.parametrize("source", ["option", "environment", "celery"])
@pytest.mark.parametrize("name", [f.name for f in fields(Settings)])
def test_a_setting_from_each_source_reaches_the_scheduler(
    name: str,
    source: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    require_server("redis")
    kind = KINDS[name]
    text, expected = _sample(name, tmp_path)
    assert expected != kind.default, "a sample must differ from the default to prove anything"
    for other in SETTING_KINDS:
        monkeypatch.delenv(other.env_var, raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    before: list[str] = ["--log-level", "WARNING"]
    if name != "storage_url":  # every other case runs on a store of its own
        before += ["--storage-url", f"sqlite:///{tmp_path / 'base.db'}"]
    after: list[str] = []
    # Given the sample value from one source only
    if source == "option":
        if kind.is_flag:
            option = [option_name(name) if expected else "--no-" + option_name(name)[2:]]
        else:
            option = [option_name(name), text]
        if name in GLOBAL_SETTINGS:
            before += option
        else:
            after += option
        target = ["--broker-url", REDIS_URL]
    elif source == "environment":
        monkeypatch.setenv(kind.env_var, text)
        target = ["--broker-url", REDIS_URL]
    else:
        target = ["--app", _celery_app_module(tmp_path, kind.celery_key, expected)]
    # When one scheduler pass runs
    code = main([*before, "run", *target, "--once", *after])
    out, err = capsys.readouterr()
    # Then the pass ran with that value
    assert code == 0, err
    assert json.loads(out)["settings"][name] == expected


def test_help_shows_the_storage_url_really_used(capsys: pytest.CaptureFixture[str]) -> None:
    # The setting's own default is None (unset): the help names the SQLite file used instead.
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "default 'sqlite:///parallel-scheduler.db'" in text
    assert "default None" not in text
