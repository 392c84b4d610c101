"""Build the wheel and prove it works where the dev extras cannot hide a missing dependency.

``make test`` runs in a virtualenv with every extra installed, so a dependency the package forgot
to declare never shows there. This check builds the wheel from the working tree, installs it into
fresh virtualenvs and runs what a user would:

1. core install (``pip install <wheel>``): the Redis and PostgreSQL drivers are absent, every
   public module imports, a SQLite ``Client`` round trip works, Redis or PostgreSQL storage,
   a Redis broker and ``IdempotentTask`` each stop with the ``pip install`` line that fixes it,
   and ``parallel-scheduler demo`` (SQLite, an embedded broker, a real worker) passes;
2. ``[redis]`` added: the README's quick start against the real Redis broker with a real worker
   and the real ``parallel-scheduler run`` scheduler: a below-threshold ``apply_async`` runs
   through Celery, an above-threshold one is stored (Redis storage) and released;
3. ``[postgresql]`` added: plain psycopg loads the system's libpq and a PostgreSQL ``Client``
   round trip works.

Servers come from ``PARALLEL_SCHEDULER_TEST_REDIS_URL`` and
``PARALLEL_SCHEDULER_TEST_POSTGRESQL_URL`` (exported by ``python -m devtools.services start``),
else the local defaults. Everything it starts is
stopped by process id; keys and tables live under a unique name and are removed at the end. On
failure it says which step failed, prints the processes' logs and keeps the temporary directory.
Usage: ``.venv/bin/python scripts/package_check.py``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The version the package says it is (parallel_scheduler/version.py), read without importing it.
VERSION = next(
    line.split('"')[1]
    for line in (ROOT / "parallel_scheduler" / "version.py").read_text().splitlines()
    if line.startswith("__version__")
)
PROBES = Path(__file__).resolve().parent / "package_probes"  # programs run in the fresh venv
REDIS_URL = os.environ.get("PARALLEL_SCHEDULER_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRESQL_URL = os.environ.get(
    "PARALLEL_SCHEDULER_TEST_POSTGRESQL_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
QUICK_START_DEADLINE = 60.0  # seconds for both quick-start calls to have run on the worker
STEP_TIMEOUT = 300.0  # seconds for any one command (a pip install from an index included)


class CheckFailed(Exception):
    """One step of the check failed; the message says which and why."""


def run(
    step: str, cmd: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None
) -> str:
    """Run ``cmd`` to completion; its output, or ``CheckFailed`` naming the step."""
    print(f"-- {step}", flush=True)
    try:
        done = subprocess.run(
            cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=STEP_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise CheckFailed(f"{step}: no answer within {STEP_TIMEOUT:.0f} s: {cmd}") from exc
    if done.returncode != 0:
        raise CheckFailed(
            f"{step}: exit status {done.returncode}: {' '.join(cmd)}\n"
            f"{done.stdout[-4000:]}{done.stderr[-4000:]}"
        )
    return done.stdout


def copy_tree(dest: Path) -> None:
    """The working tree's files as git sees them (tracked and new, not ignored), so the build
    sees exactly what a commit would ship and never writes into the shared tree."""
    listed = run(
        "list the source files", ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT
    )
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():  # a file deleted in the working tree is still listed by ls-files
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


def build_wheel(tmp: Path) -> Path:
    src, dist = tmp / "src", tmp / "dist"
    src.mkdir()
    copy_tree(src)
    run(
        "build the wheel",
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(src)],
    )
    (wheel,) = dist.glob("parallel_scheduler-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        text = archive.read(metadata).decode()
    must = {
        "LICENSE in the wheel": any(n.endswith(".dist-info/licenses/LICENSE") for n in names),
        "the Redis Lua scripts in the wheel": any(
            n.startswith("storage_adapters/redis/lua/") for n in names
        ),
        "py.typed in the wheel": "parallel_scheduler/py.typed" in names,
        "no developers' tools, tests or benchmarks in the wheel": not [
            n for n in names if n.startswith(("devtools/", "tests/", "benchmarks/", "scripts/"))
        ],
        "License-Expression: MIT": "License-Expression: MIT" in text,
        "a Homepage project URL": "Project-URL: Homepage," in text,
        "an Issues project URL": "Project-URL: Issues," in text,
        "a Documentation project URL": "Project-URL: Documentation," in text,
        f"Version: {VERSION}": f"\nVersion: {VERSION}\n" in text,
        "the summary": "\nSummary: Durable, parallel delayed and recurring" in text,
        "the README as the description": "Description-Content-Type: text/markdown" in text,
        "classifiers": "Classifier: Framework :: Celery" in text,
        "the redis extra": "Provides-Extra: redis" in text,
        "the postgresql extra": "Provides-Extra: postgresql" in text,
        "no hard dependency on a Redis or PostgreSQL driver": not [
            line
            for line in text.splitlines()
            if line.startswith(("Requires-Dist: redis", "Requires-Dist: psycopg"))
            and "extra ==" not in line
        ],
    }
    missing = [what for what, ok in must.items() if not ok]
    if missing:
        raise CheckFailed(f"the wheel {wheel.name} lacks: {', '.join(missing)}")
    print(f"   built {wheel.name}", flush=True)
    build_sdist(src, tmp / "sdist")
    return wheel


def build_sdist(src: Path, dist: Path) -> None:
    """The source distribution, built from the same copy as the wheel: it must carry what a
    packager or a reader of the index needs (the licence, the changelog, the docs' sources)."""
    run("build the sdist", [sys.executable, "-m", "build", "--sdist", "-o", str(dist), str(src)])
    (sdist,) = dist.glob("parallel_scheduler-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    must = {
        f"version {VERSION} in its name": sdist.name == f"parallel_scheduler-{VERSION}.tar.gz",
        "LICENSE": "LICENSE" in names,
        "README.md": "README.md" in names,
        "CHANGELOG.md": "CHANGELOG.md" in names,
        "the docs' sources": "docs/index.md" in names and "mkdocs.yml" in names,
        "the Redis Lua scripts": any(n.startswith("storage_adapters/redis/lua/") for n in names),
        "no built site": not any(n.startswith("site/") for n in names),
    }
    missing = [what for what, ok in must.items() if not ok]
    if missing:
        raise CheckFailed(f"the sdist {sdist.name} lacks: {', '.join(missing)}")
    print(f"   built {sdist.name}", flush=True)


class Processes:
    """Processes this check started, each with its log, stopped by pid at the end."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.started: list[tuple[str, subprocess.Popen[bytes], Path]] = []

    def start(self, name: str, cmd: list[str], cwd: Path, env: dict[str, str]) -> None:
        log = self.logs / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        self.started.append((name, proc, log))
        print(f"   started {name} (pid {proc.pid})", flush=True)

    def check_alive(self) -> None:
        for name, proc, _ in self.started:
            if proc.poll() is not None:
                raise CheckFailed(f"{name} exited early with status {proc.returncode}")

    def stop(self) -> None:
        for _, proc, _ in self.started:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for _, proc, _ in self.started:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)

    def print_logs(self) -> None:
        for name, _, log in self.started:
            print(f"== {name} log ({log}):\n{log.read_text(errors='replace')[-6000:]}")


def quick_start(tmp: Path, probes: Path, python: Path, processes: Processes) -> None:
    """A real worker and a real scheduler from the fresh venv, the quick start's two calls, and
    a deadline for both to have run; everything started is stopped, and its keys removed."""
    ran = tmp / "ran.txt"
    tag = uuid.uuid4().hex[:12]
    env = {
        name: value
        for name, value in os.environ.items()  # the project's configuration is under test,
        if not name.startswith("PARALLEL_SCHEDULER_")  # not this shell's
    }
    env.update(
        CHECK_REDIS_URL=REDIS_URL,
        CHECK_PREFIX=f"pscheck_{tag}",
        CHECK_QUEUE=f"ps-package-check-{tag}",
        CHECK_RAN_FILE=str(ran),
        PYTHONPATH=str(probes),
    )
    bin_dir = python.parent
    worker = [str(bin_dir / "celery"), "-A", "proj", "worker", "--pool", "solo", "--loglevel"]
    worker += ["INFO", "--without-gossip", "--without-mingle", "--without-heartbeat"]
    scheduler = [str(bin_dir / "parallel-scheduler"), "--log-level", "INFO"]
    scheduler += ["run", "--app", "proj:app"]
    try:
        processes.start("worker", worker, probes, env)
        processes.start("scheduler", scheduler, probes, env)
        calls = [str(python), str(probes / "quick_start_calls.py")]
        job_id = run("quick start: two apply_async calls", calls, cwd=probes, env=env).strip()
        print(f"   stored the above-threshold call as job {job_id}", flush=True)
        deadline = time.monotonic() + QUICK_START_DEADLINE
        seen: list[str] = []
        while time.monotonic() < deadline:
            processes.check_alive()
            seen = ran.read_text().split() if ran.exists() else []
            if sorted(seen) == ["above", "below"]:
                break
            time.sleep(0.2)
        else:
            raise CheckFailed(
                f"quick start: within {QUICK_START_DEADLINE:.0f} s the worker ran {seen}, "
                "not both 'below' and 'above'"
            )
        print("quick start on the Redis broker: ok", flush=True)
    finally:
        processes.stop()
        cleanup = [str(python), str(probes / "quick_start_cleanup.py")]
        try:
            run("remove the quick start's Redis keys", cleanup, cwd=probes, env=env)
        except CheckFailed as exc:  # say so, without hiding why the quick start failed
            print(f"   (cleanup failed: {exc})", file=sys.stderr)


def check(tmp: Path, processes: Processes) -> None:
    wheel = build_wheel(tmp)
    probes = tmp / "probes"
    shutil.copytree(PROBES, probes, ignore=shutil.ignore_patterns("__pycache__"))
    venv = tmp / "venv"
    run("create a clean virtualenv", [sys.executable, "-m", "venv", str(venv)])
    python, bin_dir = venv / "bin" / "python", venv / "bin"
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]

    run("install the wheel without extras", [*pip, str(wheel)])
    core = [str(python), str(probes / "core_probe.py"), str(tmp / "core.db")]
    print(run("core install: imports, SQLite, errors naming the extras", core, cwd=tmp).strip())
    demo = [str(bin_dir / "parallel-scheduler"), "demo", "--jobs", "200", "--spread", "2"]
    demo += ["--workdir", str(tmp / "demo")]
    run("core install: the demo (SQLite, an embedded broker, a real worker)", demo, cwd=tmp)
    print("core install: demo ok", flush=True)

    run("add the [redis] extra", [*pip, f"{wheel}[redis]"])
    quick_start(tmp, probes, python, processes)

    run("add the [postgresql] extra", [*pip, f"{wheel}[postgresql]"])
    postgresql = [str(python), str(probes / "postgresql_probe.py"), POSTGRESQL_URL]
    print(run("PostgreSQL round trip with plain psycopg", postgresql, cwd=tmp).strip())


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="ps-package-check-"))
    processes = Processes(tmp)
    started = time.monotonic()
    try:
        check(tmp, processes)
    except CheckFailed as exc:
        processes.print_logs()
        print(f"package check FAILED: {exc}\n(kept {tmp} for inspection)", file=sys.stderr)
        return 1
    print(f"package check passed in {time.monotonic() - started:.0f} s")
    shutil.rmtree(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
