"""The quick start's calls: one below the threshold (Celery as always), one above it (stored).

Prints the stored call's id once storage has it.
"""

from __future__ import annotations

from proj import app, record

below = record.apply_async(("below",), countdown=0.5)  # below the threshold: Celery as always
result = record.apply_async(("above",), countdown=2)  # above it: stored durably
assert app.parallel_scheduler.client.get(below.id) is None, f"{below.id} was stored"
assert app.parallel_scheduler.client.get(result.id) is not None, f"{result.id} is not stored"
print(result.id)
