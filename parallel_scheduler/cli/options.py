"""Argument types and the settings options of the command line.

The settings options are derived from ``Settings`` itself (``SETTING_KINDS``): every field is an
option ``--name-with-dashes`` (booleans as ``--x/--no-x``), read with the same reader as its
``PARALLEL_SCHEDULER_<NAME>`` variable, so a new setting reaches the command line the moment it is
declared and no hand-kept list can forget one (``run --fast-publish`` once was dropped that way).

Instants, countdowns and intervals are checked against the one documented range in ``limits``
while the arguments are parsed, so a value such as ``--countdown 1e300`` is refused with one line
before anything is opened; ``Client`` checks again on the storage clock.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

import storage_adapters
from parallel_scheduler import ranges
from parallel_scheduler.errors import InvalidJobError
from parallel_scheduler.settings import SETTING_KINDS, SettingKind

__all__ = [
    "GLOBAL_SETTINGS",
    "add_setting_options",
    "count_arg",
    "countdown_arg",
    "instant_arg",
    "interval_arg",
    "json_arg",
    "option_name",
    "overrides",
]

#: Settings every command needs (where the store is, how many shards it has, how it logs), so
#: they come before the command name (``run`` also takes ``--log-format`` after it).
GLOBAL_SETTINGS = ("storage_url", "prefix", "shards", "log_format")


_METAVARS = {"integer": "N", "number": "NUMBER", "string": "TEXT"}


def option_name(setting: str) -> str:
    return "--" + setting.replace("_", "-")


def _text_reader(kind: SettingKind) -> Callable[[str], Any]:
    def read(raw: str) -> Any:
        try:
            return kind.parse(raw.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{raw!r} is not a valid {kind.label}") from None

    read.__name__ = kind.label  # argparse names the type in its own messages
    return read


def add_setting_options(parser: argparse.ArgumentParser, names: Iterable[str]) -> None:
    """One option per setting in ``names``; an option left out stays ``None`` (not given), so
    the environment, the Celery configuration and the defaults apply as ``Settings.load`` says."""
    wanted = set(names)
    for kind in SETTING_KINDS:
        if kind.name not in wanted:
            continue
        # storage_url's setting default is None (unset) because the commands fall back to the
        # SQLite file; the help shows the URL that is really used.
        default = storage_adapters.DEFAULT_URL if kind.name == "storage_url" else kind.default
        help_text = (
            f"{kind.label}; default {default!r} [env {kind.env_var}, Celery {kind.celery_key}]"
        )
        if kind.is_flag:
            parser.add_argument(
                option_name(kind.name),
                action=argparse.BooleanOptionalAction,
                default=None,
                help=help_text,
            )
            continue
        parser.add_argument(
            option_name(kind.name),
            type=_text_reader(kind),
            choices=kind.choices,
            default=None,
            metavar=None if kind.choices else _METAVARS.get(kind.label, "VALUE"),
            help=help_text,
        )


def overrides(ns: argparse.Namespace) -> dict[str, Any]:
    """The settings given on the command line (the options a command has and the user set)."""
    return {
        kind.name: getattr(ns, kind.name)
        for kind in SETTING_KINDS
        if getattr(ns, kind.name, None) is not None
    }


def json_arg(kind: type, field: str | None = None) -> Callable[[str], Any]:
    """A JSON value of ``kind`` for ``field`` (default: ``args`` for a list, ``kwargs`` for an
    object), nested no deeper than ``ranges.MAX_NESTING``: what ``Client`` checks, refused here
    before anything is opened."""
    name = field or ("args" if kind is list else "kwargs")

    def parse(raw: str) -> Any:
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
        except RecursionError:  # nested some thousand levels deep: past any limit
            too_deep = ranges.too_deep(name, ranges.shown(raw))
            raise argparse.ArgumentTypeError(str(too_deep)) from None
        if not isinstance(value, kind):
            raise argparse.ArgumentTypeError(f"must be a JSON {kind.__name__}")
        try:
            ranges.check_nesting(name, value)
        except InvalidJobError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return value

    return parse


def _number(raw: str, what: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a number of {what}") from None


def countdown_arg(raw: str) -> float:
    """Seconds from now, landing inside the valid range (on this host's clock)."""
    seconds = _number(raw, "seconds")
    if math.isinf(seconds) and "inf" not in raw.lower():  # finite, but past a float's range
        too_late = ranges.lands_too_late("countdown", ranges.shown(raw.strip()))
        raise argparse.ArgumentTypeError(str(too_late))
    try:
        ranges.check_countdown("countdown", seconds, time.time())
    except InvalidJobError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return seconds


def interval_arg(raw: str) -> float:
    seconds = _number(raw, "seconds")
    try:
        return ranges.check_interval("every", seconds)
    except InvalidJobError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def instant_arg(raw: str) -> datetime:
    """An ISO 8601 date-time with a time zone (``Z`` allowed), inside the valid range."""
    text = raw.strip()
    try:
        moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not an ISO 8601 date-time") from None
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{raw!r} has no time zone (add +00:00 or Z)")
    try:
        epoch = moment.timestamp()
    except (OverflowError, ValueError):
        epoch = float("inf")  # beyond what a timestamp can hold: outside the range as well
    try:
        ranges.check_instant(f"{raw} =", epoch)  # "<text> = <epoch> is outside the range"
    except InvalidJobError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return moment


def count_arg(low: int) -> Callable[[str], int]:
    """An integer from ``low`` to ``ranges.MAX_PAGE`` (``--limit``, ``--offset``)."""

    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{raw!r} is not an integer") from None
        if not low <= value <= ranges.MAX_PAGE:  # checked before any storage call
            raise argparse.ArgumentTypeError(
                f"{ranges.shown(raw)} must be from {low} to {ranges.MAX_PAGE}"
            )
        return value

    return parse


def seconds_arg(raw: str) -> float:
    """A parser of a number of seconds from 0 to ``ranges.MAX_INTERVAL``; refused by value
    otherwise (``purge --older-than``, ``--max-lag``)."""
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a number of seconds") from None
    if not math.isfinite(value) or not 0 <= value <= ranges.MAX_INTERVAL:
        raise argparse.ArgumentTypeError(f"{raw!r} must be 0 to {ranges.MAX_INTERVAL:.0f} seconds")
    return value


def add_max_lag(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--max-lag SECONDS``: the lag a health judgement allows (``status``, ``exporter``)."""
    parser.add_argument("--max-lag", type=seconds_arg, metavar="SECONDS", help=help_text)
