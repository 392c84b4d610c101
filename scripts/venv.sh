# Sourced by the make targets: a project virtualenv with the package and some extras installed.
# VENV (default .venv) names it, EXTRAS (default dev) the extras: `make test` and `make lint` use
# .venv with the dev extra, `make demo` a small .venv-demo with the redis extra only.
# Re-installs only when pyproject.toml changed since the last install.
set -euo pipefail
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
EXTRAS=${EXTRAS:-dev}
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
if [ ! -f "$VENV/.installed" ] || [ pyproject.toml -nt "$VENV/.installed" ]; then
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet -e ".[$EXTRAS]"
  touch "$VENV/.installed"
fi
