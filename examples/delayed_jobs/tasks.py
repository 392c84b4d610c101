"""A plain Celery app: nothing here knows about parallel-scheduler.

Run a worker with:  celery -A tasks worker -Q celery --loglevel=INFO
"""

import os

from celery import Celery

app = Celery("tasks", broker=os.environ.get("BROKER_URL", "redis://127.0.0.1:6379/0"))
app.conf.task_serializer = "json"
app.conf.accept_content = ["json"]


@app.task(name="tasks.send_reminder")
def send_reminder(user_id: int, text: str) -> str:
    message = f"reminder for user {user_id}: {text}"
    print(message)
    return message
