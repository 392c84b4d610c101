#!/usr/bin/env bash
# The Django tests (tests/django) on the newest Django, which needs Python 3.12 or later, in a
# virtualenv of their own (.venv-django-newest); `make test` runs them after the main suite,
# whose .venv holds the oldest supported LTS (Django 4.2). Extra arguments go to pytest.
# Run with the test servers' environment (scripts/test.sh exports it; or `make services`).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-django-newest
DJANGO_SPEC="Django>=6.0,<7"
find_python() {
  local candidate
  for candidate in python3.13 python3.12; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null; then
      command -v "$candidate"
      return
    fi
  done
  for candidate in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[2-9]*/bin/python3; do
    if [ -x "$candidate" ]; then
      echo "$candidate"
      return
    fi
  done
  echo "scripts/django_newest.sh: Django 6 needs Python 3.12 or later and none was found:" \
    "install one (Debian trixie: apt-get install python3.12 python3.12-venv; or" \
    "pyenv install 3.12) and run make test again" >&2
  exit 1
}
if [ ! -x "$VENV/bin/python" ]; then
  "$(find_python)" -m venv "$VENV"
fi
if [ ! -f "$VENV/.installed" ] || [ pyproject.toml -nt "$VENV/.installed" ] || [ "$0" -nt "$VENV/.installed" ]; then
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet -e ".[all,postgresql-binary,test,django-test]" \
    "$DJANGO_SPEC" "pytest-xdist>=3.5"
  touch "$VENV/.installed"
fi
"$VENV/bin/python" -c 'import django, sys; print("Django", django.get_version(), "on Python", sys.version.split()[0])'
exec "$VENV/bin/python" -m pytest tests/django -n "${PYTEST_WORKERS:-2}" --dist loadfile "$@"
