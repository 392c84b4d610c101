"""Showing stored rows to people on a terminal: tables and listings of the JSON views.

The views themselves (``job_view``, ``recurring_view``, ...) live in ``parallel_scheduler.views``,
the one home of each shape, shared with the dashboard's HTTP API: every stored row is shown, and a
row that cannot be read is flagged in its ``problem``, so ``list``, ``show``, ``status`` and
``recurring list`` never break on the row they exist to find.

Tables keep ids whole: on a terminal the id column folds instead of cutting, and when the output
is piped it is tab-separated text with nothing shortened, so an id copied into ``cancel`` works.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

__all__ = ["print_listing", "print_table"]


def _cell(value: object) -> str:
    """One line of text: a tab or newline inside a value would break a piped row apart."""
    text = "-" if value is None or value == "" else str(value)
    return " ".join(text.split()) if any(c in text for c in "\t\r\n") else text


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """A table on a terminal; tab-separated lines, nothing shortened, when piped. A row whose
    last column (``problem``) says something is shown in yellow on a terminal."""
    cells = [[_cell(value) for value in row] for row in rows]
    if not sys.stdout.isatty():
        for line in [list(headers), *cells]:
            print("\t".join(line))
        return
    table = Table(*headers)
    for column in table.columns:
        column.overflow = "fold"  # wrap long ids onto more lines, never cut them with "…"
    for line in cells:
        flagged = headers[-1] == "problem" and line[-1] != "-"
        table.add_row(*line, style="yellow" if flagged else None)
    Console(markup=False, highlight=False).print(table)


def print_listing(
    views: Sequence[dict[str, Any]],
    columns: Mapping[str, str | Callable[[dict[str, Any]], object]],
    *,
    as_json: bool,
) -> None:
    """A listing of views: as JSON, or as a table of ``columns`` (header: the view's key, or a
    function of the view)."""
    if as_json:
        print(json.dumps(list(views), indent=2))
        return
    cells = [
        tuple(column(view) if callable(column) else view[column] for column in columns.values())
        for view in views
    ]
    print_table(tuple(columns), cells)
