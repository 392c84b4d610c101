"""The app's Celery tasks: plain ``shared_task``s, unaware of where a delayed call waits."""

from celery import shared_task
from django.conf import settings


@shared_task(bind=True)
def send_reminder(self, user_id, text):
    """Send a reminder: here, one line in the outbox file, named by the call's task id."""
    line = f"{self.request.id} reminder for user {user_id}: {text}\n"
    with open(settings.REMINDERS_OUTBOX, "a", encoding="utf-8") as outbox:
        outbox.write(line)
    return line.strip()


@shared_task
def send_weekly_digest():
    """The periodic task django-celery-beat used to fire (see the 0001 migration)."""
    return "digest sent"
