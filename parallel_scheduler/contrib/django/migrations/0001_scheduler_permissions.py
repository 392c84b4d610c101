"""The table-less ``Scheduler`` model, so Django creates its three permissions."""

from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):  # type: ignore[misc]  # Django ships no types
    initial = True

    dependencies: list[tuple[str, str]] = []

    operations = [
        migrations.CreateModel(
            name="Scheduler",
            fields=[
                (
                    "id",
                    models.AutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
            ],
            options={
                "verbose_name": "scheduler",
                "verbose_name_plural": "Jobs and recurring jobs",
                "permissions": [
                    ("view_scheduler", "Can view the scheduler"),
                    ("change_jobs", "Can cancel, reschedule and run jobs now"),
                    (
                        "change_recurring",
                        "Can create, edit, pause, trigger and remove recurring jobs",
                    ),
                ],
                "managed": False,
                "default_permissions": (),
            },
        ),
    ]
