"""What the release path knows about a job, in one place: the envelope codec, the release facts
read from a payload, and the one-script release they allow.

**The envelope** is a job's broker message built once, when the job is accepted, by a dispatcher
that can (an ``EnvelopeMaker``): ``<list key>\\n<message>``, the Redis list the message goes
onto, a newline, then the message text. ``encode_envelope``/``decode_envelope`` are the Python
side's only reading and writing of that format; ``storage_adapters/redis/lua/release_to_lists.lua``
must split it on the server itself (it cannot call Python) and names this module as its
reference. Storage keeps an envelope opaque and hands it back with the claim.

**The release facts** of a job (its arguments, options and expiry) come from its payload through
``release_facts``, the one reader the release path and the publishers share.

**The one-script release**: when the broker keeps its queues as lists on the very Redis server
that stores the jobs (a ``ListBroker`` whose server a ``ListReleasingStorage`` shares), a due
batch moves from the schedule onto the broker's lists in one server-side script: pushed and
Enqueued together, with no window in which a crash could send a job twice. ``script_release_for``,
``stores_envelopes`` and ``envelope_maker_for`` are the one place that looks at the
storage/dispatcher pair to decide; ``parallel_scheduler.celery.wiring`` applies them.
"""

from __future__ import annotations

import functools
import json
import json.scanner
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeGuard, runtime_checkable

from parallel_scheduler.jobs import decode_payload
from parallel_scheduler.settings import Settings
from storage_adapters import (
    ClaimedJob,
    ListReleasingStorage,
    LockLease,
    NewJob,
    Storage,
    TransactionalReleaseStorage,
    shards_of,
)

__all__ = [
    "EnvelopeMaker",
    "ListBroker",
    "ReleaseFacts",
    "ScriptRelease",
    "compact_json",
    "decode_envelope",
    "encode_envelope",
    "envelope_maker_for",
    "release_facts",
    "script_release_for",
    "stores_envelopes",
    "wants_envelopes",
    "with_envelopes",
]

logger = logging.getLogger(__name__)
_SEPARATOR = "\n"


def encode_envelope(list_key: str, message: str) -> str:
    """``<list key>\\n<message>``. A list key holds no newline: kombu's keys are queue names,
    which the job model refuses with control characters in them."""
    return f"{list_key}{_SEPARATOR}{message}"


def decode_envelope(envelope: str) -> tuple[str, str]:
    """``(list key, message)`` of an envelope made by ``encode_envelope``."""
    key, _, message = envelope.partition(_SEPARATOR)
    return key, message


@dataclass(frozen=True, slots=True)
class ReleaseFacts:
    """What releasing a job needs from its payload, decoded once. Read-only: a recent payload's
    facts are shared (see ``release_facts``), so no reader may change ``args``, ``kwargs`` or
    ``options`` in place."""

    args: list[Any]
    kwargs: dict[str, Any]
    options: dict[str, Any]
    #: When the job's message stops being worth delivering (epoch seconds), or ``None``.
    expires_at: float | None
    #: ``args``, ``kwargs`` and ``options`` as compact JSON text, for a publisher to splice into
    #: a message body instead of encoding them again (see ``_canonical_facts``).
    args_json: str
    kwargs_json: str
    options_json: str


#: Recent payloads' facts are kept so that one release reads a payload once: the releaser reads
#: a claimed job's expiry, then the dispatcher the rest of the same payload. Bounded in count and
#: in payload size, so it never holds more than a few megabytes; a payload past either bound is
#: simply decoded again.
_RECENT_PAYLOADS = 1024
_RECENT_PAYLOAD_CHARS = 2048

#: Compact JSON as a string, non-ASCII kept as is (message bodies are UTF-8): the layout
#: ``jobs.JobSpec.encode`` writes payloads in, and the one encoder of the fast publish paths.
#: NaN is allowed here only because a payload written by hand may hold it.
compact_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
#: The C scanner under ``json.loads``: ``(value, end)`` of the JSON value at an index, with no
#: wrapper per call; raises ``StopIteration`` (or ``ValueError``) where none starts.
_SCAN: Callable[[str, int], tuple[Any, int]] = json.scanner.make_scanner(
    json.JSONDecoder()  # type: ignore[arg-type]
)
_ARGS, _KWARGS, _OPTIONS = '{"args":', ',"kwargs":', ',"options":'


def release_facts(payload: str) -> ReleaseFacts:
    """The release facts of a stored payload (see ``jobs.JobSpec.encode`` for its format)."""
    if len(payload) <= _RECENT_PAYLOAD_CHARS:
        return _recent_facts(payload)
    return _decode_facts(payload)


