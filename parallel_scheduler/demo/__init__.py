"""``parallel-scheduler demo``: the whole path on one machine, with no server to install.

A real ``celery worker`` process, N jobs scheduled through the public API to fall due over a few
seconds, released in parallel, executed, and then counted: every job must run exactly once, or
the demo fails. Where a ``redis-server`` binary is installed, the demo starts a throwaway one and
uses it as broker and storage, wired as the plugin wires a user's app, so the run shows the
default fast path (one script per batch, storage to broker); otherwise it runs on SQLite and a
filesystem broker and says why that is not the fast path (see ``brokers.py``).

While the progress bar is live, log records go through the bar's own console (above the bar,
never through it) and only from WARNING up: the per-pass INFO lines would scroll the bar away,
and the summary reports what they would have said, with the settings the run used and the
publish path its jobs actually took.
"""

from __future__ import annotations

import logging
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.logging import RichHandler
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from parallel_scheduler.celery.wiring import dispatcher_for, envelopes_for
from parallel_scheduler.client import Client
from parallel_scheduler.delayed.scheduler import DelayedJobScheduler
from parallel_scheduler.demo.brokers import DemoBroker, demo_broker
from parallel_scheduler.dispatchers import Dispatcher, publish_description
from parallel_scheduler.engine.recorder import NullRecorder
from parallel_scheduler.jobs import JobSpec
from parallel_scheduler.opening_storage import open_storage
from parallel_scheduler.settings import Settings
from storage_adapters import ClaimedJob

__all__ = ["run_demo"]

console = Console()
ACCEPT_CHUNK = 1000
#: The accept rate (jobs/s) the first due time allows for, well below a quiet machine's.
ACCEPT_FLOOR = 5000
#: Seconds from the end of an accept at ``ACCEPT_FLOOR`` to the first job's due time.
LEAD = 1.0


@dataclass
class Tally:
    """What the release listener saw, safe to update from the pool's threads."""

    lateness: list[float] = field(default_factory=list)
    #: When the last job was sent (the storage clock's epoch seconds, like ``sent_at``).
    last_sent: float = 0.0
    guard: threading.Lock = field(default_factory=threading.Lock)

    def on_released(self, job: ClaimedJob, sent_at: float) -> None:
        with self.guard:
            self.lateness.append(max(0.0, sent_at - job.due_at))
            self.last_sent = max(self.last_sent, sent_at)

    @property
    def released(self) -> int:
        return len(self.lateness)


#: How each release path reads in the summary (``recorder.RELEASE_PATHS``).
PATH_NAMES = {
    "per_job": "one claim and one send per job",
    "batch": "send_task, claimed in batches",
    "fast_publish": "fast publish, one broker round trip per chunk",
    "one_script": "one script, storage to broker",
}


class PathTally(NullRecorder):
    """The release paths the scheduler reported, so the summary shows the path the jobs took,
    not the one the settings suggest."""

    def __init__(self) -> None:
        self.paths: Counter[str] = Counter()
        self._guard = threading.Lock()

    def released(self, path: str, count: int) -> None:
        if count:
            with self._guard:
                self.paths[path] += count

    def describe(self) -> str:
        return (
            "; ".join(
                f"{PATH_NAMES.get(path, path)} ({count:,})"
                for path, count in self.paths.most_common()
            )
            or "none"
        )


@contextmanager
def _logs_above_the_bar() -> Iterator[None]:
    """Route every log record through the demo's console from WARNING up (DEBUG too when the
    root logger was set to DEBUG), then put the handlers back as they were."""
    root = logging.getLogger()
    saved, saved_level = root.handlers[:], root.level
    shown = logging.DEBUG if root.getEffectiveLevel() <= logging.DEBUG else logging.WARNING
    handler = RichHandler(console=console, level=shown, show_path=False)
    root.handlers[:] = [handler]
    root.setLevel(shown)
    try:
        yield
    finally:
        root.handlers[:] = saved
        root.setLevel(saved_level)


