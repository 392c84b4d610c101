"""PostgreSQL adapter: the shared SQL storage over psycopg 3, with row locks that skip.

PostgreSQL is the backend for many scheduler processes at once: claims use ``FOR UPDATE SKIP
LOCKED``, the due-time index is partial (only scheduled jobs), and schema set-up is serialised
across processes with a transaction-scoped advisory lock.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from urllib.parse import unquote, urlsplit

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from storage_adapters.checks.values import positive_count
from storage_adapters.permanent import dns_problem, postgresql_problem
from storage_adapters.sql.dialect import Dialect
from storage_adapters.sql.storage import SQLStorage
from storage_adapters.sql.transactional_firing import SQLTransactionalFiringStore
from storage_adapters.urls import InvalidStorageURLError, mask_url

__all__ = ["PostgreSQLStorage"]

#: libpq counts its connect timeout in whole seconds, and reads anything under 2 as 2.
MIN_CONNECT_TIMEOUT_SECONDS = 2
_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")


def _ids_in(column: sa.ColumnElement[str]) -> sa.ColumnElement[bool]:
    return column == sa.any_(sa.bindparam("ids", type_=postgresql.ARRAY(sa.String)))


def _bind_ids(ids: Sequence[str]) -> object:
    return list(ids)


def _is_unavailable(exc: DBAPIError) -> bool:
    """Connection loss, server shutdown, timeouts and serialisation failures: all retryable."""
    return isinstance(exc, (OperationalError, InterfaceError))


def _serialise_schema_changes(conn: Connection, prefix: str) -> None:
    """Queue set-up of one prefix behind any other process doing the same; freed at commit."""
    digest = hashlib.blake2b(f"parallel-scheduler:schema:{prefix}".encode(), digest_size=8)
    key = int.from_bytes(digest.digest(), "big", signed=True)
    conn.execute(sa.select(sa.func.pg_advisory_xact_lock(key)))


# Reading the due set ("earliest due first, LIMIT n") is best served, always, by walking the
# partial due index in order and stopping after n rows. The planner only sees that when its
# statistics are fresh: on a table that a burst has just filled (autovacuum has not analysed it
# yet) it expects a handful of rows and picks a bitmap scan that sorts every due row instead,
# several times slower per batch, and slower the more rows are due. These settings hold for the
# one transaction of such a read, and only the statements this package issues in it.
DUE_SCAN_SETTINGS = "SET LOCAL enable_bitmapscan = off; SET LOCAL enable_seqscan = off"

# A transaction of this package is idle only for the client's turn between two statements (a
# claim and its COMMIT): a client stalled there (SIGSTOP, a long pause) would keep its rows locked,
# and SKIP LOCKED keeps every other scheduler off them, until it resumed, however long that is.
# The server ends such a session after 2 s instead (rolled back: the claim never happened, and the
# stalled client, finding its connection gone, sends nothing), so a stall costs a shard at most
# about a lock lease, as a crash does.
IDLE_IN_TRANSACTION_SECONDS = 2.0
IDLE_IN_TRANSACTION = (
    f"-c idle_in_transaction_session_timeout={int(IDLE_IN_TRANSACTION_SECONDS * 1000)}"
)
# psycopg prepares a statement on the server after its fifth run, and PostgreSQL then tries a
# generic plan, one blind to the bound ids and clock: for the release's claim (``id = ANY(...)``
# under ``FOR UPDATE SKIP LOCKED``) it chose one that took about a second a chunk on a freshly
# filled table, so a long burst ran at a chunk a second. Custom plans cost a plan per run (well
# under a millisecond) and keep each statement on the indexes its bound values select.
CUSTOM_PLANS = "-c plan_cache_mode=force_custom_plan"
#: The server options every session of this package gets, unless the URL passes its own.
SESSION_OPTIONS = f"{IDLE_IN_TRANSACTION} {CUSTOM_PLANS}"

# A pause or resume waits for every transaction that is writing jobs, and keeps new ones waiting
# until it commits (see sql/pauses.py): SHARE ROW EXCLUSIVE conflicts with the ROW EXCLUSIVE lock
# that every INSERT and UPDATE of the jobs takes, and with itself, and lets reads through.
PAUSE_LOCK = "LOCK TABLE {jobs} IN SHARE ROW EXCLUSIVE MODE"
# A pause that held a million due jobs leaves their old entries in the due index until a vacuum
# (an update never removes an index entry), and every claim after it walked them first: about
# 20% off a 50,000-job burst's pace beside a paused queue of 1,000,000 (benchmarks/
# paused_queue.py) while autovacuum had not run. So the pause vacuums the table once itself.
AFTER_MASS_MOVE = "VACUUM {jobs}"

# statement_timestamp() is fixed for the whole statement, like now(), but advances between the
# statements of a transaction; being STABLE (clock_timestamp() is VOLATILE), it can bound an index
# scan, so "due_at <= now" is served by the due index.
POSTGRESQL = Dialect(
    name="postgresql",
    label="PostgreSQL",
    now=sa.literal_column(
        "CAST(extract(epoch FROM statement_timestamp()) AS double precision)", sa.Double
    ),
    begin="BEGIN",
    new_jobs_as_arrays=True,
    insert=postgresql.insert,
    ids_in=_ids_in,
    bind_ids=_bind_ids,
    is_unavailable=_is_unavailable,
    serialise_schema_changes=_serialise_schema_changes,
    due_scan_settings=DUE_SCAN_SETTINGS,
    pause_lock=PAUSE_LOCK,
    after_mass_move=AFTER_MASS_MOVE,
)


def normalise_url(url: str) -> str:
    """``url`` with the psycopg 3 driver named, whichever PostgreSQL spelling it came in."""
    scheme, separator, rest = url.partition("://")
    if not separator or scheme.lower() not in _SCHEMES:
        raise InvalidStorageURLError(
            f"not a PostgreSQL URL: {mask_url(url)!r}; expected postgresql://user@host:5432/db"
        )
    return f"postgresql+psycopg://{rest}"


class PostgreSQLStorage(SQLTransactionalFiringStore, SQLStorage):
    """The ``Storage`` contract on PostgreSQL >= 12 through psycopg 3.

    ``pool_size`` connections stay open, and as many again may be opened under load, so it should
    be at least the scheduler's parallelism. There is no pre-ping on checkout: it would double
    the round trips of every claim, and a dead connection surfaces as
    ``StorageUnavailableError`` (the pool then replaces it) for the scheduler's retry to handle.
    """

    #: A chunk released in one transaction stops sending after this long, so the session is
    #: never idle in it for as long as ``IDLE_IN_TRANSACTION_SECONDS`` (which would end it).
    send_budget = IDLE_IN_TRANSACTION_SECONDS / 2

    def __init__(
        self, url: str, *, prefix: str = "ps", pool_size: int = 10, connect_timeout: float = 2.0
    ) -> None:
        positive_count("pool_size", pool_size)
        normalised = normalise_url(url)
        masked = mask_url(url)
        secret = _password_of(normalised)
        try:
            engine = sa.create_engine(
                normalised,
                pool_size=pool_size,
                max_overflow=pool_size,
                pool_pre_ping=False,
                isolation_level="AUTOCOMMIT",
                hide_parameters=True,
                connect_args=_connect_args(normalised, connect_timeout),
            )
        except (sa.exc.ArgumentError, ValueError) as exc:
            detail = str(exc).replace(url, masked).replace(normalised, masked)
            if secret:
                detail = detail.replace(secret, "***")
            raise InvalidStorageURLError(f"invalid PostgreSQL URL {masked!r}: {detail}") from None
        super().__init__(engine, POSTGRESQL, prefix=prefix, masked_url=masked, secret=secret)

    def _configuration_problem(self, exc: DBAPIError) -> str | None:
        return _postgresql_problem(exc)


def _postgresql_problem(exc: DBAPIError) -> str | None:
    """A missing database, refused credentials or an unknown host: no retry can fix those."""
    message = str(exc.orig)
    return postgresql_problem(message, getattr(exc.orig, "sqlstate", None)) or dns_problem(exc)


def _password_of(url: str) -> str | None:
    try:
        password = urlsplit(url).password
    except ValueError:
        return None
    return unquote(password) if password else None


def _connect_args(url: str, connect_timeout: float) -> dict[str, object]:
    """A bounded connect timeout, so an unreachable server fails fast, unless the URL sets one
    (whole seconds, at least libpq's own minimum of 2); and ``SESSION_OPTIONS``, unless the
    URL passes server ``options`` of its own."""
    try:
        query = urlsplit(url).query
    except ValueError:
        return {}
    seconds = max(MIN_CONNECT_TIMEOUT_SECONDS, math.ceil(connect_timeout))
    args: dict[str, object] = {}
    if "connect_timeout" not in query:
        args["connect_timeout"] = seconds
    if "options" not in query:
        args["options"] = SESSION_OPTIONS
    return args
