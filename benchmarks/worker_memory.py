"""Worker memory with many delayed calls waiting: plain Celery, then with parallel-scheduler.

Celery keeps every ``countdown``/``eta`` task in the memory of the worker that received it (ETA
tasks bypass the prefetch limit), so a worker's RSS grows with the number of delayed calls
waiting. With the plugin installed, the same ``apply_async(countdown=3600)`` calls are stored
durably instead, and the worker should stay the size it started at. This script measures both on
real servers and real ``celery worker`` processes:

  (a) plain Celery: N calls into the broker; settled once the worker has received all of them
      and the broker queue is empty;
  (b) the plugin (``eta_threshold`` 60 s, storage from ``--storage-url``): the worker runs with
      ``--parallel-scheduler``; settled once storage holds all N calls.

For each it reports the worker's RSS (main process + pool children) before the calls and after
the worker has settled (each the largest of readings over ``--window`` seconds), the peak sampled
during the run, and how many calls per second the caller made. A scenario that does not settle
within ``--timeout`` is reported as such, with its RSS at the deadline: with RabbitMQ (Celery 5.7,
py-amqp 5.4) the plain worker raised its prefetch by one or two messages a second after the first
burst, so (a) there would take hours to settle; Redis is the default broker for that reason.

    .venv/bin/python benchmarks/worker_memory.py --jobs 100000 --out worker-memory.json

``--out`` never replaces an existing file. Everything the run creates (its queue, storage prefix,
worker processes) is removed at the end. The same file is the Celery app the worker runs
(``celery -A worker_memory``), configured through ``WM_*`` environment variables.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil

HERE = Path(__file__).resolve().parent
TASK_NAME = "bench.noop"
COUNTDOWN = 3600
ETA_THRESHOLD = 60
MIB = 1024 * 1024


# -- the Celery app, shared by the caller and the worker process -------------------------------


def build_app(broker_url: str, queue: str, *, storage_url: str | None, prefix: str | None) -> Any:
    """The benchmark's Celery app; with ``storage_url`` it has the plugin installed."""
    from celery import Celery

    app = Celery("worker_memory", broker=broker_url)
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,
        task_default_queue=queue,
        broker_connection_retry_on_startup=True,
    )
    app.task(name=TASK_NAME)(_noop)
    if storage_url is not None:
        import parallel_scheduler.celery

        app.conf.parallel_scheduler_storage_url = storage_url
        app.conf.parallel_scheduler_prefix = prefix
        app.conf.parallel_scheduler_eta_threshold = ETA_THRESHOLD
        parallel_scheduler.celery.install(app)
    return app


def _noop(i: int) -> None:
    """Never runs during the benchmark: every call is due an hour later."""


