"""Sending claimed jobs: where a claimed job is checked for expiry, dispatched and acknowledged.

The order is the guarantee: claim (the per-job lock) -> send -> mark Enqueued. A job is never
marked Enqueued before its dispatcher returned, and a failed send gives the claim back, so the job
stays Scheduled. A crash between send and mark leaves a claim that the next pass recovers: the job
may then be sent twice, never lost; the job id is the task id, so the worker side can tell.

A job that cannot be sent by its own fault (its dispatcher names it with ``UnsendableJobError``,
or its stored arguments do not decode) never holds back the others: it alone is given back for
later (``send_backoff``), the jobs after it are sent at once (except those its dispatcher says
were taken all the same, ``UnsendableJobError.taken_after``: they count as sent), and at its
``max_send_attempts``-th attempt it is set aside as ``FAILED`` with its ``last_error`` until
someone reschedules it.

``release_claims`` is the unit of that window: it sends what it is given, then marks it, in the
calling thread. The release path sizes what it hands over (one job per thread in ``per_job`` mode,
one chunk per thread in ``batch`` mode, see ``paths.py``), and that size is what a crash or a
stall can duplicate.

On the per-job path the scheduler is bound by Python CPU per job (one GIL for every pool thread),
so the calls that nearly always succeed at once skip what only a failure needs: a storage call
or a send runs bare first, and only when it fails is its retry policy built (``engine/retrying.py``
does this for both: its policy objects cost more CPU than a claim's own Python work); a payload
that names no
``expires`` is not decoded to learn that it has no expiry.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence

from parallel_scheduler.clock import StorageClock
from parallel_scheduler.delayed.envelopes import release_facts
from parallel_scheduler.delayed.rate_limiting import ReleaseLimits
from parallel_scheduler.delayed.settlement import StorageSettlement
from parallel_scheduler.dispatchers import (
    BatchDispatchError,
    Dispatcher,
    KeepGoing,
    decode_for_send,
    lease_lost,
)
from parallel_scheduler.engine.held_lock import HeldLock
from parallel_scheduler.engine.recorder import NULL_RECORDER, MetricsRecorder
from parallel_scheduler.engine.retrying import call_dispatcher, call_storage
from parallel_scheduler.engine.stats import Outcome
from parallel_scheduler.errors import LeaseLost, UnsendableJobError
from storage_adapters import ChunkSettlement, ClaimedJob, Storage

__all__ = ["FIRST_SEND_BACKOFF", "MAX_SEND_BACKOFF", "ReleaseListener", "Releaser", "send_backoff"]

logger = logging.getLogger(__name__)

#: Called after a job was sent, with the send time on the storage clock.
ReleaseListener = Callable[[ClaimedJob, float], None]
#: Seconds a job that could not be sent waits after its first attempt (see ``send_backoff``).
FIRST_SEND_BACKOFF = 5.0
#: The longest wait between two attempts at a job that could not be sent.
MAX_SEND_BACKOFF = 300.0


def _may_expire(claim: ClaimedJob) -> bool:
    """False for a payload that cannot hold an expiry: the key's name is not in its text."""
    return "expires" in claim.payload


def _expired(claim: ClaimedJob, now: float) -> bool:
    try:
        expires_at = release_facts(claim.payload).expires_at
    except Exception:  # unreadable: its dispatcher fails on it and reports why, as for any job
        return False
    return expires_at is not None and expires_at <= now


def send_backoff(attempts: int) -> float:
    """Seconds a job that could not be sent at its ``attempts``-th attempt waits before the
    next: ``FIRST_SEND_BACKOFF``, doubling with every attempt, at most ``MAX_SEND_BACKOFF``. So
    it is not claimed first again by every pass, while the jobs beside it are sent."""
    doublings = min(max(attempts, 1), 32) - 1
    return float(min(MAX_SEND_BACKOFF, FIRST_SEND_BACKOFF * 2**doublings))


