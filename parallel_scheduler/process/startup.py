"""The one line a scheduler process logs as it starts, the same from every entry point
(``parallel-scheduler run``, ``celery -A proj parallel-scheduler``, the worker bootstep):

``parallel-scheduler 0.1.0 starting: instance host:123:ab12, storage postgresql://u:***@db/x,
settings prefix=ps max_degree_of_parallelism=10 ... fast_publish=True ..., publish RedisPublisher,
one round trip per chunk``

so an operator reading a log can tell which process this is (the instance id is its lock owner
and its liveness record's id in ``status``), which store it works on (password masked), what it
was told to do, and how it hands jobs to the broker (``fast_publish`` asks for the fast path;
``publish`` says whether this broker has one), without a second line to correlate. In JSON the
same facts are fields.

With shards (``shards`` > 1) the line ends ``shards 8: serving this process's share among the
live schedulers`` (field ``shards``): which shards those are changes as schedulers come and go,
so it is logged as it changes ("serving 3 of 8 shards ...") and ``status`` shows every
scheduler's.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from parallel_scheduler.dispatchers import publish_description
from parallel_scheduler.log_format import event
from parallel_scheduler.version import __version__
from storage_adapters import DEFAULT_URL, mask_url

if TYPE_CHECKING:
    from parallel_scheduler.process.service import SchedulerService

__all__ = ["log_start", "publish_of", "start_line_parts"]

logger = logging.getLogger(__name__)


def start_line_parts(service: SchedulerService) -> tuple[str, str, dict[str, object]]:
    """The instance id, the masked storage URL and the other settings, as the line shows them."""
    settings = service.settings.describe()
    storage = settings.pop("storage_url", None) or mask_url(DEFAULT_URL)
    return service.owner, str(storage), settings


def publish_of(service: SchedulerService) -> str:
    """How ``service`` hands due jobs to the broker (``dispatchers.publish_description``)."""
    return publish_description(service.delayed.dispatcher)


def log_start(service: SchedulerService) -> None:
    """Log the start-up line (INFO) for ``service``."""
    instance, storage, settings = start_line_parts(service)
    shown = " ".join(f"{name}={value}" for name, value in settings.items())
    publish = publish_of(service)
    shards = service.settings.shards
    fields = {"shards": shards} if shards > 1 else {}
    sharding = (
        f", shards {shards}: serving this process's share among the live schedulers"
        if shards > 1
        else ""
    )
    logger.info(
        "parallel-scheduler %s starting: instance %s, storage %s, settings %s, publish %s%s",
        __version__,
        instance,
        storage,
        shown,
        publish,
        sharding,
        extra=event(
            version=__version__,
            instance=instance,
            storage=storage,
            settings=settings,
            publish=publish,
            **fields,
        ),
    )
