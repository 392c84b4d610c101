"""Django for the Django tests: the test project configured once per process
(``tests/django/settings.py``), its PostgreSQL database created for the session and dropped at
its end, and both databases migrated once.

``django_db`` gives a test both databases, migrated; each test cleans up the rows it made (or
uses names of its own), as the storage tests do with their prefixes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.conftest import require_server
from tests.django import settings as test_settings

test_settings.configure()
# Playwright's sync API keeps an event loop running in the test's thread, where Django's ORM
# would refuse every query (SynchronousOnlyOperation) once a browser test ran in this process:
# the tests' own ORM calls are synchronous and safe.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

DATABASES = ("default", "postgresql")


def _admin_connection() -> object:
    import psycopg

    parts = test_settings.postgresql_parts()
    return psycopg.connect(
        host=parts["HOST"],
        port=parts["PORT"],
        user=parts["USER"],
        password=parts["PASSWORD"] or None,
        dbname="postgres",
        autocommit=True,
        connect_timeout=5,
    )


@pytest.fixture(scope="session")
def django_db() -> Iterator[tuple[str, ...]]:
    """Both databases, created and migrated: ``("default", "postgresql")``."""
    from django.core.management import call_command
    from django.db import connections

    require_server("postgresql")
    with _admin_connection() as admin:  # type: ignore[attr-defined]
        admin.execute(f'CREATE DATABASE "{test_settings.PG_DATABASE}"')
    try:
        for alias in DATABASES:
            call_command("migrate", database=alias, verbosity=0, interactive=False)
        yield DATABASES
    finally:
        connections.close_all()
        with _admin_connection() as admin:  # type: ignore[attr-defined]
            admin.execute(f'DROP DATABASE IF EXISTS "{test_settings.PG_DATABASE}" WITH (FORCE)')
