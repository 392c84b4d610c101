"""Run after the [postgresql] extra is added: plain psycopg (no bundled libpq) loads the system's
libpq, and a PostgreSQL round trip works. Argument: the PostgreSQL URL."""

from __future__ import annotations

import sys
import uuid

import psycopg

from parallel_scheduler import Client

impl = psycopg.pq.__impl__
assert impl != "binary", "psycopg uses its bundled libpq: psycopg[binary] came with [postgresql]"
client = Client(storage_url=sys.argv[1], prefix=f"pscheck_{uuid.uuid4().hex[:8]}")
try:
    client.setup()
    result = client.schedule("tasks.record", ["x"], countdown=3600)
    job = client.get(result.job_id)
    assert job is not None and job.args == ["x"], "PostgreSQL round trip: job not stored"
finally:
    client.storage.drop()
    client.close()
print(f"postgresql extra: ok (psycopg {psycopg.__version__}, libpq {psycopg.pq.version()})")