def _faulty(
    claims: Sequence[ClaimedJob], unsendable: UnsendableJobError | None
) -> list[tuple[ClaimedJob, str]]:
    """The claims among ``claims`` that failed a send by their own fault, each with why: the
    one a dispatcher named (``UnsendableJobError``), or, when it named none, those whose
    stored arguments do not decode (a dispatcher that decodes without naming the job raises
    its ``RecursionError`` for the whole chunk)."""
    if unsendable is not None:
        return [(c, unsendable.reason) for c in claims if c.id == unsendable.job_id][:1]
    faulty: list[tuple[ClaimedJob, str]] = []
    for claim in claims:
        try:
            decode_for_send(claim)
        except UnsendableJobError as exc:
            faulty.append((claim, exc.reason))
    return faulty


def _rest(claims: list[ClaimedJob], went: Sequence[ClaimedJob]) -> list[ClaimedJob]:
    """``claims`` but those among them that ``went``: not always a prefix, since a dispatcher
    may say jobs after one that cannot be sent were taken (``UnsendableJobError.taken_after``)."""
    if not went:
        return claims
    if len(went) == len(claims):
        return []
    gone = {claim.id for claim in went}
    return [claim for claim in claims if claim.id not in gone]


def _one_line(text: str) -> str:
    """``text`` with its control characters escaped, so a log line stays one line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class Releaser:
    """Sends claimed jobs and settles them: what every release path shares once its jobs are
    claimed (see the ``claim_*.py`` modules for how each path claims them)."""

    def __init__(
        self,
        storage: Storage,
        dispatcher: Dispatcher,
        clock: StorageClock,
        claim_lease: float,
        listeners: Sequence[ReleaseListener] = (),
        max_send_attempts: int = 5,
        limits: ReleaseLimits | None = None,
    ) -> None:
        """``max_send_attempts``: a job that cannot be sent (``UnsendableJobError``) is backed
        off alone until its claim counts this many attempts, then set aside as failed.
        ``limits``: the rate limits every claim passes before its send (``storage``'s)."""
        self._storage = storage
        self._max_send_attempts = max_send_attempts
        self._dispatcher = dispatcher
        self._clock = clock
        self._claim_lease = claim_lease
        self._listeners = list(listeners)
        self._halted = threading.Event()
        self.limits = ReleaseLimits(storage) if limits is None else limits

    def start_pass(self, metrics: MetricsRecorder = NULL_RECORDER) -> None:
        """A pass begins: nothing halted, the rate limits in force read afresh."""
        self._halted.clear()
        self.limits.metrics = metrics
        self.limits.refresh()

    def halt(self) -> None:
        """Stop this pass's sends: what follows would only fail again."""
        self._halted.set()

    @property
    def halted(self) -> bool:
        """True once the dispatcher failed in this pass: claiming more would only fail again."""
        return self._halted.is_set()

    def release_claims(
        self, claims: Sequence[ClaimedJob], lock: HeldLock, claimed_at: float
    ) -> Counter[Outcome]:
        """Expire, send and acknowledge jobs this process has claimed.

        ``claimed_at``: ``time.monotonic()`` taken before the claim request went out, so
        ``claimed_at + claim_lease`` is a local deadline no later than the claims' own; a send
        that started before it was sent in time, whatever happened to the mark afterwards.
        """
        sent, started, outcomes = self.hand_over(claims, lock, StorageSettlement(self._storage))
        if sent:
            acked = set(call_storage(lambda: self._storage.mark_enqueued(sent)))
            outcomes[Outcome.RELEASED] += len(acked)
            if len(acked) < len(sent):
                fenced = [(c, at) for c, at in zip(sent, started, strict=True) if c.id not in acked]
                self._report_fenced(fenced, claimed_at + self._claim_lease)
                outcomes[Outcome.FENCED] += len(fenced)
            self.notify(sent)
        return outcomes

    def hand_over(
        self,
        claims: Sequence[ClaimedJob],
        lock: HeldLock,
        settlement: ChunkSettlement,
        until: float | None = None,
        sent_to: list[ClaimedJob] | None = None,
    ) -> tuple[list[ClaimedJob], list[float], Counter[Outcome]]:
        """Expire what has expired, send the rest, give back what was not sent: the sent
        claims, when each send started, and the outcomes of the others. Acknowledging the sent
        ones (a mark, or a commit) is the caller's. No send starts after ``until``
        (``time.monotonic()``), if given: a slow broker then costs the chunk its tail, which
        goes back to Scheduled, instead of the whole chunk's transaction. ``sent_to`` gets the
        sent claims before the settlement writes, so a caller whose storage fails in them still
        knows what went."""
        outcomes: Counter[Outcome] = Counter()
        live = list(claims)
        if any(_may_expire(c) for c in claims):
            now = self._clock.now()
            expired = [c for c in claims if _may_expire(c) and _expired(c, now)]
            if expired:
                settlement.expire(expired, "expired before release")
                outcomes[Outcome.EXPIRED] += len(expired)
                expired_ids = {c.id for c in expired}
                live = [c for c in claims if c.id not in expired_ids]
        if not live:
            return [], [], outcomes
        if not lock.valid() or self._halted.is_set():
            settlement.unclaim(live, "scheduler stopped before sending")
            outcomes[Outcome.STOPPED] += len(live)
            return [], [], outcomes
        live, outcomes[Outcome.DEFERRED] = self.limits.admit(live, settlement)
        if not live:
            return [], [], outcomes
        sent: list[ClaimedJob] = []
        started: list[float] = []
        unsent = live
        error: str | None = None
        while unsent:
            went, went_at, error, unsendable = self._send(unsent, lock, until)
            sent += went
            started += went_at
            if sent_to is not None:  # before any settlement write, which may fail
                sent_to.extend(went)
            unsent = _rest(unsent, went)
            faulty = _faulty(unsent, unsendable) if error is not None else []
            if not faulty:
                break
            # Those jobs' own fault: each backs off alone, and the others go in this pass.
            for claim, reason in faulty:
                outcomes[self._set_aside(claim, reason, settlement)] += 1
            at_fault = {claim.id for claim, _ in faulty}
            unsent = [claim for claim in unsent if claim.id not in at_fault]
            error = None
        if unsent and error is None:  # out of lease or time part-way: step aside, nothing failed
            reason = (
                "the lock lease ran out before sending"
                if not lock.valid()
                else "the chunk's time in its transaction ran out before sending"
            )
            settlement.unclaim(unsent, reason)
            outcomes[Outcome.STOPPED] += len(unsent)
        elif unsent:
            self._halted.set()
            settlement.unclaim(unsent, f"dispatch failed: {error}")
            outcomes[Outcome.FAILED] += len(unsent)
        return sent, started, outcomes

    def _set_aside(self, claim: ClaimedJob, reason: str, settlement: ChunkSettlement) -> Outcome:
        """Back off one job that cannot be sent, or, at its last attempt, set it aside as
        failed; said at ERROR, naming the job, its attempts and why."""
        reason = _one_line(reason)
        limit = self._max_send_attempts
        if claim.attempts >= limit:
            settlement.fail([claim], f"cannot be sent: {reason}")
            logger.error(
                "job %s set aside as failed: it could not be sent in %d attempt(s): %s "
                "(`parallel-scheduler reschedule %s` queues it again)",
                claim.id,
                claim.attempts,
                reason,
                claim.id,
                extra={"event": "job_failed", "job_id": claim.id, "attempts": claim.attempts},
            )
            return Outcome.SET_ASIDE
        delay = send_backoff(claim.attempts)
        settlement.back_off([claim], f"cannot be sent (attempt {claim.attempts}): {reason}", delay)
        logger.error(
            "job %s cannot be sent (attempt %d of %d; tried again in %s s, the jobs beside "
            "it are sent meanwhile): %s",
            claim.id,
            claim.attempts,
            limit,
            f"{delay:g}",
            reason,
            extra={"event": "job_backed_off", "job_id": claim.id, "attempts": claim.attempts},
        )
        return Outcome.BACKED_OFF

    def _send(
        self, claims: list[ClaimedJob], lock: HeldLock, until: float | None = None
    ) -> tuple[list[ClaimedJob], list[float], str | None, UnsendableJobError | None]:
        """Send ``claims`` with a few quick retries of the unsent ones; returns what went (the
        jobs before one that cannot be sent, and those after it its dispatcher says were taken
        all the same), when each of those sends started (``time.monotonic()``), the error
        (``None`` also when the lease ran out, which is no failure of the broker) and, when the
        send stopped at one job that cannot be sent (not retried: it would fail again), that
        job's error too.

        The lock's local lease check runs before every send, so a holder frozen mid-batch does
        not send the rest of it after another scheduler may have taken those jobs over. The
        moment a check passes is taken as the start of the send it allows: a dispatcher asks
        once per job, or once before an all-or-nothing send of the whole chunk.
        """
        sent: list[ClaimedJob] = []
        started: list[float] = []
        remaining = claims
        unsendable: UnsendableJobError | None = None

        def attempt() -> None:
            nonlocal remaining, unsendable
            checks: list[float] = []
            attempt_started = time.monotonic()

            def keep_going() -> bool:
                if not lock.valid():
                    return False
                now = time.monotonic()
                if until is not None and now > until:
                    return False
                checks.append(now)
                return True

            def went(places: Sequence[int]) -> None:
                nonlocal remaining
                gone = [remaining[i] for i in places]
                sent.extend(gone)
                times = checks or [attempt_started]
                started.extend(times[min(i, len(times) - 1)] for i in places)
                remaining = _rest(remaining, gone)

            try:
                self._dispatch(remaining, keep_going)
            except BatchDispatchError as exc:
                went(exc.sent_places(remaining))
                if isinstance(exc.cause, LeaseLost):
                    raise exc.cause from exc
                if isinstance(exc.cause, UnsendableJobError):
                    unsendable = exc.cause
                    return
                raise
            went(range(len(remaining)))

        try:
            call_dispatcher(attempt)
        except LeaseLost:
            why = "lock lease" if not lock.valid() else "time in the chunk's transaction"
            logger.warning("%s ran out; %d claimed job(s) left unsent", why, len(remaining))
            return sent, started, None, None
        except Exception as exc:
            if not _faulty(remaining, None):  # one job's own fault is said as it backs off
                logger.error(
                    "handing %d job(s) to the worker system failed: %s", len(remaining), exc
                )
            return sent, started, f"{type(exc).__name__}: {exc}", None
        error = None if unsendable is None else f"{type(unsendable).__name__}: {unsendable}"
        return sent, started, error, unsendable

    def _dispatch(self, jobs: list[ClaimedJob], keep_going: KeepGoing) -> None:
        """Hand ``jobs`` to the dispatcher (one alone through ``dispatch``); a job that cannot
        be sent is reported as a batch error, like the other ways a batch stops part-way."""
        try:
            if len(jobs) == 1:
                if not keep_going():
                    raise lease_lost()
                self._dispatcher.dispatch(jobs[0])
            else:
                self._dispatcher.dispatch_many(jobs, keep_going)
        except UnsendableJobError as exc:
            raise BatchDispatchError(0, exc) from exc

    def _report_fenced(self, fenced: list[tuple[ClaimedJob, float]], deadline: float) -> None:
        """Say truthfully why a sent job could not be marked: another scheduler recovered its
        claim first, so it may be sent again. Judged by when each send started: before the
        claim's deadline it was sent in time and only the mark came late (this process stalled,
        or storage was unreachable, between send and mark); after it, the send itself was late.
        """
        in_time = [claim.id for claim, at in fenced if at < deadline]
        if in_time:
            logger.warning(
                "%d job(s) whose send started while their claim was valid could not be marked: "
                "the claim ran out and was recovered first (this process stalled, or lost "
                "storage, during or after the send); they may run twice: %s",
                len(in_time),
                ", ".join(in_time),
            )
        for claim, at in fenced:
            if at >= deadline:
                logger.warning(
                    "job %s was sent after its claim expired and was recovered; it may run twice",
                    claim.id,
                )

    def notify(self, sent: Sequence[ClaimedJob]) -> None:
        """Tell the listeners about jobs the broker took (here, or by a storage script)."""
        if not self._listeners:
            return
        sent_at = self._clock.now()
        for claim in sent:
            for listener in self._listeners:
                try:
                    listener(claim, sent_at)
                except Exception:
                    logger.exception("release listener %r failed", listener)
