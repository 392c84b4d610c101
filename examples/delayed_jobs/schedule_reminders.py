"""Schedule durable delayed jobs instead of apply_async(countdown=...).

The jobs wait in storage, not in worker memory; a `parallel-scheduler run --app tasks:app`
process releases each one to the broker when it is due, with the job id as the Celery task id.
"""

import os
from datetime import datetime, timedelta, timezone

from parallel_scheduler import Client, JobSpec

client = Client(storage_url=os.environ.get("STORAGE_URL", "sqlite:///reminders.db"))
client.setup()

# One job, 30 seconds from now (the storage server's clock decides when "now" is).
first = client.schedule("tasks.send_reminder", [1, "renew your plan"], countdown=30)
print("scheduled", first.job_id, "due", first.due_at.isoformat())

# An id of your own is an idempotency key: scheduling it again changes nothing.
again = client.schedule(
    "tasks.send_reminder",
    [2, "trial ends"],
    job_id="trial-end-user-2",
    eta=datetime.now(timezone.utc) + timedelta(days=14),
    queue="celery",
)
print("trial-end-user-2 created:", again.created)

# Many at once, in one atomic bulk write.
results = client.schedule_many(
    JobSpec("tasks.send_reminder", args=[user, "weekly digest"], countdown=60 + user)
    for user in range(100, 200)
)
print(f"scheduled {len(results)} digests")

# List, move and cancel.
print([job.id for job in client.list("scheduled", limit=5)])
client.reschedule(first.job_id, countdown=5)
client.cancel("trial-end-user-2")
print(client.counts())
client.close()
