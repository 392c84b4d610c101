"""The one scheduler process of the tests and benchmarks, and its launcher.

    python -m devtools.scheduler_process --storage-url URL --prefix P [--prefix P2 ...]
        --name NAME [--service [--shards S]] [--record FILE] [--status FILE [--ids FILE]]
        [--ready FILE] [--start-file FILE] [--clock-offset SECONDS] [--dispatch-delay SECONDS]
        [--broker-url URL] [--log-level LEVEL] [settings...]

It runs one ``DelayedJobScheduler`` per prefix, or with ``--service`` the product's
``SchedulerService`` (one delayed and one recurring scheduler per shard, each looping only while
this process serves the shard) over the store ``URL``/``P``, split into ``S`` shards, opened the
way settings open it (``opening_storage.open_storage``). The settings (``--release-mode``,
``--batch-size``, ``--parallelism``, ``--poll-interval``, ``--lock-lease``,
``--heartbeat-interval``, ``--retention SECONDS|none``) are the product's defaults unless given.

Every job goes to one dispatcher, which records it in the files asked for:

* ``--record FILE``: the line ``<job id> <real epoch time> <name>`` appended with a single
  ``write`` on an ``O_APPEND`` descriptor, so a line is whole or absent even when the process is
  SIGKILLed (``read_dispatches`` reads them);
* ``--status FILE``: ``{"released": n, "last_at": t}`` (t: the latest hand-off), replaced once
  loaded and connected, five times a second while running, and at the end; ``--ids FILE``: every
  id it dispatched, one per line, written at the end (kept in memory until then: no syscall per
  job, so what a benchmark measures is the scheduler and its storage).

``--broker-url redis://…`` sends through the fast publish path instead (``RedisPublisher``, one
atomic push per chunk, ``devtools.broker_messages``), where the caller counts the messages; with
Redis storage on the same server and ``--release-mode batch``, that is the one-script release.
``--dispatch-delay`` makes each hand-off take that long, like a broker round trip, so a fault can
land in the middle of a batch.

``--clock-offset`` shifts this process's ``time.time`` (and ``time_ns``) before anything else is
imported: the process believes it is that many seconds ahead (or behind, if negative) of the real
clock, as a host with a skewed clock would. Recorded times are always the real clock's.

``--start-file PATH``: import, open and set up everything, then start only once ``PATH`` exists,
so processes start together, or join at a chosen moment without waiting out a Python start-up.
The ``--ready`` file (``{"pid", "owner", "believed", "real"}``) is written once the schedulers
run. The lock owner is ``<name>:<pid>:<prefix>``; with ``--service``, the instance id and lock
owner is ``<name>:<pid>``. SIGTERM/SIGINT stop it gracefully.

``SchedulerProcess`` starts one from a test or a benchmark, with its files in a folder of the
caller's, and stops it by its pid (``devtools.processes.ChildProcess``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from devtools.processes import ChildProcess
from devtools.waiting import wait_until

if TYPE_CHECKING:
    from types import FrameType

    from parallel_scheduler import Settings
    from storage_adapters import Storage

__all__ = [
    "Dispatch",
    "SchedulerProcess",
    "lock_holder_process",
    "main",
    "options",
    "read_dispatches",
    "run_command",
]

_real_time: Callable[[], float] = time.time
_real_time_ns: Callable[[], int] = time.time_ns

#: option -> the ``Settings`` field it sets (``--retention`` too, where ``none`` is a value)
SETTINGS = {
    "release_mode": "release_mode",
    "batch_size": "batch_size",
    "parallelism": "max_degree_of_parallelism",
    "poll_interval": "poll_interval",
    "lock_lease": "lock_lease",
    "heartbeat_interval": "heartbeat_interval",
}


# -- the launchers (the caller's side) --------------------------------------------------------


def options(settings: dict[str, Any]) -> list[str]:
    """``{"poll_interval": 0.1, "x": None}`` as ``["--poll-interval", "0.1"]``."""
    return [
        part
        for key, value in settings.items()
        if value is not None
        for part in (f"--{key.replace('_', '-')}", str(value))
    ]


def run_command(
    storage_url: str | None = None, prefix: str | None = None, *, broker_url: str, **settings: Any
) -> list[str]:
    """The product's own scheduler process: ``python -m parallel_scheduler [--storage-url URL]
    [--prefix P] run --broker-url B`` and ``settings`` as ``run``'s options
    (``max_degree_of_parallelism=4``: ``--max-degree-of-parallelism 4``). Left out, the URL and
    prefix come from the environment (``PARALLEL_SCHEDULER_*``), as do other settings. Start it
    with ``ChildProcess(workdir, name, run_command(...), env)``."""
    command = [sys.executable, "-m", "parallel_scheduler"]
    command += options({"storage_url": storage_url, "prefix": prefix})
    return [*command, "run", "--broker-url", broker_url, *options(settings)]


@dataclass(frozen=True)
class Dispatch:
    job_id: str
    at: float  # the real clock, even in a process whose clock is shifted
    by: str


class SchedulerProcess(ChildProcess):
    """``python -m devtools.scheduler_process …`` with its files in ``workdir``:
    ``<name>.records`` (``record``), ``<name>.status`` (``status``), ``<name>.ids`` (``ids``),
    ``<name>.ready`` and ``<name>.log``. ``settings`` become options (``poll_interval=0.1``:
    ``--poll-interval 0.1``; ``None`` leaves one out), ``start_file``, ``clock_offset``,
    ``dispatch_delay``, ``broker_url``, ``shards`` and ``log_level`` included; a subclass names
    its own ``defaults`` for those a caller leaves out."""

    defaults: ClassVar[dict[str, Any]] = {}

    def __init__(
        self,
        workdir: Path,
        name: str,
        storage_url: str,
        prefixes: Sequence[str],
        *,
        service: bool = False,
        record: bool = True,
        status: bool = False,
        ids: bool = False,
        env: dict[str, str] | None = None,
        **settings: Any,
    ) -> None:
        self.record = workdir / f"{name}.records"
        self.ready_file = workdir / f"{name}.ready"
        self.status_file = workdir / f"{name}.status"
        self.ids_file = workdir / f"{name}.ids"
        self.settings = {**self.defaults, **settings}
        command = [
            sys.executable, "-m", "devtools.scheduler_process", "--storage-url", storage_url,
            "--name", name, "--ready", str(self.ready_file),
        ]  # fmt: skip
        for prefix in prefixes:
            command += ["--prefix", prefix]
        if service:
            command.append("--service")
        for wanted, option, path in (
            (record, "--record", self.record),
            (status, "--status", self.status_file),
            (ids, "--ids", self.ids_file),
        ):
            if wanted:
                command += [option, str(path)]
        super().__init__(workdir, name, [*command, *options(self.settings)], env)

    @property
    def owner(self) -> str:
        """The instance id and lock owner of a ``service`` process."""
        return f"{self.name}:{self.pid}"

    def owns(self, owner: str) -> bool:
        """``owner`` is this process's (a service's, or one of its schedulers')."""
        return owner == self.owner or owner.startswith(f"{self.owner}:")

    def go(self) -> None:
        """Start the schedulers of a process spawned with ``start_file=…``."""
        start_file = self.settings.get("start_file")
        assert start_file, f"{self.name} was not spawned with a start_file"
        Path(start_file).touch()

    def wait_ready(self, timeout: float = 60) -> dict[str, Any]:
        """Until its schedulers run; what its ready file says. Fails if it exited."""
        wait_until(lambda: self.ready_file.exists() or not self.alive(), timeout=timeout)
        assert self.alive(), f"{self.name} exited early:\n{self.log()}"
        info: dict[str, Any] = json.loads(self.ready_file.read_text())
        return info

    def status(self) -> dict[str, float]:
        """Its latest status (``status=True``): released so far and the latest hand-off."""
        with contextlib.suppress(OSError, ValueError):
            found: dict[str, float] = json.loads(self.status_file.read_text())
            return found
        return {"released": 0, "last_at": 0.0}

    def dispatched_ids(self) -> list[str]:
        """Every id it dispatched (``ids=True``), once it has stopped."""
        return self.ids_file.read_text().split()


