"""examples/deploy/supervisord/parallel-scheduler.conf: it parses as supervisord reads it (an
INI file; with the ``supervisor`` package installed, by supervisord's own option parser too),
every program's command is accepted by the real parsers, and the stop settings match the
service's graceful stop."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

import pytest

from tests.deploy.helpers import (
    DEPLOY,
    KNOWN_ENV,
    assert_celery_worker_command,
    parse_scheduler_command,
    stop_grace,
)

CONF = DEPLOY / "supervisord" / "parallel-scheduler.conf"
PROGRAM_KEYS = {
    "command",
    "directory",
    "user",
    "environment",
    "autostart",
    "autorestart",
    "startsecs",
    "startretries",
    "stopsignal",
    "stopwaitsecs",
    "stopasgroup",
    "killasgroup",
    "redirect_stderr",
    "stdout_logfile",
    "stdout_logfile_maxbytes",
    "stdout_logfile_backups",
}
SIGNALS = {"TERM", "HUP", "INT", "QUIT", "KILL", "USR1", "USR2"}


def programs() -> dict[str, configparser.SectionProxy]:
    parser = configparser.RawConfigParser(inline_comment_prefixes=None, strict=True)
    parser.read_string(CONF.read_text())
    found = {s.removeprefix("program:"): parser[s] for s in parser.sections()}
    assert all(s.startswith("program:") for s in parser.sections())
    return found


def environment(value: str) -> dict[str, str]:
    """supervisord's ``KEY="value",KEY2="value2"``."""
    pairs = re.findall(r'([A-Z_][A-Z0-9_]*)="([^"]*)"', value)
    assert ",".join(f'{k}="{v}"' for k, v in pairs) == value, f"unparsable: {value!r}"
    return dict(pairs)


def test_programs() -> None:
    assert set(programs()) == {
        "parallel-scheduler",
        "parallel-scheduler-dashboard",
        "celery-worker",
    }


@pytest.mark.parametrize("name", sorted(programs()))
def test_keys_and_environment(name: str) -> None:
    section = programs()[name]
    unknown = set(section) - PROGRAM_KEYS
    assert not unknown, f"[program:{name}] unknown keys {sorted(unknown)}"
    assert section["stopsignal"] in SIGNALS
    assert "%" not in "".join(section.values()), "supervisord would expand %(...)s"
    names = set(environment(section["environment"]))
    assert names <= KNOWN_ENV, f"read by nothing: {sorted(names - KNOWN_ENV)}"
    assert "PARALLEL_SCHEDULER_STORAGE_URL" in names


def test_scheduler_program() -> None:
    section = programs()["parallel-scheduler"]
    assert section["stopsignal"] in ("TERM", "INT")
    assert float(section["stopwaitsecs"]) > stop_grace()
    assert section["autorestart"] == "true"
    ns = parse_scheduler_command(section["command"])
    assert ns.command == "run" and ns.app == "proj.celery:app" and not ns.once


def test_dashboard_program() -> None:
    section = programs()["parallel-scheduler-dashboard"]
    ns = parse_scheduler_command(section["command"])
    assert ns.command == "dashboard" and ns.host == "127.0.0.1"


def test_worker_program() -> None:
    section = programs()["celery-worker"]
    assert float(section["stopwaitsecs"]) > stop_grace()
    assert_celery_worker_command(section["command"])


def test_supervisord_reads_it(tmp_path: Path) -> None:
    """supervisord's own parser, when installed (it is not a dependency of the project; the
    tests above parse the file without it, so nothing is skipped where it is missing)."""
    try:
        from supervisor import options
    except ImportError:
        return
    import getpass

    text = CONF.read_text().replace("user=parallel-scheduler", f"user={getpass.getuser()}")
    text = text.replace("/var/log/parallel-scheduler/", f"{tmp_path}/")
    (tmp_path / "programs.conf").write_text(text)
    main = tmp_path / "supervisord.conf"
    main.write_text(
        f"[supervisord]\nlogfile={tmp_path}/supervisord.log\n"
        f"[include]\nfiles={tmp_path}/programs.conf\n"
    )
    server = options.ServerOptions()
    server.realize(args=["-c", str(main)])
    names = {p.name for g in server.process_group_configs for p in g.process_configs}
    assert names == set(programs())
