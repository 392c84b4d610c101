"""The periodic task a project on django-celery-beat already has: the weekly digest, Mondays at
07:30 Paris time. ``manage.py parallel_scheduler import-django-celery-beat`` moves it over."""

import json

from django.db import migrations


def create_periodic_task(apps, schema_editor):
    CrontabSchedule = apps.get_model("django_celery_beat", "CrontabSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    db = schema_editor.connection.alias
    crontab, _ = CrontabSchedule.objects.using(db).get_or_create(
        minute="30",
        hour="7",
        day_of_week="mon",
        day_of_month="*",
        month_of_year="*",
        timezone="Europe/Paris",
    )
    PeriodicTask.objects.using(db).get_or_create(
        name="weekly-digest",
        defaults={
            "task": "reminders.tasks.send_weekly_digest",
            "crontab": crontab,
            "args": json.dumps([]),
            "kwargs": json.dumps({}),
        },
    )


def delete_periodic_task(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.using(schema_editor.connection.alias).filter(name="weekly-digest").delete()


class Migration(migrations.Migration):
    dependencies = [("django_celery_beat", "0018_improve_crontab_helptext")]

    operations = [migrations.RunPython(create_periodic_task, delete_periodic_task)]
