#!/usr/bin/env bash
# The test command (`make test`): lint, type-check, then every test against real servers.
# Extra arguments go to pytest, for example `make test ARGS="-k redis"`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
exports=$(.venv/bin/python -m devtools.services start)
eval "$exports"
trap '.venv/bin/python -m devtools.services stop' EXIT
# One command per line: `set -e` does not stop on the left side of a failing `a && b`.
echo "== ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "== mypy"
.venv/bin/mypy
echo "== import contracts"
.venv/bin/lint-imports
echo "== docs"
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet --site-dir site
echo "== pytest"
# Two workers, a test file each at a time (module fixtures such as Celery workers stay on one
# worker): most tiers wait on servers and processes, so two share the two cores well (the
# CONTRIBUTING.md says what each tier costs). PYTEST_WORKERS=0 runs them in one process, in turn.
.venv/bin/python -m pytest -n "${PYTEST_WORKERS:-2}" --dist loadfile -m "not alone" "$@"
echo "== pytest (alone)"
# The tests that count releases per wall-clock second (a 50/s limit over 5,000 jobs), in one
# process on an otherwise quiet machine; 5 is pytest's "no test selected" (ARGS left none here).
status=0
.venv/bin/python -m pytest -m alone "$@" || status=$?
if [ "$status" -ne 0 ] && [ "$status" -ne 5 ]; then exit "$status"; fi
echo "== django (newest)"
# tests/django again, on the newest Django (6.x needs Python 3.12+) in a virtualenv of its own
bash scripts/django_newest.sh
echo "== package"
# The wheel in a fresh virtualenv without the dev extras: the core install, then the README's
# quick start with the [redis] extra against the real broker and worker, then [postgresql].
.venv/bin/python scripts/package_check.py
