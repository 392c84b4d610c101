"""Settings: one frozen object, validated once, from three sources with a fixed precedence.

Precedence, highest first: constructor arguments, ``PARALLEL_SCHEDULER_<NAME>`` environment
variables, the Celery app's ``parallel_scheduler_<name>`` configuration, then the defaults. The
environment beats Celery's configuration so an operator can override a deployed app without a code
change. Every value is checked here, so a bad one fails at start-up with its name in the message,
not halfway through a pass.
"""

from __future__ import annotations

import math
import os
import types
from collections.abc import Callable, Mapping
from dataclasses import Field, dataclass, fields
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from parallel_scheduler.errors import ConfigurationError
from parallel_scheduler.log_format import LOG_FORMATS, LogFormat
from parallel_scheduler.ranges import MAX_INTERVAL
from storage_adapters import DEFAULT_PREFIX, InvalidIdentifierError, mask_url, validate_prefix
from storage_adapters.sharding import MAX_SHARDS
from storage_adapters.urls import InvalidStorageURLError, scheme_of

__all__ = [
    "CELERY_PREFIX",
    "ENV_PREFIX",
    "RELEASE_MODES",
    "SETTING_KINDS",
    "SettingKind",
    "Settings",
]

ENV_PREFIX = "PARALLEL_SCHEDULER_"
CELERY_PREFIX = "parallel_scheduler_"
RELEASE_MODES = ("per_job", "batch")
#: The most ``max_send_attempts`` may be: a job that cannot be sent must be set aside soon.
MAX_SEND_ATTEMPTS = 100
ReleaseMode = Literal["per_job", "batch"]


