"""Remove what one quick-start run left in Redis: its storage keys, its queue and bindings."""

from __future__ import annotations

import os

import redis

from parallel_scheduler import Client

url, queue = os.environ["CHECK_REDIS_URL"], os.environ["CHECK_QUEUE"].encode()
client = Client(storage_url=url, prefix=os.environ["CHECK_PREFIX"])
client.storage.drop()
client.close()
broker = redis.Redis.from_url(url)
broker.delete(queue)
for binding in broker.scan_iter(match="_kombu.binding*"):  # binding.* and binding_permanent.*
    if queue in binding:  # the exchange Celery named after the queue
        broker.delete(binding)
    elif broker.type(binding) == b"set":
        doomed = [member for member in broker.smembers(binding) if queue in member]
        if doomed:
            broker.srem(binding, *doomed)
