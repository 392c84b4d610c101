"""The systemd units of examples/deploy/systemd/: ``systemd-analyze verify`` accepts them when it
is installed (else every key is checked against the directives they may use, so CI never skips),
their commands are accepted by the real parsers, and the stop settings match the service's
graceful stop."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy.helpers import (
    DEPLOY,
    KNOWN_ENV,
    assert_celery_worker_command,
    parse_scheduler_command,
    stop_grace,
)

UNITS = sorted((DEPLOY / "systemd").glob("*.service"))
ENV_FILES = sorted((DEPLOY / "systemd").glob("*.env"))
INSTALLED_BIN = "/opt/parallel-scheduler/venv/bin/"

# The directives these units may use, for machines without systemd-analyze.
KNOWN_KEYS = {
    "Unit": {
        "Description",
        "Documentation",
        "After",
        "Wants",
        "Requires",
        "StartLimitIntervalSec",
        "StartLimitBurst",
    },
    "Service": {
        "Type",
        "User",
        "Group",
        "WorkingDirectory",
        "EnvironmentFile",
        "Environment",
        "ExecStart",
        "KillSignal",
        "KillMode",
        "TimeoutStopSec",
        "Restart",
        "RestartSec",
        "NoNewPrivileges",
        "ProtectSystem",
        "ProtectHome",
        "PrivateTmp",
        "PrivateDevices",
        "ProtectClock",
        "ProtectHostname",
        "ProtectKernelTunables",
        "ProtectKernelModules",
        "ProtectKernelLogs",
        "ProtectControlGroups",
        "RestrictAddressFamilies",
        "RestrictNamespaces",
        "RestrictRealtime",
        "RestrictSUIDSGID",
        "LockPersonality",
        "CapabilityBoundingSet",
        "SystemCallArchitectures",
        "SystemCallFilter",
        "UMask",
        "StateDirectory",
    },
    "Install": {"WantedBy"},
}


def parse_unit(path: Path) -> dict[str, dict[str, str]]:
    """A unit file's sections and keys (systemd's syntax: ``#``/``;`` comments, ``Key=value``);
    a key given twice is a mistake in these examples."""
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None, f"{path.name}:{number}: a key outside any section"
        key, sep, value = line.partition("=")
        assert sep, f"{path.name}:{number}: not Key=value: {line!r}"
        assert key.strip() not in current, f"{path.name}:{number}: {key.strip()} given twice"
        current[key.strip()] = value.strip()
    return sections


def seconds(value: str) -> float:
    return float(value.removesuffix("s"))


@pytest.mark.parametrize("unit", UNITS, ids=lambda p: p.name)
def test_unit_shape(unit: Path) -> None:
    sections = parse_unit(unit)
    assert set(sections) == {"Unit", "Service", "Install"}
    service = sections["Service"]
    for key in ("ExecStart", "EnvironmentFile", "KillSignal", "TimeoutStopSec", "Restart", "User"):
        assert key in service, f"{unit.name} has no {key}"
    assert service["NoNewPrivileges"] == "yes"
    assert service["ProtectSystem"] == "strict"
    assert service["CapabilityBoundingSet"] == ""
    assert service["ExecStart"].startswith(INSTALLED_BIN)


@pytest.mark.parametrize("unit", UNITS, ids=lambda p: p.name)
def test_verify(unit: Path, tmp_path: Path) -> None:
    """``systemd-analyze verify`` with the executables pointed at this virtualenv; without it
    (a container with no systemd), every key must be one of the directives above."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        for section, keys in parse_unit(unit).items():
            unknown = set(keys) - KNOWN_KEYS[section]
            assert not unknown, f"{unit.name} [{section}]: unknown keys {sorted(unknown)}"
        return
    bin_dir = f"{Path(sys.executable).parent}/"
    copy = tmp_path / unit.name
    copy.write_text(unit.read_text().replace(INSTALLED_BIN, bin_dir))
    done = subprocess.run(
        [analyze, "verify", str(copy)], capture_output=True, text=True, timeout=60, check=False
    )
    complaints = [line for line in done.stderr.splitlines() if unit.name in line]
    assert done.returncode == 0 and not complaints, done.stderr


def test_scheduler_unit_stops_gracefully() -> None:
    service = parse_unit(DEPLOY / "systemd" / "parallel-scheduler.service")["Service"]
    # SchedulerService.run() stops gracefully on SIGINT and SIGTERM
    assert service["KillSignal"] in ("SIGTERM", "SIGINT")
    assert seconds(service["TimeoutStopSec"]) > stop_grace()
    assert service["Restart"] == "always"
    ns = parse_scheduler_command(service["ExecStart"])
    assert ns.command == "run"
    assert ns.app == "proj.celery:app"
    assert ns.once is False
    assert ns.metrics_port == 9464


def test_dashboard_unit_binds_loopback() -> None:
    service = parse_unit(DEPLOY / "systemd" / "parallel-scheduler-dashboard.service")["Service"]
    ns = parse_scheduler_command(service["ExecStart"])
    assert ns.command == "dashboard"
    assert ns.host == "127.0.0.1"
    assert "--token" not in service["ExecStart"] and "--basic-auth" not in service["ExecStart"]


def test_worker_unit_options_exist() -> None:
    """The worker's options are those ``celery worker --help`` lists for the example project,
    the plugin's ``--parallel-scheduler`` among them."""
    service = parse_unit(DEPLOY / "systemd" / "celery-worker.service")["Service"]
    assert seconds(service["TimeoutStopSec"]) > stop_grace()
    assert_celery_worker_command(service["ExecStart"])


@pytest.mark.parametrize("env_file", ENV_FILES, ids=lambda p: p.name)
def test_environment_files_name_real_variables(env_file: Path) -> None:
    for line in env_file.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, sep, _ = line.partition("=")
            assert sep and name in KNOWN_ENV, f"{env_file.name}: {name} is read by nothing"