@dataclass(frozen=True)
class Settings:
    """How a scheduler runs. Durations are seconds.

    ``release_mode`` picks the release path. ``batch``, the default, claims the whole due batch
    in one statement and dispatches it in chunks across the pool: a few round trips per chunk, so
    it is the fastest wherever the database is near. ``per_job`` is Hangfire's shape (fetch a
    batch of due ids, claim each one under its own lock in the thread pool) and pays a few round
    trips per job, run in parallel across the pool: kept for a far-away database, where those
    parallel round trips hide the latency.

    ``fast_publish`` (Celery; on by default): hand each chunk to the broker in one round trip
    with messages built from Celery's own template, instead of one ``send_task`` per job: one
    ``MULTI``/``LPUSH`` to a Redis broker, one AMQP transaction to RabbitMQ (``amqp://``,
    ``amqps://``, ``pyamqp://``), returning once the broker holds the chunk. Any other broker is
    served by ``send_task`` (said once at INFO, and in the start-up line's ``publish``); so is
    a chunk holding a job the fast path cannot carry (a serializer other than JSON, compression,
    unusual routing). Off, every job goes through ``send_task``; what that buys is Celery's
    ``before_task_publish``/``after_task_publish`` signals, which are not sent for fast-published
    messages.

    ``accept_time_messages`` (Celery; on by default, with ``fast_publish``): a stored call's
    broker message is built as it is accepted and stored with the job, where that makes the
    release cheaper: Redis storage on the broker's server (the one-script release moves it
    without leaving the server) and PostgreSQL (a chunk's transaction reads it back and builds
    nothing; about half the release's CPU). The cost is storage while the job waits (the message
    repeats the arguments: with ~500-byte arguments a PostgreSQL row grows about 3x) and CPU in
    the caller at accept time. Off, every message is built at release.

    ``max_send_attempts``: how many times a job its dispatcher cannot send (its arguments do
    not decode, the broker cannot route it) is tried before it is set aside as ``failed``, with
    its ``last_error``, until someone reschedules it. Between attempts the job alone waits, a
    delay that doubles from ``release.FIRST_SEND_BACKOFF`` seconds; the jobs beside it are sent
    meanwhile.

    ``eta_threshold`` (Celery plugin): ``apply_async`` calls whose countdown/eta lies more than
    this many seconds ahead go to durable storage; ``None`` leaves every call to Celery.

    ``lock_lease``: how long a scheduler lock lasts without renewal. The holder renews it every
    third of the lease, so a dead holder is replaced within one lease while a live one never
    loses it to a short hiccup.

    ``connect_timeout``: how long one attempt to reach the storage server may take; a caller of
    ``apply_async`` with storage down waits about this long, not the driver's own default.

    ``fallback_to_celery``: when storage cannot be reached at call time, hand the call to Celery's
    own eta path (logged at WARNING) instead of raising ``StorageUnavailableError``. Off by
    default: the job would then live in worker memory, which is what this project avoids.

    ``metrics_port``: serve Prometheus metrics on ``http://metrics_host:metrics_port/metrics``
    (``None``, the default, serves none; ``0`` picks a free port). ``metrics_host`` is the
    address it binds, loopback unless told otherwise, since the page names the scheduler's
    storage figures to whoever can reach it.

    ``retention``: finished jobs (enqueued, cancelled, expired) are deleted this many seconds
    after they finished, by the delayed scheduler's lock holder in bounded batches between its
    passes (``parallel-scheduler purge`` does it by hand). ``0`` or ``None`` keeps every job.

    ``heartbeat_interval``: how often a scheduler process writes its liveness record (see
    process/liveness.py); ``status`` shows it dead once its heartbeat is three intervals old. With
    shards, another process's shards go to the live ones once its heartbeat is
    ``max(lock_lease / 2, 2 * heartbeat_interval)`` old, so the 2 s default keeps a dead
    process's shards unserved for about one lease, not longer.

    ``shards``: how many shards the store is split into (1, the default: one store, one active
    scheduler at a time, exactly as without shards). With S > 1 each job lives in the shard its
    id hashes to, each shard has its own due index and locks, and every scheduler process serves
    its fair share of the shards (about S/N of them with N live processes; see
    process/shard_assignment.py), so N processes release at once. Every scheduler process and every
    client sharing a prefix must use the same S: storage records S when a sharded store is first
    set up and refuses to open it with a different count (a client with another count would
    write jobs where no scheduler looks). Choose S above the most scheduler processes you expect
    to run, since changing it means a new prefix.

    ``log_format``: ``plain`` log lines read as prose; ``json`` writes one JSON object per line
    (time, level, logger, message and the event's fields) for a log pipeline (see
    ``log_format.py``). The worker bootstep applies it to this package's loggers only.

    ``record_outcomes`` (Celery plugin; on by default): every worker with the plugin installed
    records what it did with each job released from storage (received, started, succeeded,
    failed, retried, revoked; who and when), written to storage in batches by a background
    thread (``celery/outcomes.py``); a task never waits for it, and storage being down only
    drops events, counted in a warning. Off, nothing is recorded.

    Every argument is keyword-only in practice (``Settings(batch_size=500)``) and has a default;
    ``Settings.load`` adds the environment and the Celery app's configuration.

    :param storage_url: where the jobs live: ``postgresql://``, ``redis://``, ``rediss://``,
        ``unix://``, ``redis+cluster://host:port,...`` or ``sqlite:///path`` (``None``: the
        default SQLite file, ``sqlite:///parallel-scheduler.db``).
    :param prefix: the table or key prefix (1-40 letters, digits and ``_``): several stores can
        share one database or Redis server under different prefixes.
    :param max_degree_of_parallelism: the pool threads releasing jobs (1 means sequential); it
        also sizes the storage connection pool.
    :param batch_size: the due jobs fetched per batch.
    :param poll_interval: the longest a scheduler sleeps before it looks for newly scheduled
        jobs (it wakes sooner for a due time it peeked).
    :param lock_lease: see above.
    :param release_mode: ``"batch"`` or ``"per_job"``, see above.
    :param max_send_attempts: see above (1-100).
    :param max_payload_bytes: the largest serialised arguments, keyword arguments and options
        of one job; a bigger job is refused at call time.
    :param eta_threshold: see above.
    :param fast_publish: see above.
    :param accept_time_messages: see above.
    :param connect_timeout: see above.
    :param fallback_to_celery: see above.
    :param metrics_port: see above.
    :param metrics_host: the address the metrics endpoint binds (loopback by default).
    :param retention: see above.
    :param heartbeat_interval: see above (0.05-300 s).
    :param shards: see above (1-1024).
    :param log_format: ``"plain"`` or ``"json"``, see above.
    :param record_outcomes: see above.
    :raises ConfigurationError: a value is out of range or malformed; the message names the
        setting.

    Example::

        settings = Settings(storage_url="redis://127.0.0.1:6379/0", batch_size=500)
        settings = Settings.load(celery_conf=app.conf)  # arguments, environment, app, defaults
    """

    storage_url: str | None = None
    prefix: str = DEFAULT_PREFIX
    max_degree_of_parallelism: int = 10
    batch_size: int = 1000
    poll_interval: float = 1.0
    lock_lease: float = 10.0
    release_mode: ReleaseMode = "batch"
    max_send_attempts: int = 5
    max_payload_bytes: int = 512 * 1024
    eta_threshold: float | None = None
    fast_publish: bool = True
    accept_time_messages: bool = True
    connect_timeout: float = 2.0
    fallback_to_celery: bool = False
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    retention: float | None = 7 * 86400.0
    heartbeat_interval: float = 2.0
    shards: int = 1
    log_format: LogFormat = "plain"
    #: ``lag_alert``: the lag, in seconds, above which the scheduling counts as unhealthy
    #: (``process/health.py``): the dashboard's red banner, ``status --check`` unless
    #: ``--max-lag`` is given, and the exporter's ``health_problems``. A recurring job whose next
    #: run is further in the past than this is reported overdue.
    lag_alert: float = 60.0
    record_outcomes: bool = True

    def __post_init__(self) -> None:
        _check_int("max_degree_of_parallelism", self.max_degree_of_parallelism, 1, 1000)
        _check_int("batch_size", self.batch_size, 1, 100_000)
        _check_int("max_send_attempts", self.max_send_attempts, 1, MAX_SEND_ATTEMPTS)
        _check_int("max_payload_bytes", self.max_payload_bytes, 64, 64 * 1024 * 1024)
        _check_seconds("poll_interval", self.poll_interval, 0.01, 3600)
        _check_seconds("lock_lease", self.lock_lease, 0.5, 3600)
        if self.eta_threshold is not None:
            _check_seconds("eta_threshold", self.eta_threshold, 0, 10 * 365 * 86400)
        _check_seconds("connect_timeout", self.connect_timeout, 0.1, 60)
        _check_seconds("heartbeat_interval", self.heartbeat_interval, 0.05, 300)
        _check_int("shards", self.shards, 1, MAX_SHARDS)
        _check_seconds("lag_alert", self.lag_alert, 0, MAX_INTERVAL)
        if self.metrics_port is not None:
            _check_int("metrics_port", self.metrics_port, 0, 65535)
        if self.retention is not None:
            _check_seconds("retention", self.retention, 0, MAX_INTERVAL)
        if not isinstance(self.metrics_host, str) or not self.metrics_host.strip():
            raise ConfigurationError(
                f"metrics_host must be a host name or address, not {self.metrics_host!r}"
            )
        for name in (
            "fast_publish",
            "accept_time_messages",
            "fallback_to_celery",
            "record_outcomes",
        ):
            if not isinstance(getattr(self, name), bool):
                raise ConfigurationError(
                    f"{name} must be true or false, not {getattr(self, name)!r}"
                )
        if self.log_format not in LOG_FORMATS:
            raise ConfigurationError(
                f"log_format must be one of {LOG_FORMATS}, not {self.log_format!r}"
            )
        if self.release_mode not in RELEASE_MODES:
            raise ConfigurationError(
                f"release_mode must be one of {RELEASE_MODES}, not {self.release_mode!r}"
            )
        try:
            validate_prefix(self.prefix)
            if self.storage_url is not None:
                scheme_of(self.storage_url)
        except (InvalidIdentifierError, InvalidStorageURLError) as exc:
            raise ConfigurationError(str(exc)) from None

    @classmethod
    def load(
        cls,
        overrides: Mapping[str, Any] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        celery_conf: Mapping[str, Any] | None = None,
    ) -> Settings:
        """Settings from every source, by the precedence in the module docstring.

        :param overrides: setting values that win over every other source (``None`` values
            are ignored), as ``Settings`` takes them.
        :param environ: where ``PARALLEL_SCHEDULER_<NAME>`` variables are read (``os.environ``
            when ``None``).
        :param celery_conf: a Celery app's configuration (``app.conf``), read for
            ``parallel_scheduler_<name>`` keys.
        :returns: the validated settings.
        :raises ConfigurationError: an unknown setting name, or a value that does not parse or
            is out of range (the message names the setting and where it came from).

        Example::

            # PARALLEL_SCHEDULER_BATCH_SIZE=500 in the environment beats the app's key
            settings = Settings.load({"prefix": "jobs"}, celery_conf=app.conf)
        """
        overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
        unknown = set(overrides) - _NAMES
        if unknown:
            raise ConfigurationError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for kind in SETTING_KINDS:
            name = kind.name
            if name in overrides:
                values[name] = overrides[name]
            elif (raw := environ.get(kind.env_var)) is not None:
                values[name] = _parse(name, raw, f"environment variable {kind.env_var}")
            elif celery_conf is not None and celery_conf.get(kind.celery_key) is not None:
                values[name] = celery_conf[kind.celery_key]
        return cls(**values)

    def describe(self) -> dict[str, Any]:
        """The settings as shown to people: the storage URL with its password masked.

        :returns: every setting by name, as the start-up line and ``status`` show them.
        """
        shown = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.storage_url is not None:
            shown["storage_url"] = mask_url(self.storage_url)
        return shown