def _start_worker(workdir: Path, broker_url: str | None) -> subprocess.Popen[bytes]:
    from parallel_scheduler.demo.app import BROKER_ENV

    env = dict(os.environ, PARALLEL_SCHEDULER_DEMO_DIR=str(workdir))
    env.pop(BROKER_ENV, None)
    if broker_url:
        env[BROKER_ENV] = broker_url
    # one process (the solo pool): the demo's task only records its id, and a prefork pool's
    # extra processes would take CPU from the scheduler whose lateness the demo measures
    command = [
        sys.executable, "-m", "celery", "-A", "parallel_scheduler.demo.app", "worker",
        "--loglevel=WARNING", "--pool=solo", "--without-gossip", "--without-mingle",
        "--without-heartbeat", "--hostname=demo@%h", "--queues=demo",
    ]  # fmt: skip
    log = (workdir / "worker.log").open("wb")
    return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)


def _wait_for(condition: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise RuntimeError(f"demo: {what} did not happen within {timeout:.0f} s")
        time.sleep(0.05)


def executions(workdir: Path) -> list[str]:
    """Every job id the worker executed, once per execution."""
    ids: list[str] = []
    for path in workdir.glob("executed-*.log"):
        ids.extend(line for line in path.read_text().splitlines() if line)
    return ids


def _schedule(
    client: Client, jobs: int, spread: float, first_due: float
) -> tuple[list[str], float]:
    """Schedule ``jobs`` due evenly over ``spread`` s from ``first_due`` (epoch seconds), in due
    order; returns their ids and the accept rate. The due times are fixed before the first job
    is accepted, so a slow accept cannot make the first jobs due before they are stored."""
    start = time.perf_counter()
    ids: list[str] = []
    for first in range(0, jobs, ACCEPT_CHUNK):
        specs = [
            JobSpec("parallel_scheduler.demo.record", eta=first_due + spread * i / jobs)
            for i in range(first, min(jobs, first + ACCEPT_CHUNK))
        ]
        ids.extend(r.job_id for r in client.schedule_many(specs))
    return ids, jobs / (time.perf_counter() - start)


def _lead(jobs: int) -> float:
    """Seconds from the start of the accept to the first due time: long enough for the whole
    accept at ``ACCEPT_FLOOR`` jobs/s. Accepting is CPU-bound Python in the scheduler's own
    process, so an accept still running when jobs fall due keeps the release waiting for the
    interpreter lock, and the lateness would measure that (an application that schedules jobs
    runs in a process of its own). A slower accept still works: its first jobs are late."""
    return LEAD + jobs / ACCEPT_FLOOR


def _percentile(values: list[float], q: int) -> float:
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def _summary(
    jobs: int,
    accepted_per_s: float,
    release_seconds: float,
    tally: Tally,
    executed: list[str],
    settings: Settings,
    broker: DemoBroker,
    publisher: str,
    paths: PathTally,
) -> tuple[Table, int, int]:
    distinct = set(executed)
    lost, duplicated = jobs - len(distinct), len(executed) - len(distinct)
    table = Table("measure", "value", title="parallel-scheduler demo")
    table.add_row("broker and storage", broker.description)
    if broker.not_fast is not None:
        table.add_row("not the fast path", broker.not_fast, style="yellow")
    table.add_row("release mode", settings.release_mode)
    table.add_row("fast publish", "on" if settings.fast_publish else "off")
    table.add_row("publisher", publisher)
    table.add_row("publish path", paths.describe())
    table.add_row("parallelism", str(settings.max_degree_of_parallelism))
    table.add_row("batch size", f"{settings.batch_size:,}", end_section=True)
    table.add_row("jobs", f"{jobs:,}")
    table.add_row("accepted/s", f"{accepted_per_s:,.0f}")
    table.add_row("released/s (first due -> last sent)", f"{tally.released / release_seconds:,.0f}")
    table.add_row("lateness p50 (due -> sent)", f"{_percentile(tally.lateness, 50) * 1000:.1f} ms")
    table.add_row("lateness p99 (due -> sent)", f"{_percentile(tally.lateness, 99) * 1000:.1f} ms")
    table.add_row("executed", f"{len(distinct):,}")
    table.add_row("lost", str(lost), style="red" if lost else "green")
    table.add_row("duplicated", str(duplicated), style="red" if duplicated else "green")
    return table, lost, duplicated


def run_demo(
    *,
    jobs: int = 10_000,
    spread: float = 10.0,
    max_degree_of_parallelism: int = 4,
    batch_size: int = 1000,
    release_mode: str | None = None,
    fast_publish: bool | None = None,
    broker: str = "auto",
    workdir: str | None = None,
    timeout: float = 300.0,
) -> int:
    """Run the demo; returns 0 when every job ran exactly once. ``release_mode`` and
    ``fast_publish`` left ``None`` are the defaults a user who tunes nothing gets. ``broker``:
    ``auto`` (the demo's own redis-server when one is installed, else the filesystem broker),
    ``redis`` or ``filesystem``."""
    if jobs < 1 or spread < 0:
        raise ValueError("demo needs --jobs >= 1 and --spread >= 0")
    with tempfile.TemporaryDirectory(prefix="parallel-scheduler-demo-") as tmp:
        folder = Path(workdir or tmp).resolve()
        folder.mkdir(parents=True, exist_ok=True)
        # before anything imports ``.app``: its module-level app (the worker's) reads it
        os.environ["PARALLEL_SCHEDULER_DEMO_DIR"] = str(folder)
        with demo_broker(broker, folder) as chosen:
            settings = Settings.load(
                {
                    "storage_url": chosen.storage_url,
                    "max_degree_of_parallelism": max_degree_of_parallelism,
                    "batch_size": batch_size,
                    "release_mode": release_mode,  # None: the default (Settings validates it)
                    "fast_publish": fast_publish,
                    "poll_interval": 0.05,
                },
                environ={},  # the demo's own settings, whatever the shell exports
            )
            with _logs_above_the_bar():
                return _run(folder, chosen, jobs, spread, settings, timeout)


def _publisher(scheduler: DelayedJobScheduler, dispatcher: Dispatcher) -> str:
    """The summary's publisher row: the dispatcher, or the one-script release when a pass found
    storage and broker on one Redis server (the dispatcher then only names the lists)."""
    if scheduler.releases_by_script:
        return f"{type(dispatcher).__name__} lists, one script per batch, storage to broker"
    return publish_description(dispatcher)


def _forget_earlier_runs(folder: Path) -> None:
    """A ``--workdir`` used before: its worker records would count as this run's executions."""
    for stale in [folder / "worker-ready", *folder.glob("executed-*.log")]:
        stale.unlink(missing_ok=True)


def _run(
    folder: Path, broker: DemoBroker, jobs: int, spread: float, settings: Settings, timeout: float
) -> int:
    from parallel_scheduler.demo.app import make_app

    _forget_earlier_runs(folder)

    console.print(f"demo: {jobs:,} jobs, {broker.description}")
    if broker.not_fast is not None:
        console.print(f"demo: not the fast path: {broker.not_fast}")
    with ExitStack() as cleanup:  # on the way out, in reverse: scheduler, ..., the worker
        cleanup.callback(_stop_worker, _start_worker(folder, broker.broker_url))
        app = make_app(folder, broker.broker_url)
        cleanup.callback(app.close)
        # wired as the plugin wires a user's app (celery.wiring): with fast_publish on (the
        # default), the Redis broker's publisher, which also builds each job's message as it is
        # accepted, and with storage on the broker's Redis server, the one-script release; the
        # filesystem broker has no fast path, so there it is send_task (the publisher row says)
        dispatcher = dispatcher_for(app, settings)
        storage = open_storage(settings)
        cleanup.callback(storage.close)
        client = Client(storage, settings=settings, envelopes=envelopes_for(app, settings, storage))
        cleanup.callback(client.close)
        tally, paths = Tally(), PathTally()
        scheduler = DelayedJobScheduler(
            storage, dispatcher, settings, listeners=[tally.on_released]
        )
        scheduler.metrics = paths
        runner = threading.Thread(
            target=scheduler.run_forever, kwargs={"install_signal_handlers": False}
        )
        cleanup.callback(_stop_scheduler, scheduler, runner)
        _wait_for(lambda: (folder / "worker-ready").exists(), 60, "the Celery worker start")
        client.setup()
        # the scheduler runs while the jobs are accepted, as in production; they fall due once
        # they are all accepted (see _lead)
        first_due = time.time() + _lead(jobs)
        runner.start()
        ids, accepted_per_s = _schedule(client, jobs, spread, first_due)
        _follow(folder, jobs, tally, timeout)
        release_seconds = max(tally.last_sent - first_due, 1e-3)
        _wait_for(broker.drained, 30, "the broker draining")
    # counted once the worker has exited: every message it took was executed or given back
    table, lost, duplicated = _summary(
        len(ids),
        accepted_per_s,
        release_seconds,
        tally,
        executions(folder),
        settings,
        broker,
        _publisher(scheduler, dispatcher),
        paths,
    )
    console.print(table)
    _next_steps()
    return 0 if lost == 0 and duplicated == 0 else 1


def _next_steps() -> None:
    """Where to go after the demo (its own store is gone with its folder): your own store's
    dashboard and ``status``, then the plugin's quick start."""
    console.print("next steps:", soft_wrap=True)
    console.print(
        "  dashboard: parallel-scheduler --storage-url URL dashboard, then open "
        "http://127.0.0.1:8080/ (pip install 'parallel-scheduler[dashboard]')",
        soft_wrap=True,
        markup=False,  # "[dashboard]" is text, not rich markup
    )
    console.print(
        "  status:    parallel-scheduler --storage-url URL status (counts, next due, locks)",
        soft_wrap=True,
    )
    console.print(
        "  your app:  README, 'Quick start for Celery users: the plugin' (celery -A proj "
        "parallel-scheduler)",
        soft_wrap=True,
    )


def _stop_scheduler(scheduler: DelayedJobScheduler, runner: threading.Thread) -> None:
    scheduler.close()
    if runner.is_alive():
        runner.join()


def _stop_worker(worker: subprocess.Popen[bytes]) -> None:
    """Warm shutdown (SIGTERM: the tasks under way finish), by the worker's own process id."""
    worker.send_signal(signal.SIGTERM)
    try:
        worker.wait(30)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait()


class _ExecutionCount:
    """How many distinct jobs the worker has executed so far, read incrementally (only the bytes
    added since the last look, to the last whole line), so following the progress costs the
    demo's process next to nothing while it releases. The final count is ``executions``'s."""

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self._read: dict[Path, int] = {}
        self._ids: set[str] = set()

    def __call__(self) -> int:
        for path in self._folder.glob("executed-*.log"):
            with path.open("rb") as f:
                f.seek(self._read.get(path, 0))
                added = f.read()
            whole = added[: added.rfind(b"\n") + 1]
            self._read[path] = self._read.get(path, 0) + len(whole)
            self._ids.update(whole.decode().split())
        return len(self._ids)


def _follow(folder: Path, jobs: int, tally: Tally, timeout: float) -> None:
    """Show progress until every job was released and executed."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    deadline = time.monotonic() + timeout
    executed_so_far = _ExecutionCount(folder)
    with Progress(*columns, TimeElapsedColumn(), console=console) as progress:
        released = progress.add_task("released", total=jobs)
        executed = progress.add_task("executed", total=jobs)
        while True:
            done = executed_so_far()
            progress.update(released, completed=tally.released)
            progress.update(executed, completed=done)
            if done >= jobs and tally.released >= jobs:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"demo: only {tally.released} released, {done} executed after {timeout:.0f} s"
                )
            time.sleep(0.1)