def lock_holder_process(
    storage: Storage, processes: Sequence[SchedulerProcess], lock: str = "delayed-scheduler"
) -> SchedulerProcess | None:
    """Which of ``processes`` holds ``lock`` right now, if any of them does."""
    lease = storage.lock_holder(lock)
    if lease is None:
        return None
    return next((p for p in processes if p.owns(lease.owner)), None)


def read_dispatches(paths: Iterable[Path]) -> list[Dispatch]:
    """Every whole line of the record files. A line is written by one ``write``, but a reader
    running meanwhile can see the first part of it: a last line without its newline is still
    being written (or was cut by a kill) and is left for the next read."""
    dispatches = []
    for path in paths:
        if not path.exists():
            continue
        text = path.read_text()
        for line in text[: text.rfind("\n") + 1].splitlines():
            job_id, at, by = line.split(" ")
            dispatches.append(Dispatch(job_id, float(at), by))
    return dispatches


# -- the process --------------------------------------------------------------------------------


def shift_clock(offset: float) -> None:
    """Make ``time.time()`` answer ``offset`` seconds away from the real clock in this process."""
    offset_ns = int(offset * 1_000_000_000)
    time.time = lambda: _real_time() + offset
    time.time_ns = lambda: _real_time_ns() + offset_ns


