"""Pure unit tests: no server, no Celery worker; seconds."""
