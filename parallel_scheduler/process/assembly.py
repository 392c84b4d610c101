"""Wiring a scheduler process together: the schedulers (one pair per shard with shards), their
pools, the shard assignment, the metrics endpoint and the liveness heartbeat, decided once from
the storage and the settings. ``SchedulerService`` only keeps what this builds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from parallel_scheduler.delayed.envelopes import envelope_maker_for, wants_envelopes
from parallel_scheduler.delayed.scheduler import DelayedJobScheduler
from parallel_scheduler.delayed.sending import ReleaseListener
from parallel_scheduler.dispatchers import Dispatcher
from parallel_scheduler.engine.locked_loop import LockedScheduler, default_owner
from parallel_scheduler.engine.pool import BoundedPool
from parallel_scheduler.errors import ConfigurationError
from parallel_scheduler.process.liveness import Heartbeat
from parallel_scheduler.process.metrics import MetricsServer
from parallel_scheduler.process.shard_assignment import ShardAssignment
from parallel_scheduler.queues import QueueRouter
from parallel_scheduler.recurring.scheduler import RecurringJobScheduler
from parallel_scheduler.settings import Settings
from storage_adapters import NewJob, Storage
from storage_adapters.shard_guard import shards_of

__all__ = ["ServiceParts", "assemble"]


@dataclass(frozen=True)
class ServiceParts:
    """Everything a scheduler process runs. ``delayed``/``recurring`` are the schedulers over
    the whole store; ``delayed_shards``/``recurring_shards`` the ones whose loops run (the same
    two without shards)."""

    storage: Storage
    settings: Settings
    owner: str
    delayed: DelayedJobScheduler
    recurring: RecurringJobScheduler
    delayed_shards: list[DelayedJobScheduler]
    recurring_shards: list[RecurringJobScheduler]
    assignment: ShardAssignment | None
    metrics: MetricsServer | None
    heartbeat: Heartbeat
    pools: list[BoundedPool]

    def schedulers(self) -> list[LockedScheduler[Any]]:
        """Every scheduler: the whole store's two, and with shards each shard's two."""
        everyone: list[LockedScheduler[Any]] = [self.delayed, self.recurring]
        if self.assignment is not None:
            everyone += [*self.delayed_shards, *self.recurring_shards]
        return everyone


def _settings_for(storage: Storage, settings: Settings) -> Settings:
    """``settings`` with the storage's shard count: settings left at the default follow it,
    settings naming another count are a mistake to point out."""
    stores = shards_of(storage)
    if len(stores) == settings.shards:
        return settings
    if settings.shards != 1:
        raise ConfigurationError(
            f"the storage given has {len(stores)} shard(s) but the settings say "
            f"shards={settings.shards}: open it with the same count (opening_storage.py)"
        )
    return replace(settings, shards=len(stores))


def _firing_envelope(
    storage: Storage, dispatcher: Dispatcher, settings: Settings
) -> Callable[[NewJob], str | None] | None:
    """Who builds a firing job's broker message as it is fired, as for an accepted job (the
    settings ``fast_publish`` and ``accept_time_messages``, and ``envelope_maker_for``)."""
    if not wants_envelopes(settings):
        return None
    maker = envelope_maker_for(storage, dispatcher)
    return None if maker is None else maker.envelope


def assemble(
    storage: Storage,
    dispatcher: Dispatcher,
    settings: Settings | None = None,
    *,
    owner: str | None = None,
    listeners: tuple[ReleaseListener, ...] = (),
    route: QueueRouter | None = None,
) -> ServiceParts:
    """The parts of one scheduler process over ``storage``. With ``metrics_port`` set, the
    metrics endpoint listens to every release and every scheduler reports to it; with shards,
    the schedulers of a kind share one bounded pool, so ``max_degree_of_parallelism`` bounds the
    whole process, and each shard's loop serves only while the assignment gives it the shard.
    ``route``: the queue of a firing whose call names none (``queues.py``)."""
    owner = owner or default_owner()
    settings = _settings_for(storage, settings or Settings())
    metrics = None
    if settings.metrics_port is not None:
        metrics = MetricsServer(storage, settings.metrics_host, settings.metrics_port)
        listeners = (*listeners, metrics.on_released)
    pools: list[BoundedPool] = []
    if settings.shards > 1:
        pools = [
            BoundedPool(settings.max_degree_of_parallelism, name)
            for name in ("delayed", "recurring")
        ]
    delayed_pool, recurring_pool = pools or (None, None)
    delayed = DelayedJobScheduler(
        storage, dispatcher, settings, owner=owner, listeners=listeners, pool=delayed_pool
    )
    recurring = RecurringJobScheduler(
        storage,
        settings,
        owner=owner,
        on_fired=delayed.wake,
        pool=recurring_pool,
        envelope=_firing_envelope(storage, dispatcher, settings),
        push=delayed,  # due firings straight onto the broker's lists where it found them
        route=route,
    )
    settings = delayed.settings
    assignment: ShardAssignment | None = None
    delayed_shards, recurring_shards = [delayed], [recurring]
    if settings.shards > 1:
        assignment = ShardAssignment(settings.shards, owner)
        stores = shards_of(storage)
        delayed_shards = [
            DelayedJobScheduler(
                store,
                dispatcher,
                settings,
                owner=owner,
                listeners=listeners,
                shard=shard,
                serving=_serving(assignment, shard),
                pool=delayed_pool,
                limits=storage,  # one budget for every shard, kept by the sharded store
            )
            for shard, store in enumerate(stores)
        ]
        recurring_shards = [
            RecurringJobScheduler(
                store,
                settings,
                owner=owner,
                on_fired=delayed_shards[shard].wake,  # its firings live in its shard
                shard=shard,
                serving=_serving(assignment, shard),
                pool=recurring_pool,
                envelope=_firing_envelope(store, dispatcher, settings),
                push=delayed_shards[shard],
                route=route,
                calendars=storage,  # one set for every shard, kept by the sharded store
            )
            for shard, store in enumerate(stores)
        ]
    # With shards, each beat also refreshes the assignment from the live instances.
    heartbeat = Heartbeat(
        storage,
        owner,
        settings,
        {"delayed": delayed_shards, "recurring": recurring_shards},
        served=_served(assignment),
        on_live=None if assignment is None else assignment.update,
    )
    parts = ServiceParts(
        storage,
        settings,
        owner,
        delayed,
        recurring,
        delayed_shards,
        recurring_shards,
        assignment,
        metrics,
        heartbeat,
        pools,
    )
    if metrics is not None:
        for scheduler in parts.schedulers():
            scheduler.metrics = metrics.recorder
        metrics.recorder.follow_heartbeat(lambda: heartbeat.last_beat)
    return parts


def _served(assignment: ShardAssignment | None) -> Callable[[], frozenset[int]]:
    if assignment is None:
        return lambda: frozenset({0})
    return lambda: assignment.served


def _serving(assignment: ShardAssignment, shard: int) -> Callable[[], bool]:
    return lambda: assignment.serves(shard)