def _retention(value: str) -> float | None:
    return None if value == "none" else float(value)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m devtools.scheduler_process")
    parser.add_argument("--storage-url", required=True)
    parser.add_argument("--prefix", action="append", required=True)
    parser.add_argument("--name", default="scheduler")
    parser.add_argument("--service", action="store_true")
    parser.add_argument("--shards", type=int)
    parser.add_argument("--record")
    parser.add_argument("--status")
    parser.add_argument("--ids")
    parser.add_argument("--ready")
    parser.add_argument("--start-file")
    parser.add_argument("--clock-offset", type=float, default=0.0)
    parser.add_argument("--dispatch-delay", type=float, default=0.0)
    parser.add_argument("--broker-url")
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--release-mode")
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--parallelism", type=int)
    parser.add_argument("--poll-interval", type=float)
    parser.add_argument("--lock-lease", type=float)
    parser.add_argument("--heartbeat-interval", type=float)
    parser.add_argument("--retention", type=_retention, default=argparse.SUPPRESS)
    ns = parser.parse_args(argv)
    if ns.service and len(ns.prefix) > 1:
        parser.error("--service runs one store: give one --prefix")
    if ns.ids and not ns.status:
        parser.error("--ids goes with --status")
    return ns


class Recorder:
    """The dispatcher: each hand-off into the files the command line asked for."""

    def __init__(self, ns: argparse.Namespace) -> None:
        self.name, self.delay = ns.name, ns.dispatch_delay
        self.status_path: str | None = ns.status
        self.fd: int | None = None
        if ns.record is not None:
            self.fd = os.open(ns.record, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        #: every id, when they are to be written at the end (``list.append`` is atomic: the
        #: pool threads share it without a lock)
        self.ids: list[str] | None = [] if ns.ids else None
        self._count = 0
        self._guard = threading.Lock()
        self.last_at = 0.0

    def __call__(self, task: str, args: Any, kwargs: Any, options: Any, job_id: str) -> None:
        if self.delay:
            time.sleep(self.delay)
        if self.fd is not None:
            os.write(self.fd, f"{job_id} {_real_time():.6f} {self.name}\n".encode())
        if self.ids is not None:
            self.ids.append(job_id)
        elif self.status_path is not None:
            with self._guard:
                self._count += 1
        self.last_at = _real_time()

    @property
    def released(self) -> int:
        return self._count if self.ids is None else len(self.ids)

    def write_status(self) -> None:
        if self.status_path is None:
            return
        with open(self.status_path + ".tmp", "w") as out:
            json.dump({"released": self.released, "last_at": self.last_at}, out)
        os.replace(self.status_path + ".tmp", self.status_path)  # whole or absent

    def finish(self, ids_path: str | None) -> None:
        if ids_path is not None and self.ids is not None:
            with open(ids_path, "w") as out:
                out.write("".join(f"{job_id}\n" for job_id in self.ids))
        self.write_status()
        if self.fd is not None:
            os.close(self.fd)


class Schedulers:
    """One ``DelayedJobScheduler`` per prefix, each looping in a thread of its own."""

    def __init__(self, ns: argparse.Namespace, settings: Settings, dispatcher: Any) -> None:
        import storage_adapters
        from parallel_scheduler import DelayedJobScheduler

        self.owner = f"{ns.name}:{os.getpid()}"
        self.schedulers: list[DelayedJobScheduler] = []
        for prefix in ns.prefix:
            storage = storage_adapters.from_url(
                ns.storage_url, prefix=prefix, pool_size=settings.max_degree_of_parallelism
            )
            storage.setup()
            owner = f"{self.owner}:{prefix}"
            self.schedulers.append(
                DelayedJobScheduler(storage, dispatcher, settings, owner=owner, owns_storage=True)
            )
        self.threads = [
            threading.Thread(
                target=s.run_forever, kwargs={"install_signal_handlers": False}, name=f"loop-{p}"
            )
            for s, p in zip(self.schedulers, ns.prefix, strict=True)
        ]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        for scheduler in self.schedulers:
            scheduler.stop()

    def running(self) -> bool:
        return any(thread.is_alive() for thread in self.threads)

    def close(self) -> None:
        self.stop()
        for thread in self.threads:
            while thread.is_alive():
                thread.join(0.2)  # short joins keep the main thread free to run signal handlers
        for scheduler in self.schedulers:
            scheduler.close()


class Service:
    """The product's ``SchedulerService`` over the (sharded) store the settings name."""

    def __init__(self, ns: argparse.Namespace, settings: Settings, dispatcher: Any) -> None:
        from parallel_scheduler.opening_storage import open_storage
        from parallel_scheduler.process.service import SchedulerService

        storage = open_storage(settings)
        storage.setup()
        self.service = SchedulerService.build(
            storage, dispatcher, settings, owner=f"{ns.name}:{os.getpid()}", owns_storage=True
        )
        self.owner = self.service.owner

    def start(self) -> None:
        self.service.start()

    def stop(self) -> None:
        """Nothing here: ``close`` stops it, in the main thread."""

    def running(self) -> bool:
        return True

    def close(self) -> None:
        self.service.close()  # in-flight work finishes and every lock is released first


def _settings(ns: argparse.Namespace) -> Settings:
    from parallel_scheduler import Settings

    given = {f: getattr(ns, o) for o, f in SETTINGS.items() if getattr(ns, o) is not None}
    if "retention" in ns:
        given["retention"] = ns.retention
    if ns.service:
        given.update(storage_url=ns.storage_url, prefix=ns.prefix[0])
        if ns.shards is not None:
            given["shards"] = ns.shards
    return Settings(**given)


def main(argv: list[str]) -> int:
    ns = parse(argv)
    if ns.clock_offset:
        shift_clock(ns.clock_offset)
    # Imported only now, so every module sees the shifted clock.
    import logging
    import signal

    from parallel_scheduler import CallableDispatcher, Dispatcher

    logging.basicConfig(
        level=ns.log_level,
        format="%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    recorder = Recorder(ns)
    dispatcher: Dispatcher = CallableDispatcher(recorder)
    if ns.broker_url:
        from devtools.broker_messages import fast_publisher

        dispatcher = fast_publisher(ns.broker_url)
    runner = (Service if ns.service else Schedulers)(ns, _settings(ns), dispatcher)
    stopping = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        logging.getLogger("devtools").info("signal %d: stopping gracefully", signum)
        stopping.set()
        runner.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    recorder.write_status()  # loaded and connected: the caller may start the run
    if ns.start_file:  # join the others only when the caller says so
        while not os.path.exists(ns.start_file) and not stopping.wait(0.005):
            pass
    if not stopping.is_set():
        runner.start()
    if ns.ready:
        with open(ns.ready + ".tmp", "w") as ready:
            info = {"pid": os.getpid(), "owner": runner.owner}
            json.dump({**info, "believed": time.time(), "real": _real_time()}, ready)
        os.replace(ns.ready + ".tmp", ns.ready)  # the caller sees the whole file or none
    while not stopping.wait(0.2) and runner.running():  # short waits: signal handlers run
        recorder.write_status()
    runner.close()
    recorder.finish(ns.ids)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
