"""The broker's transport must be importable before the plugin relies on it.

Celery loads kombu's transport for the broker URL on the first publish; kombu's Redis transport
needs ``redis`` and ``packaging``, which come with ``celery[redis]`` (this project's ``[redis]``
extra), not with Celery itself. Without them the first ``apply_async`` fails with a bare
``ModuleNotFoundError``; checked here, when the plugin first reads the app's configuration, it
fails with the ``pip install`` line that fixes it.
"""

from __future__ import annotations

from typing import Any

from kombu.transport import TRANSPORT_ALIASES

from parallel_scheduler.celery.publish.broker_urls import broker_scheme, masked_broker_url
from storage_adapters.extras import require_driver

__all__ = ["require_broker_transport"]

# kombu's transports that need drivers from one of this project's extras -> those drivers.
_DRIVERS_OF_TRANSPORT = {"kombu.transport.redis": ("redis", "kombu.transport.redis")}


def require_broker_transport(app: Any) -> None:
    """Raise ``MissingExtraError`` naming the extra if the app's broker transport cannot load."""
    transport = TRANSPORT_ALIASES.get(broker_scheme(app), "")
    drivers = _DRIVERS_OF_TRANSPORT.get(transport.partition(":")[0], ())
    for module in drivers:
        require_driver(module, f"the broker {masked_broker_url(app)!r}")
