"""How the scheduler's log lines look: plain prose for people, or one JSON object per line for a
log pipeline (``log_format`` setting, ``--log-format plain|json``).

A log call says what happened in words and hands its numbers over as ``extra={"event": {...}}``
(``event(...)`` builds that): the plain format shows only the words, the JSON format adds every
field of the event next to ``time``, ``level``, ``logger`` and ``message``, so a pipeline can
filter on ``released > 0`` without parsing prose.

``configure_logging`` is what every entry point calls (``parallel-scheduler``, ``celery -A proj
parallel-scheduler``). Like ``logging.basicConfig`` it leaves a root logger that someone else
configured alone (a test runner, an embedding application), so it never doubles their lines;
unlike it, it can be called again to switch format once the settings are known.
``use_json_for_package`` is the worker bootstep's variant: Celery owns the worker's root logger,
so JSON is applied to this package's loggers only, on the stream Celery's handler writes to.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import IO, Any, Literal, get_args

__all__ = [
    "LOG_FORMATS",
    "JsonFormatter",
    "LogFormat",
    "PlainFormatter",
    "configure_logging",
    "event",
    "formatter_for",
    "json_in_effect",
    "pass_event",
    "say",
    "use_json_for_package",
]

#: The log formats, once: ``Settings.log_format`` is typed by it, ``--log-format`` offers it.
LogFormat = Literal["plain", "json"]
LOG_FORMATS: tuple[str, ...] = get_args(LogFormat)
PACKAGE_LOGGER = "parallel_scheduler"
_PLAIN = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: The fields a log call may not set through its event: the JSON line's own keys.
_RESERVED = frozenset({"time", "level", "logger", "message", "exc_info", "stack_info"})


def event(**fields: Any) -> dict[str, Any]:
    """``extra=`` for a log call: its structured fields, shown by the JSON format."""
    return {"event": fields}


def pass_event(counts: Mapping[str, object]) -> dict[str, Any]:
    """``extra=`` for a pass's log line: its counts, without its duration (a pass logs before
    its duration is known; the metrics and ``status`` carry it)."""
    return event(**{str(name): value for name, value in counts.items() if name != "duration"})


class PlainFormatter(logging.Formatter):
    """``2026-12-01 03:44:10,123 INFO parallel_scheduler.x: what happened, in words``."""

    def __init__(self) -> None:
        super().__init__(_PLAIN)


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line: ``time`` (ISO 8601, UTC), ``level``,
    ``logger``, ``message``, the record's event fields, and ``exc_info`` (the traceback as one
    string, newlines escaped) when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, timezone.utc)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "event", None)
        if isinstance(fields, dict):
            for key, value in fields.items():
                # an event field never overwrites the line's own keys
                line[f"event_{key}" if key in _RESERVED else str(key)] = value
        if record.exc_info:
            line["exc_info"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack_info"] = self.formatStack(record.stack_info)
        return json.dumps(line, default=str, ensure_ascii=False)


def formatter_for(fmt: str) -> logging.Formatter:
    if fmt == "json":
        return JsonFormatter()
    if fmt == "plain":
        return PlainFormatter()
    raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, not {fmt!r}")


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at the time of the record, not the one at
    configuration time (a redirected or replaced stderr gets the line, a closed one is never
    written to)."""

    def __init__(self) -> None:
        super().__init__()

    @property
    def stream(self) -> IO[str]:
        return sys.stderr

    @stream.setter
    def stream(self, _value: IO[str]) -> None:
        pass


def configure_logging(level: str | int, fmt: str = "plain") -> bool:
    """Log to stderr at ``level`` in ``fmt`` (``plain`` or ``json``). Returns False, changing
    nothing, when the root logger already has handlers this module did not install."""
    formatter = formatter_for(fmt)
    root = logging.getLogger()
    ours = [h for h in root.handlers if isinstance(h, _StderrHandler)]
    if len(ours) != len(root.handlers):
        return False
    handler = ours[0] if ours else _StderrHandler()
    handler.setFormatter(formatter)
    if not ours:
        root.addHandler(handler)
    root.setLevel(level)
    return True


def json_in_effect() -> bool:
    """Whether ``configure_logging`` set JSON lines up, so a command's own error line should be
    a JSON object too rather than a bare line in the middle of a JSON stream."""
    return any(
        isinstance(h, _StderrHandler) and isinstance(h.formatter, JsonFormatter)
        for h in logging.getLogger().handlers
    )


def say(line: str, level: int = logging.ERROR, logger_name: str = PACKAGE_LOGGER) -> None:
    """A command's own line for the person (an error, a warning about a pass) on stderr: as a
    JSON log record when the logs are JSON, so a pipeline reading stderr gets only JSON objects,
    else as it reads. Shown at any log level: it is the command's answer, not a log record."""
    if json_in_effect():
        logger = logging.getLogger(logger_name)
        line = JsonFormatter().format(logger.makeRecord(logger_name, level, "", 0, line, (), None))
    print(line, file=sys.stderr)


def use_json_for_package(stream: IO[str] | None = None) -> logging.Handler:
    """JSON lines for this package's loggers only, on ``stream`` (default: the stream of the
    root logger's first stream handler, where Celery's worker writes its own lines, else the
    real stderr). The package's records stop propagating, so each is written once, as JSON;
    every other logger keeps its format. Called twice, it replaces its handler."""
    package = logging.getLogger(PACKAGE_LOGGER)
    for old in [h for h in package.handlers if getattr(h, "_parallel_scheduler_json", False)]:
        package.removeHandler(old)
    if stream is None:
        stream = next(
            (
                h.stream
                for h in logging.getLogger().handlers
                if isinstance(h, logging.StreamHandler) and not isinstance(h, _StderrHandler)
            ),
            sys.__stderr__ or sys.stderr,
        )
    handler: logging.StreamHandler[IO[str]] = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler._parallel_scheduler_json = True  # type: ignore[attr-defined]
    package.addHandler(handler)
    package.propagate = False
    return handler
