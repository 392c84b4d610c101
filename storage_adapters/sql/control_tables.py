"""The tables of the release and recurring controls in the latest schema: the rate limits'
(``sql/rate_limits.py`` reads and writes it; migration 12, ``v12_rate_limits`` in
``sql/migrations_late.py``, creates it) and the calendars' (``sql/calendars.py``; migration 13),
apart so that ``sql/tables.py`` stays one module's size."""

from __future__ import annotations

import sqlalchemy as sa

from storage_adapters.checks.pauses import MAX_PAUSED_BY_LENGTH
from storage_adapters.sql.migrations_late import MAX_QUEUE_NAME_LENGTH, STATE_LENGTH

__all__ = ["build_calendars", "build_rate_limits"]


def build_rate_limits(prefix: str, metadata: sa.MetaData) -> sa.Table:
    """``{prefix}_rate_limits`` in ``metadata``: one row per limit in force, keyed as a pause is
    (``kind``, ``name``); ``tat`` is the instant its next slot is due (``NULL``: never used),
    the only column a reservation writes."""
    return sa.Table(
        f"{prefix}_rate_limits",
        metadata,
        sa.Column("kind", sa.String(STATE_LENGTH), primary_key=True),
        sa.Column("name", sa.String(MAX_QUEUE_NAME_LENGTH), primary_key=True),
        sa.Column("count", sa.Integer, nullable=False),
        sa.Column("period", sa.Double, nullable=False),
        sa.Column("burst", sa.Integer, nullable=False),
        sa.Column("set_by", sa.String(MAX_PAUSED_BY_LENGTH), nullable=False),
        sa.Column("set_at", sa.Double, nullable=False),
        sa.Column("tat", sa.Double, nullable=True),
    )


def build_calendars(prefix: str, metadata: sa.MetaData) -> sa.Table:
    """``{prefix}_calendars`` in ``metadata``: one row per calendar of excluded dates, its
    merged ranges kept as a JSON text (read whole, never queried by date)."""
    return sa.Table(
        f"{prefix}_calendars",
        metadata,
        sa.Column("name", sa.String(100), primary_key=True),
        sa.Column("timezone", sa.String(100), nullable=False),
        sa.Column("ranges", sa.Text, nullable=False),
        sa.Column("set_by", sa.String(MAX_PAUSED_BY_LENGTH), nullable=False),
        sa.Column("set_at", sa.Double, nullable=False),
    )
