"""Settings: precedence of sources and validation with clear errors."""

from __future__ import annotations

import pytest

from parallel_scheduler import ConfigurationError, Settings


def test_defaults() -> None:
    settings = Settings.load(environ={})
    assert settings.max_degree_of_parallelism == 10
    assert settings.batch_size == 1000
    assert settings.release_mode == "batch"
    assert settings.fast_publish is True  # where the broker has a fast path (wiring.py)
    assert settings.storage_url is None
    assert settings.shards == 1  # one store, exactly as before shards existed


def test_arguments_beat_environment_beat_celery_config() -> None:
    environ = {
        "PARALLEL_SCHEDULER_BATCH_SIZE": "200",
        "PARALLEL_SCHEDULER_MAX_DEGREE_OF_PARALLELISM": "7",
    }
    celery_conf = {
        "parallel_scheduler_batch_size": 300,
        "parallel_scheduler_max_degree_of_parallelism": 3,
        "parallel_scheduler_poll_interval": 0.5,
    }
    settings = Settings.load(
        {"max_degree_of_parallelism": 20}, environ=environ, celery_conf=celery_conf
    )
    assert settings.max_degree_of_parallelism == 20  # argument
    assert settings.batch_size == 200  # environment
    assert settings.poll_interval == 0.5  # Celery configuration
    assert settings.lock_lease == 10.0  # default


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("max_degree_of_parallelism", 0, "max_degree_of_parallelism"),
        ("batch_size", -5, "batch_size"),
        ("poll_interval", float("nan"), "poll_interval"),
        ("lock_lease", float("inf"), "lock_lease"),
        ("release_mode", "fastest", "release_mode"),
        ("prefix", "bad prefix;", "prefix"),
        ("prefix", "", "prefix"),
        ("storage_url", "mongodb://x", "scheme"),
        ("storage_url", "not a url", "malformed"),
        ("shards", 0, "shards must be an integer from 1 to 1024"),
        ("shards", 1025, "shards must be an integer from 1 to 1024"),
        ("shards", True, "shards"),
        ("max_send_attempts", 0, "max_send_attempts must be an integer from 1 to 100"),
        ("max_send_attempts", 101, "max_send_attempts must be an integer from 1 to 100"),
        ("max_send_attempts", 2.5, "max_send_attempts"),
    ],
)
def test_bad_values_name_the_setting(name: str, value: object, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Settings.load({name: value}, environ={})


def test_bad_environment_value_names_the_variable() -> None:
    with pytest.raises(ConfigurationError, match="PARALLEL_SCHEDULER_BATCH_SIZE"):
        Settings.load(environ={"PARALLEL_SCHEDULER_BATCH_SIZE": "lots"})


def test_unknown_setting_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="batchsize"):
        Settings.load({"batchsize": 5}, environ={})


def test_describe_masks_the_password() -> None:
    settings = Settings(storage_url="postgresql://app:s3cret@db.example:5432/jobs")
    shown = settings.describe()["storage_url"]
    assert "s3cret" not in shown
    assert shown == "postgresql://app:***@db.example:5432/jobs"


def test_mask_url_hides_passwords_in_the_query_too() -> None:
    from storage_adapters import mask_url

    assert mask_url("unix:///tmp/redis.sock?db=0&password=s3cret") == (
        "unix:///tmp/redis.sock?db=0&password=***"
    )
    assert mask_url("redis://:s3cret@host:6379/0") == "redis://:***@host:6379/0"
    assert mask_url("postgresql://app@host/db") == "postgresql://app@host/db"
    # a URL whose scheme was left out still hides its password
    assert mask_url("app:hunter2@db/jobs") == "app:***@db/jobs"


def test_a_url_without_a_scheme_is_refused_with_its_password_masked() -> None:
    with pytest.raises(ConfigurationError) as caught:
        Settings(storage_url="app:hunter2@db/jobs")
    assert "hunter2" not in str(caught.value) and "expected scheme://" in str(caught.value)


@pytest.mark.parametrize(
    ("variable", "raw", "expected"),
    [
        ("PARALLEL_SCHEDULER_FAST_PUBLISH", "yes", True),
        ("PARALLEL_SCHEDULER_FALLBACK_TO_CELERY", "On", True),
        ("PARALLEL_SCHEDULER_FAST_PUBLISH", "0", False),
        ("PARALLEL_SCHEDULER_ETA_THRESHOLD", " 90 ", 90.0),
        ("PARALLEL_SCHEDULER_CONNECT_TIMEOUT", "0.5", 0.5),
        ("PARALLEL_SCHEDULER_SHARDS", "16", 16),
    ],
)
def test_environment_values_are_read_by_the_fields_type(
    variable: str, raw: str, expected: object
) -> None:
    name = variable.removeprefix("PARALLEL_SCHEDULER_").lower()
    assert getattr(Settings.load(environ={variable: raw}), name) == expected


def test_a_bad_boolean_names_the_variable_and_what_it_must_be() -> None:
    with pytest.raises(ConfigurationError, match=r"FAST_PUBLISH='maybe' is not a valid boolean"):
        Settings.load(environ={"PARALLEL_SCHEDULER_FAST_PUBLISH": "maybe"})


def test_a_setting_type_that_cannot_be_read_from_text_fails_loudly() -> None:
    # A new field whose type no reader handles is refused when the readers are derived (at
    # import), instead of being read as a string and failing later, far from its cause.
    from dataclasses import dataclass, fields

    from parallel_scheduler.settings import _kind_of

    @dataclass
    class WithAList:
        hosts: list[str]

    with pytest.raises(TypeError, match="hosts"):
        _kind_of(fields(WithAList)[0], list[str])