_NAMES = frozenset(f.name for f in fields(Settings))


@dataclass(frozen=True)
class SettingKind:
    """How one setting is read from text (an environment variable, a command-line option).

    Derived from the field's type annotation, so a new field is readable from every source the
    moment it is declared, and a field of a type nobody taught this module to read fails at
    import, not silently at run time.
    """

    name: str
    parse: Callable[[str], Any]
    label: str  # what the text must be, for error messages and --help
    default: Any
    choices: tuple[str, ...] | None = None
    optional: bool = False

    @property
    def is_flag(self) -> bool:
        """True for an on/off setting (``--x/--no-x`` on the command line)."""
        return self.parse is _boolean

    @property
    def env_var(self) -> str:
        return ENV_PREFIX + self.name.upper()

    @property
    def celery_key(self) -> str:
        return CELERY_PREFIX + self.name


def _boolean(raw: str) -> bool:
    lowered = raw.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(raw)


def _kind_of(setting: Field[Any], annotation: Any) -> SettingKind:
    name, default, optional = setting.name, setting.default, False
    if isinstance(annotation, types.UnionType) or get_origin(annotation) is Union:
        members = [a for a in get_args(annotation) if a is not type(None)]
        optional = len(members) < len(get_args(annotation))
        if len(members) != 1:
            raise TypeError(f"setting {name}: cannot read a union {annotation!r} from text")
        annotation = members[0]
    if get_origin(annotation) is Literal:
        choices = tuple(str(c) for c in get_args(annotation))
        return SettingKind(name, str, f"one of {', '.join(choices)}", default, choices, optional)
    readers: dict[Any, tuple[Callable[[str], Any], str]] = {
        bool: (_boolean, "boolean (true/false, yes/no, on/off, 1/0)"),
        int: (int, "integer"),
        float: (float, "number"),
        str: (str, "string"),
    }
    if annotation not in readers:
        raise TypeError(f"setting {name}: no reader for type {annotation!r}")
    parse, label = readers[annotation]
    return SettingKind(name, parse, label, default, None, optional)


#: Every setting, in declaration order, with how to read it from text.
SETTING_KINDS: tuple[SettingKind, ...] = tuple(
    _kind_of(f, get_type_hints(Settings)[f.name]) for f in fields(Settings)
)
_KINDS = {kind.name: kind for kind in SETTING_KINDS}


def _parse(name: str, raw: str, source: str) -> Any:
    kind = _KINDS[name]
    try:
        return kind.parse(raw.strip())
    except ValueError:
        raise ConfigurationError(f"{source}={raw!r} is not a valid {kind.label}") from None


def _check_int(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigurationError(f"{name} must be an integer from {low} to {high}, not {value!r}")


def _check_seconds(name: str, value: object, low: float, high: float) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not low <= value <= high
    ):
        raise ConfigurationError(f"{name} must be {low} to {high} seconds, not {value!r}")