class _ReceivedCounter:
    """Counts tasks the worker's consumer accepted and publishes the count to a file.

    The caller waits on that file rather than on a guess of how long prefetching takes; the
    count is written from a thread every 0.1 s, so counting costs the consumer one increment.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.received = 0

    def on_received(self, **_: Any) -> None:
        self.received += 1

    def on_ready(self, **_: Any) -> None:
        threading.Thread(target=self._publish, name="received-counter", daemon=True).start()

    def _publish(self) -> None:
        temporary = self.path.with_suffix(".tmp")
        while True:
            temporary.write_text(json.dumps({"ready": True, "received": self.received}))
            os.replace(temporary, self.path)
            time.sleep(0.1)


# Imported by `celery -A worker_memory worker` in the worker process (which has the WM_*
# variables); another benchmark importing its helpers (memory_1m.py) has none.
if __name__ != "__main__" and "WM_QUEUE" in os.environ:
    from celery.signals import task_received, worker_ready

    app = build_app(
        os.environ["WM_BROKER_URL"],
        os.environ["WM_QUEUE"],
        storage_url=os.environ.get("WM_STORAGE_URL") or None,
        prefix=os.environ.get("WM_PREFIX") or None,
    )
    _counter = _ReceivedCounter(Path(os.environ["WM_STATS_FILE"]))
    task_received.connect(_counter.on_received, weak=False)
    worker_ready.connect(_counter.on_ready, weak=False)


# -- measuring ---------------------------------------------------------------------------------


def rss(pid: int) -> int:
    """Resident bytes of a process and all its children (the prefork pool)."""
    process = psutil.Process(pid)
    total = process.memory_info().rss
    for child in process.children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            total += child.memory_info().rss
    return total


class PeakSampler:
    """Samples RSS in the background, so a peak between two measurements is not missed."""

    def __init__(self, pid: int, interval: float = 0.25) -> None:
        self.pid, self.interval, self.peak = pid, interval, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(psutil.NoSuchProcess):
                self.peak = max(self.peak, rss(self.pid))
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def settled_rss(pid: int, window: float) -> int:
    """The largest RSS over ``window`` seconds: one reading can land between two allocations."""
    deadline = time.monotonic() + window
    largest = rss(pid)
    while time.monotonic() < deadline:
        time.sleep(0.1)
        largest = max(largest, rss(pid))
    return largest


def wait_for(condition: Callable[[], bool], what: str, timeout: float) -> float | None:
    """Seconds until ``condition`` held, or ``None`` (with a warning naming ``what``) when it
    did not within ``timeout``: a scenario that never settles is a result worth reporting."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            print(f"worker_memory: {what} did not happen within {timeout:.0f} s", file=sys.stderr)
            return None
        time.sleep(0.05)
    return time.monotonic() - start


# -- the broker ----------------------------------------------------------------------------------


def _is_redis(url: str) -> bool:
    return url.split("://", 1)[0] in ("redis", "rediss", "unix", "redis+socket")


def queue_length(broker_url: str, queue: str) -> int:
    """Messages ready in the broker queue; those a worker holds unacknowledged are not counted."""
    if _is_redis(broker_url):
        import redis

        return int(redis.Redis.from_url(broker_url).llen(queue))
    from kombu.connection import Connection

    with Connection(broker_url) as connection:  # type: ignore[no-untyped-call]
        declared = connection.default_channel.queue_declare(queue=queue, passive=True)
        return int(declared.message_count)


def delete_queue(broker_url: str, queue: str) -> None:
    """Remove the queue, its bindings, and any of its messages still parked as unacknowledged."""
    if _is_redis(broker_url):
        import redis

        client = redis.Redis.from_url(broker_url)
        priority_lists = [f"{queue}\x06\x16{step}" for step in range(10)]
        client.delete(
            queue,
            *priority_lists,
            f"_kombu.binding.{queue}",
            f"_kombu.binding_permanent.{queue}",
        )
        # A worker that did not shut down cleanly leaves its messages in kombu's shared
        # "unacked" hash, from which any consumer would later restore them into this queue.
        for tag, raw in client.hscan_iter("unacked"):
            with contextlib.suppress(ValueError, TypeError, IndexError):
                _, exchange, routing_key = json.loads(raw)
                if queue in (exchange, routing_key):
                    client.hdel("unacked", tag)
                    client.zrem("unacked_index", tag)
        return
    from kombu.connection import Connection

    with Connection(broker_url) as connection:  # type: ignore[no-untyped-call]
        channel = connection.default_channel
        channel.queue_delete(queue)
        channel.exchange_delete(queue)  # Celery's default exchange is named after the queue


# -- one scenario --------------------------------------------------------------------------------


@dataclass
class Result:
    scenario: str
    jobs: int
    rss_before_mib: float
    rss_after_mib: float
    rss_peak_mib: float
    growth_mib: float
    growth_bytes_per_job: float
    schedule_seconds: float
    calls_per_second: float
    settle_seconds: float | None  # None: not settled within --timeout; "after" is at the timeout
    worker_received: int
    stored: int
    broker_queue_after: int


