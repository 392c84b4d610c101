"""examples/deploy/docker/: the Dockerfile installs extras that exist, runs as a user that is not
root, stops with the graceful signal, and its command (and compose.yaml's) is accepted by the
real parsers."""

from __future__ import annotations

import json
import re
import shlex
import sys
from typing import Any

import yaml

from tests.deploy.helpers import (
    DEPLOY,
    KNOWN_ENV,
    ROOT,
    assert_celery_worker_accepts,
    parse_cli,
    program_argv,
    stop_grace,
)

DOCKERFILE = DEPLOY / "docker" / "Dockerfile"
COMPOSE = DEPLOY / "docker" / "compose.yaml"


def instructions() -> list[tuple[str, str]]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    found = []
    for line in joined.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            word, _, rest = line.strip().partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


def last(word: str) -> str:
    return [rest for w, rest in instructions() if w == word][-1]


def extras() -> set[str]:
    if sys.version_info >= (3, 11):
        import tomllib

        with (ROOT / "pyproject.toml").open("rb") as f:
            return set(tomllib.load(f)["project"]["optional-dependencies"])
    from importlib.metadata import metadata

    return set(metadata("parallel-scheduler").get_all("Provides-Extra") or [])


def test_installs_real_extras() -> None:
    runs = [rest for word, rest in instructions() if word == "RUN" and "pip install" in rest]
    assert runs
    named = set()
    for run in runs:
        for extra_list in re.findall(r"parallel-scheduler\[([^\]]+)\]", run):
            named |= set(extra_list.split(","))
    assert named and named <= extras(), f"no such extra: {sorted(named - extras())}"


def test_runs_the_scheduler_as_a_user() -> None:
    assert last("USER") not in ("root", "0")
    assert last("STOPSIGNAL") in ("SIGTERM", "SIGINT")
    entrypoint = json.loads(last("ENTRYPOINT"))
    command = json.loads(last("CMD"))
    ns = parse_cli(program_argv(entrypoint + command, "parallel-scheduler") or [])
    assert ns.command == "run" and ns.app == "proj.celery:app" and not ns.once


def seconds(value: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600}
    return sum(float(n) * units[u] for n, u in re.findall(r"([\d.]+)([smh])", value))


def test_compose_services() -> None:
    compose: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    entrypoint = json.loads(last("ENTRYPOINT"))
    for name in ("scheduler", "dashboard"):
        service = services[name]
        ns = parse_cli(program_argv(entrypoint + service["command"], "parallel-scheduler") or [])
        assert ns.command == {"scheduler": "run", "dashboard": "dashboard"}[name]
        env = set(service["environment"]) - {"BROKER_URL"}  # the example project's own
        assert env <= KNOWN_ENV, f"{name}: read by nothing: {sorted(env - KNOWN_ENV)}"
    assert seconds(services["scheduler"]["stop_grace_period"]) > stop_grace()
    assert services["dashboard"]["ports"] == ["127.0.0.1:8080:8080"]
    worker = services["worker"]
    argv = program_argv(worker["entrypoint"] + worker["command"], "celery")
    assert argv is not None and argv[:3] == ["-A", "proj", "worker"]
    assert seconds(worker["stop_grace_period"]) > stop_grace()
    assert_celery_worker_accepts(argv[3:])
    assert shlex.join(services["redis"]["command"]).endswith("--appendonly yes")
