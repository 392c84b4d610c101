"""``recurring import FILE``: save many recurring jobs from a file, through
``RecurringJobs.save_many`` (every item validated before anything is written, then written a
chunk per round trip).

The file is JSON lines (one object per line; blank lines and lines starting with ``#`` are
skipped), or YAML (a list of objects) when its name ends in ``.yaml`` or ``.yml``; ``-`` reads
JSON lines from standard input. Each object holds ``save``'s arguments: ``id``, ``task``,
``cron`` or ``every`` (seconds), and optionally ``args``, ``kwargs``, ``timezone``, ``start``
and ``end`` (ISO 8601 with a zone), ``misfire_policy``, ``misfire_cap``, ``misfire_grace``,
``jitter``, ``catch_up_window``, ``max_runs``, ``overlap``, ``overlap_timeout``,
``pause_after_failures``, ``enabled`` and send options such as ``queue``.
Errors name the line (JSON lines) or the item (YAML).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from parallel_scheduler.cli.opening import open_client
from parallel_scheduler.cli.options import instant_arg
from parallel_scheduler.errors import InvalidItemError, InvalidJobError
from storage_adapters.checks.values import SAVE_MODES

__all__ = ["add_import_command"]


def add_import_command(actions: Any) -> None:
    """``recurring import`` under the ``recurring`` command's actions."""
    command = actions.add_parser(
        "import",
        help="save many recurring jobs from a JSON lines or YAML file",
        description=__doc__.split("\n\n")[1].replace("``", "'") if __doc__ else None,
    )
    command.add_argument("file", metavar="FILE", help="JSON lines, .yaml/.yml, or - for stdin")
    command.add_argument(
        "--mode",
        choices=SAVE_MODES,
        default="upsert",
        help="create only new ids, update only existing ones, or upsert (default: both)",
    )
    command.add_argument(
        "--dry-run", action="store_true", help="validate every item and write nothing"
    )
    command.set_defaults(handler=cmd_recurring_import)


class ImportFileError(InvalidJobError):
    """The file cannot be read as recurring jobs; the message names the line or item."""


def read_items(path: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The file's items and, per item, where it is (``line 3``, ``item 2``) for messages."""
    if path != "-" and Path(path).suffix.lower() in (".yaml", ".yml"):
        return _yaml_items(path)
    items: list[dict[str, Any]] = []
    places: list[str] = []
    for number, line in _lines(path):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            item = json.loads(text)
        except ValueError as exc:
            raise ImportFileError(f"{path}, line {number}: not JSON ({exc})") from None
        items.append(_converted(item, f"{path}, line {number}"))
        places.append(f"line {number}")
    return items, places


def _lines(path: str) -> Iterator[tuple[int, str]]:
    try:
        if path == "-":
            yield from enumerate(sys.stdin, start=1)
            return
        with open(path, encoding="utf-8") as lines:
            yield from enumerate(lines, start=1)
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportFileError(f"cannot read {path}: {exc}") from None


def _yaml_items(path: str) -> tuple[list[dict[str, Any]], list[str]]:
    try:
        import yaml  # type: ignore[import-untyped]
    except ImportError:
        raise ImportFileError(
            f"{path} is YAML, which needs PyYAML: pip install pyyaml (or give JSON lines)"
        ) from None
    try:
        with open(path, encoding="utf-8") as text:
            loaded = yaml.safe_load(text)
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportFileError(f"cannot read {path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ImportFileError(f"{path} is not valid YAML: {exc}") from None
    if loaded is None:
        loaded = []
    if not isinstance(loaded, list):
        raise ImportFileError(f"{path}: a YAML list of recurring jobs is expected")
    places = [f"item {n}" for n in range(1, len(loaded) + 1)]
    return [
        _converted(item, f"{path}, {place}") for item, place in zip(loaded, places, strict=True)
    ], places


def _converted(item: object, where: str) -> dict[str, Any]:
    """An item with its start and end read as date-times (the file holds ISO 8601 text)."""
    if not isinstance(item, dict):
        raise ImportFileError(f"{where}: an object is expected, not {type(item).__name__}")
    converted = dict(item)
    for name in ("start", "end"):
        value = converted.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            raise ImportFileError(f"{where}: {name} must be ISO 8601 text with a time zone")
        try:
            converted[name] = instant_arg(value)
        except argparse.ArgumentTypeError as exc:
            raise ImportFileError(f"{where}: {name} {exc}") from None
    return converted


def cmd_recurring_import(ns: argparse.Namespace) -> int:
    items, places = read_items(ns.file)
    with open_client(ns) as client:
        try:
            if ns.dry_run:
                client.recurring.check_many(items)
                print(f"{len(items)} recurring job(s) in {ns.file} are valid; nothing was written")
                return 0
            created = client.recurring.save_many(items, mode=ns.mode)
        except InvalidItemError as exc:
            raise ImportFileError(f"{ns.file}, {places[exc.position - 1]}: {exc}") from None
    new = sum(created)
    print(
        f"imported {len(created)} recurring job(s) from {ns.file} ({ns.mode}): "
        f"{new} created, {len(created) - new} replaced"
    )
    return 0