def _worker_environment(**values: str) -> dict[str, str]:
    """The caller's environment minus PARALLEL_SCHEDULER_* settings, which would override the
    benchmark's own configuration in the worker."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARALLEL_SCHEDULER_")}
    env.update(values)
    return env


@contextlib.contextmanager
def running_worker(
    env: dict[str, str], plugin: bool, concurrency: int, folder: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """A real ``celery worker`` for the benchmark app, ended by its pid however the run ends."""
    command = [
        sys.executable, "-m", "celery", "-A", "worker_memory", "worker",
        "-Q", env["WM_QUEUE"], "-c", str(concurrency), "--without-gossip", "--without-mingle",
        "--without-heartbeat", "--loglevel=WARNING", f"--hostname=wm-{env['WM_QUEUE']}@%h",
        *(["--parallel-scheduler"] if plugin else []),
    ]  # fmt: skip
    log_path = folder / "worker.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, cwd=HERE, env=env, stdout=log, stderr=log)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                # A warm shutdown hands every prefetched message back to the broker first.
                process.wait(timeout=300)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=30)


def _read_stats(path: Path) -> dict[str, Any]:
    try:
        return dict(json.loads(path.read_text()))
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def run_scenario(ns: argparse.Namespace, plugin: bool) -> Result:
    name = "with parallel-scheduler" if plugin else "plain Celery"
    run = uuid.uuid4().hex[:10]
    queue, prefix = f"ps-bench-memory-{run}", f"psbenchmem{run}"
    storage_url = ns.storage_url if plugin else None
    with tempfile.TemporaryDirectory(prefix="ps-worker-memory-") as tmp:
        folder = Path(tmp)
        stats = folder / "stats.json"
        env = _worker_environment(
            WM_BROKER_URL=ns.broker,
            WM_QUEUE=queue,
            WM_STORAGE_URL=storage_url or "",
            WM_PREFIX=prefix if plugin else "",
            WM_STATS_FILE=str(stats),
        )
        caller = build_app(ns.broker, queue, storage_url=storage_url, prefix=prefix)
        task = caller.tasks[TASK_NAME]
        try:
            with running_worker(env, plugin, ns.concurrency, folder) as worker:

                def worker_up() -> bool:
                    if worker.poll() is not None:
                        log = (folder / "worker.log").read_text(errors="replace")
                        raise SystemExit(f"worker_memory: the {name} worker exited:\n{log}")
                    return bool(_read_stats(stats).get("ready"))

                if wait_for(worker_up, f"the {name} worker becoming ready", timeout=120) is None:
                    raise SystemExit(f"worker_memory: the {name} worker did not start")
                before = settled_rss(worker.pid, ns.window)
                print(f"{name}: worker ready, RSS {before / MIB:.1f} MiB; scheduling {ns.jobs:,}")
                with PeakSampler(worker.pid) as sampler:
                    start = time.perf_counter()
                    for i in range(ns.jobs):
                        task.apply_async((i,), countdown=COUNTDOWN)
                    schedule_seconds = time.perf_counter() - start
                    print(f"{name}: {ns.jobs:,} calls in {schedule_seconds:.1f} s; settling")
                    settle_seconds, stored = _settle(ns, name, caller, plugin, queue, stats)
                    after = settled_rss(worker.pid, ns.window)
                received = int(_read_stats(stats).get("received", 0))
                waiting = queue_length(ns.broker, queue)
        finally:
            _clean_up(ns, caller, plugin, queue, prefix)
    growth = after - before
    return Result(
        scenario=name,
        jobs=ns.jobs,
        rss_before_mib=round(before / MIB, 1),
        rss_after_mib=round(after / MIB, 1),
        rss_peak_mib=round(max(sampler.peak, after) / MIB, 1),
        growth_mib=round(growth / MIB, 1),
        growth_bytes_per_job=round(growth / ns.jobs, 1),
        schedule_seconds=round(schedule_seconds, 2),
        calls_per_second=round(ns.jobs / schedule_seconds),
        settle_seconds=None if settle_seconds is None else round(settle_seconds, 2),
        worker_received=received,
        stored=stored,
        broker_queue_after=waiting,
    )


def _settle(
    ns: argparse.Namespace, name: str, caller: Any, plugin: bool, queue: str, stats: Path
) -> tuple[float | None, int]:
    """Wait until every call is where it will wait: (seconds it took, calls in storage)."""
    if not plugin:
        # Every message consumed by the worker, none left in the broker.
        seconds = wait_for(
            lambda: (
                int(_read_stats(stats).get("received", 0)) >= ns.jobs
                and queue_length(ns.broker, queue) == 0
            ),
            f"the {name} worker receiving all {ns.jobs:,} calls",
            timeout=ns.timeout,
        )
        return seconds, 0
    client = caller.parallel_scheduler.client
    seconds = wait_for(
        lambda: client.counts().get("scheduled", 0) >= ns.jobs,
        f"storage holding all {ns.jobs:,} calls",
        timeout=ns.timeout,
    )
    return seconds, int(client.counts().get("scheduled", 0))


def _clean_up(ns: argparse.Namespace, caller: Any, plugin: bool, queue: str, prefix: str) -> None:
    delete_queue(ns.broker, queue)
    if plugin:
        import storage_adapters

        caller.parallel_scheduler.client.close()
        storage = storage_adapters.from_url(ns.storage_url, prefix=prefix)
        try:
            storage.drop()
        finally:
            storage.close()
    caller.close()


# -- reporting -----------------------------------------------------------------------------------


def markdown(results: list[Result]) -> str:
    header = (
        "| scenario | delayed calls | worker RSS before | after | peak | growth | growth per call "
        "| caller calls/s | received by worker | in broker queue | in storage | settled after |"
    )
    rule = "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
    rows = [
        f"| {r.scenario} | {r.jobs:,} | {r.rss_before_mib:.1f} MiB | {r.rss_after_mib:.1f} MiB "
        f"| {r.rss_peak_mib:.1f} MiB | {r.growth_mib:+.1f} MiB | {r.growth_bytes_per_job:,.0f} B "
        f"| {r.calls_per_second:,} | {r.worker_received:,} | {r.broker_queue_after:,} "
        f"| {r.stored:,} | {_settled(r.settle_seconds)} |"
        for r in results
    ]
    return "\n".join([header, rule, *rows])


def _settled(seconds: float | None) -> str:
    return "not within --timeout" if seconds is None else f"{seconds:.1f} s"


def _redacted(url: str) -> str:
    from storage_adapters import mask_url

    return mask_url(url)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=100_000, help="delayed calls (100000)")
    parser.add_argument("--broker", default="redis://127.0.0.1:6379/0", help="Celery broker URL")
    parser.add_argument(
        "--storage-url",
        default="redis://127.0.0.1:6379/0",
        help="plugin storage (a unique prefix is used and dropped afterwards)",
    )
    parser.add_argument("--concurrency", type=int, default=1, help="worker pool size (1)")
    parser.add_argument("--window", type=float, default=2.0, help="seconds per RSS reading (2)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds to wait to settle")
    parser.add_argument(
        "--only", choices=("plain", "plugin"), help="run one scenario instead of both"
    )
    parser.add_argument("--out", type=Path, help="write the results as JSON here (never replaced)")
    ns = parser.parse_args(argv)
    if ns.jobs < 1:
        parser.error("--jobs must be at least 1")
    if ns.out is not None and ns.out.exists():
        parser.error(f"--out {ns.out} exists; refusing to overwrite it")

    scenarios = [False, True] if ns.only is None else [ns.only == "plugin"]
    results = [run_scenario(ns, plugin) for plugin in scenarios]
    table = markdown(results)
    print()
    print(table)
    if ns.out is not None:
        report = {
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "broker": _redacted(ns.broker),
            "storage_url": _redacted(ns.storage_url),
            "countdown_seconds": COUNTDOWN,
            "eta_threshold_seconds": ETA_THRESHOLD,
            "worker_concurrency": ns.concurrency,
            "python": platform.python_version(),
            "cpu_count": os.cpu_count(),
            "results": [asdict(r) for r in results],
            "markdown": table,
        }
        with ns.out.open("x") as out:  # "x": never replace a result someone kept
            json.dump(report, out, indent=2)
        print(f"\nwrote {ns.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