def _canonical_facts(payload: str) -> ReleaseFacts | None:
    """The facts of a payload in the layout ``JobSpec.encode`` writes (``{"args":…,"kwargs":…,
    "options":…}``, compact), read in one scan that also yields each part's JSON text: a
    publisher splices those spans into the message body, so the release path decodes a payload
    once and encodes nothing of it again (the spans are valid JSON of exactly the decoded
    values). ``None`` for any other layout: the caller decodes it the general way."""
    if not payload.startswith(_ARGS):
        return None
    try:
        args, args_end = _SCAN(payload, len(_ARGS))
        if not payload.startswith(_KWARGS, args_end):
            return None
        kwargs_at = args_end + len(_KWARGS)
        kwargs, kwargs_end = _SCAN(payload, kwargs_at)
        if not payload.startswith(_OPTIONS, kwargs_end):
            return None
        options_at = kwargs_end + len(_OPTIONS)
        options, options_end = _SCAN(payload, options_at)
    except (StopIteration, ValueError):
        return None
    shaped = isinstance(args, list) and isinstance(kwargs, dict) and isinstance(options, dict)
    if not shaped or payload[options_end:] != "}":
        return None
    return ReleaseFacts(
        args,
        kwargs,
        options,
        _expiry(options),
        payload[len(_ARGS) : args_end],
        payload[kwargs_at:kwargs_end],
        payload[options_at:options_end],
    )


def _expiry(options: dict[str, Any]) -> float | None:
    expires = options.get("expires")
    return float(expires) if isinstance(expires, (int, float)) else None


def _decode_facts(payload: str) -> ReleaseFacts:
    canonical = _canonical_facts(payload)
    if canonical is not None:
        return canonical
    args, kwargs, options = decode_payload(payload)
    return ReleaseFacts(
        args,
        kwargs,
        options,
        _expiry(options),
        compact_json(args),
        compact_json(kwargs),
        compact_json(options),
    )


_recent_facts = functools.lru_cache(maxsize=_RECENT_PAYLOADS)(_decode_facts)


@runtime_checkable
class EnvelopeMaker(Protocol):
    def envelope(self, job: NewJob) -> str | None:
        """The job's broker message (``encode_envelope``), or ``None`` when this job must be
        built at release time (its options need the slow path, or it can expire)."""


@runtime_checkable
class ListBroker(Protocol):
    def list_server(self) -> tuple[str, int]:
        """The broker's Redis server identity (its ``run_id``) and database number."""


def with_envelopes(jobs: Sequence[NewJob], maker: EnvelopeMaker | None) -> list[NewJob]:
    if maker is None:
        return list(jobs)
    return [replace(job, envelope=maker.envelope(job)) for job in jobs]


class ScriptRelease:
    """Storage and a list broker that may share a Redis server: ``list_db()`` asks, once a pass
    can reach them, and ``release`` then moves a due batch by script."""

    def __init__(self, storage: ListReleasingStorage, broker: ListBroker) -> None:
        self._storage = storage
        self._broker = broker

    def list_db(self) -> int | None:
        """The broker database to release into by script, or ``None`` when storage and broker do
        not share a Redis server (then the batch is claimed, sent and marked as usual)."""
        server, db = self._broker.list_server()
        if server != self._storage.server_identity():
            logger.info(
                "storage and broker are different Redis servers: releasing by claim and send"
            )
            return None
        logger.info("storage and broker share a Redis server: releasing by one script per batch")
        return db

    def release(
        self, limit: int, lock: LockLease, lease: float, list_db: int
    ) -> tuple[list[ClaimedJob], list[ClaimedJob]]:
        """``(moved, claimed)``: see ``ListReleasingStorage.release_to_lists``."""
        return self._storage.release_to_lists(limit, lock, lease, list_db)


def _releases_by_script(storage: Storage) -> TypeGuard[ListReleasingStorage]:
    """Storage with the one-script release, not on a Redis Cluster (``clustered``): a cluster
    keeps a prefix on one master that no broker shares, so it releases by claim and send."""
    return isinstance(storage, ListReleasingStorage) and not getattr(storage, "clustered", False)


def script_release_for(storage: Storage, dispatcher: object) -> ScriptRelease | None:
    """The one-script release a storage/dispatcher pair may allow, or ``None`` when it cannot
    (storage without the script or on a cluster, or a broker that is not a list broker)."""
    if _releases_by_script(storage) and isinstance(dispatcher, ListBroker):
        return ScriptRelease(storage, dispatcher)
    return None


def stores_envelopes(storage: Storage) -> bool:
    """Whether accept-time messages pay off with this storage: with storage that releases by
    script (the message goes to the broker without leaving the server), and with storage that
    releases a chunk in one transaction (PostgreSQL: the claim writes each row once and reads
    the message back, so the release builds nothing; building at release was about half of its
    CPU). Any storage keeps an envelope it is given (the contract); but where every claim and
    every mark rewrite the whole row (SQLite), a stored message makes the release slower than
    building it at release (measured: docs/explanation/performance-results.md)."""
    return _releases_by_script(storage) or all(
        isinstance(shard, TransactionalReleaseStorage) for shard in shards_of(storage)
    )


def wants_envelopes(settings: Settings) -> bool:
    """Whether the settings ask for accept-time messages (``fast_publish`` and
    ``accept_time_messages``): for accepted jobs and recurring firings alike."""
    return settings.fast_publish and settings.accept_time_messages


def envelope_maker_for(storage: Storage, dispatcher: object) -> EnvelopeMaker | None:
    """Who builds a job's message at accept time for this pair, or ``None``."""
    if stores_envelopes(storage) and isinstance(dispatcher, EnvelopeMaker):
        return dispatcher
    return None
