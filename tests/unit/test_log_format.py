"""The two log formats: plain lines read as prose, JSON lines are one object per record with the
event's fields; ``configure_logging`` never doubles a handler someone else installed."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

import pytest

from parallel_scheduler.errors import ConfigurationError
from parallel_scheduler.log_format import (
    JsonFormatter,
    PlainFormatter,
    configure_logging,
    event,
    formatter_for,
    pass_event,
    use_json_for_package,
)
from parallel_scheduler.settings import Settings


def _record(message: str, *args: object, **extra: object) -> logging.LogRecord:
    logger = logging.getLogger("parallel_scheduler.test")
    return logger.makeRecord(
        logger.name, logging.INFO, __file__, 1, message, args, None, None, extra
    )


def test_a_json_line_has_time_level_logger_message_and_the_event_fields() -> None:
    record = _record("pass released %d of %d", 2, 3, **event(released=2, fetched=3))
    line = JsonFormatter().format(record)
    parsed = json.loads(line)
    assert parsed["level"] == "INFO"
    assert parsed["logger"] == "parallel_scheduler.test"
    assert parsed["message"] == "pass released 2 of 3"
    assert parsed["released"] == 2 and parsed["fetched"] == 3
    moment = datetime.fromisoformat(parsed["time"].replace("Z", "+00:00"))
    assert parsed["time"].endswith("Z") and moment.timestamp() == pytest.approx(
        record.created, abs=1e-3
    )


def test_an_event_field_never_replaces_the_lines_own_keys() -> None:
    parsed = json.loads(JsonFormatter().format(_record("words", **event(message="x", level=1))))
    assert parsed["message"] == "words" and parsed["level"] == "INFO"
    assert parsed["event_message"] == "x" and parsed["event_level"] == 1


def test_an_exception_is_one_string_field_on_the_same_line() -> None:
    logger = logging.getLogger("parallel_scheduler.test")
    try:
        raise RuntimeError("boom\nsecond line")
    except RuntimeError:
        record = logger.makeRecord(
            logger.name, logging.ERROR, __file__, 1, "failed", (), sys.exc_info()
        )
    line = JsonFormatter().format(record)
    assert "\n" not in line
    parsed = json.loads(line)
    assert "Traceback" in parsed["exc_info"] and "RuntimeError: boom" in parsed["exc_info"]


def test_a_value_json_cannot_hold_is_shown_as_text() -> None:
    parsed = json.loads(JsonFormatter().format(_record("x", **event(where=object))))
    assert parsed["where"] == str(object)


def test_plain_lines_show_the_words_only() -> None:
    line = PlainFormatter().format(_record("pass released %d", 2, **event(released=2)))
    assert line.endswith(" INFO parallel_scheduler.test: pass released 2")
    assert "{" not in line


def test_a_pass_event_leaves_out_the_duration_it_does_not_know_yet() -> None:
    assert pass_event({"released": 1, "duration": 0.0}) == {"event": {"released": 1}}


def test_an_unknown_format_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="log format must be one of plain, json, not 'xml'"):
        formatter_for("xml")
    with pytest.raises(ConfigurationError, match="log_format must be one of"):
        Settings(log_format="xml")  # type: ignore[arg-type]


@contextmanager
def bare_root() -> Iterator[logging.Logger]:
    """The root logger with no handlers (as in a fresh process; pytest adds its own for each
    test phase, so this is entered in the test body), restored afterwards."""
    root = logging.getLogger()
    saved, level = root.handlers[:], root.level
    root.handlers.clear()
    try:
        yield root
    finally:
        root.handlers[:] = saved
        root.setLevel(level)


def test_configure_logging_installs_one_handler_and_switches_its_format(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with bare_root() as root:
        assert configure_logging("INFO", "plain")
        assert configure_logging("INFO", "json")  # the settings named another format
        assert len(root.handlers) == 1
        logging.getLogger("parallel_scheduler.test").info("hello %s", "there", extra=event(n=1))
    (line,) = capsys.readouterr().err.splitlines()
    assert json.loads(line)["message"] == "hello there" and json.loads(line)["n"] == 1


def test_configure_logging_leaves_a_root_configured_by_someone_else_alone() -> None:
    with bare_root() as root:
        theirs = logging.StreamHandler(io.StringIO())
        root.addHandler(theirs)
        root.setLevel(logging.WARNING)
        assert not configure_logging("DEBUG", "json")
        assert root.handlers == [theirs] and root.level == logging.WARNING


def test_json_for_the_package_only_leaves_other_loggers_as_they_were() -> None:
    celery_stream = io.StringIO()
    celery_handler = logging.StreamHandler(celery_stream)
    celery_handler.setFormatter(logging.Formatter("[%(levelname)s] %(message)s"))
    package = logging.getLogger("parallel_scheduler")
    with bare_root() as root:
        root.addHandler(celery_handler)
        root.setLevel(logging.INFO)
        try:
            use_json_for_package()
            use_json_for_package()  # twice: still one handler, one line per record
            logging.getLogger("parallel_scheduler.x").info("ours", extra=event(k="v"))
            logging.getLogger("celery.worker").info("theirs")
        finally:
            for handler in package.handlers[:]:
                package.removeHandler(handler)
            package.propagate = True
    ours, theirs = celery_stream.getvalue().splitlines()
    assert json.loads(ours)["message"] == "ours" and json.loads(ours)["k"] == "v"
    assert theirs == "[INFO] theirs"
