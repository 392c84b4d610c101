"""The line a scenario's Markdown summary ends with: what its figures can be traced to."""

from __future__ import annotations

from typing import Any


def provenance_line(document: dict[str, Any]) -> str:
    """The commit (``(dirty)`` with uncommitted changes) and the load average at the start and
    at the end of the run ``document`` records, on a line of its own after a blank one."""
    env = document["environment"]
    return (
        f"\ncommit {env['git_commit'][:12]}{' (dirty)' if env['git_dirty'] else ''}, "
        f"load average at start {env['load_average_at_start']}, "
        f"at end {document['load_average_at_end']}"
    )
