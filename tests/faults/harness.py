"""What every fault test needs: scheduler processes it can signal, and the count of every job.

Counting is the point of the suite. Each test ends with a ``Tally``: jobs stored, jobs released
(marked Enqueued in storage), jobs dispatched (seen by the recording dispatcher, a broker queue or
a worker), lost (stored but never dispatched) and duplicated (dispatches beyond the first, summed
over ids). ``Tally.report`` prints one line per scenario, and with
``PARALLEL_SCHEDULER_FAULT_REPORT=/path/file.jsonl`` also appends it there as JSON.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from parallel_scheduler.engine.retrying import call_storage
from storage_adapters import JobState, NewJob, Storage
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
REPORT_ENV = "PARALLEL_SCHEDULER_FAULT_REPORT"


@dataclass(frozen=True)
class Dispatch:
    job_id: str
    at: float  # the real clock, even in a process whose clock is shifted
    by: str


class ChildProcess:
    """A process a test started (output in ``<name>.log``), signalled only by its own pid."""

    def __init__(
        self, workdir: Path, name: str, command: list[str], env: dict[str, str] | None = None
    ) -> None:
        self.name = name
        self.log_path = workdir / f"{name}.log"
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip
        self.pid = self.process.pid

    def send(self, signum: int) -> None:
        """A signal to this process, by its pid; nothing else is ever signalled."""
        self.process.send_signal(signum)

    def wait(self, timeout: float) -> int:
        return self.process.wait(timeout=timeout)

    def alive(self) -> bool:
        return self.process.poll() is None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def end(self, grace: float = 0.0) -> None:
        """Teardown: make sure the process is gone, whatever the test did to it."""
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGCONT)
        if grace:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=grace)
                return
            except subprocess.TimeoutExpired:
                pass
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)


class SchedulerProcess(ChildProcess):
    """``python -m tests.faults.scheduler_process …`` with its own record and ready files."""

    def __init__(
        self,
        workdir: Path,
        name: str,
        storage_url: str,
        prefixes: Sequence[str],
        **settings: Any,
    ) -> None:
        self.record = workdir / f"{name}.records"
        self.ready_file = workdir / f"{name}.ready"
        command = [
            sys.executable, "-m", "tests.faults.scheduler_process", "--storage-url", storage_url,
            "--name", name, "--record", str(self.record), "--ready", str(self.ready_file),
        ]  # fmt: skip
        for prefix in prefixes:
            command += ["--prefix", prefix]
        for key, value in settings.items():
            command += [f"--{key.replace('_', '-')}", str(value)]
        super().__init__(workdir, name, command)

    def wait_ready(self, timeout: float = 60) -> dict[str, float]:
        wait_until(
            lambda: self.ready_file.exists() or self.process.poll() is not None, timeout=timeout
        )
        assert self.process.poll() is None, f"{self.name} exited early:\n{self.log()}"
        info: dict[str, float] = json.loads(self.ready_file.read_text())
        return info

    def owns(self, owner: str) -> bool:
        return owner.startswith(f"{self.name}:{self.pid}:")


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


def add_jobs(
    storage: Storage, ids: Sequence[str], due_at: float | Sequence[float], payload: str = "{}"
) -> None:
    """Store jobs in pages of 5,000 (one statement or script each)."""
    dues = [due_at] * len(ids) if isinstance(due_at, (int, float)) else list(due_at)
    for first in range(0, len(ids), 5000):
        page = range(first, min(len(ids), first + 5000))
        storage.add_jobs([NewJob(ids[i], "faults.record", payload, dues[i]) for i in page])


def counts(storage: Storage) -> dict[JobState, int]:
    """Counts per state; across a server restart, retried as the scheduler itself retries."""
    return call_storage(storage.count_by_state)


def enqueued(storage: Storage) -> int:
    return counts(storage)[JobState.ENQUEUED]


@dataclass
class Tally:
    """Every job, counted through the end of a scenario."""

    scenario: str
    stored: int
    released: int  # marked Enqueued in storage
    dispatched: int  # distinct ids that reached the dispatcher / broker / worker
    lost: int
    duplicated: int
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def count(
        cls,
        scenario: str,
        expected: Iterable[str],
        seen: Iterable[str],
        storage: Storage | Sequence[Storage],
        *,
        still_scheduled: Iterable[str] = (),
        **extra: Any,
    ) -> Tally:
        """``storage``: where the jobs are stored (several, when a test uses several prefixes).
        ``still_scheduled``: ids left Scheduled on purpose (a stop), so not lost but waiting."""
        storages = [storage] if isinstance(storage, Storage) else list(storage)
        expected_ids = set(expected)
        seen_counts = Counter(seen)
        waiting = set(still_scheduled)
        unexpected = set(seen_counts) - expected_ids
        assert not unexpected, f"dispatched ids that were never stored: {sorted(unexpected)[:5]}"
        both = waiting & set(seen_counts)
        assert not both, f"ids sent and still Scheduled: {sorted(both)[:5]}"
        return cls(
            scenario=scenario,
            stored=len(expected_ids),
            released=sum(enqueued(s) for s in storages),
            dispatched=len(seen_counts),
            lost=len(expected_ids - set(seen_counts) - waiting),
            duplicated=sum(n - 1 for n in seen_counts.values()),
            extra=extra,
        )

    def report(self) -> None:
        figures = ", ".join(f"{k}={v}" for k, v in self.extra.items())
        print(
            f"\nfault report: {self.scenario}: stored={self.stored} released={self.released} "
            f"dispatched={self.dispatched} lost={self.lost} duplicated={self.duplicated}"
            + (f" ({figures})" if figures else "")
        )
        target = os.environ.get(REPORT_ENV)
        if target:
            with open(target, "a") as out:
                out.write(json.dumps({**asdict(self), "at": time.time()}) + "\n")


class ServiceProcess(ChildProcess):
    """``python -m tests.faults.service_process …``: a ``SchedulerService`` over a sharded
    store, with its own record and ready files; its instance id and lock owner is
    ``<name>:<pid>``."""

    def __init__(
        self,
        workdir: Path,
        name: str,
        storage_url: str,
        prefix: str,
        shards: int,
        **settings: Any,
    ) -> None:
        self.record = workdir / f"{name}.records"
        self.ready_file = workdir / f"{name}.ready"
        self.settings = settings
        command = [
            sys.executable, "-m", "tests.faults.service_process", "--storage-url", storage_url,
            "--prefix", prefix, "--shards", str(shards), "--name", name,
            "--record", str(self.record), "--ready", str(self.ready_file),
        ]  # fmt: skip
        for key, value in settings.items():
            command += [f"--{key.replace('_', '-')}", str(value)]
        super().__init__(workdir, name, command)

    @property
    def owner(self) -> str:
        return f"{self.name}:{self.pid}"

    def go(self) -> None:
        """Start the service of a process spawned with ``start_file=…`` (see service_process)."""
        start_file = self.settings.get("start_file")
        assert start_file, f"{self.name} was not spawned with a start_file"
        Path(start_file).touch()

    def wait_ready(self, timeout: float = 60) -> None:
        wait_until(
            lambda: self.ready_file.exists() or self.process.poll() is not None, timeout=timeout
        )
        assert self.process.poll() is None, f"{self.name} exited early:\n{self.log()}"


def longest_gaps(
    first_dispatch: dict[str, float], due: dict[str, float], shard_of_id: dict[str, int]
) -> dict[int, float]:
    """Per shard, the longest wait of a job from its due time to its first dispatch: how long
    the shard went unserved at worst. Every id of ``due`` must be in ``first_dispatch``."""
    gaps: dict[int, float] = {}
    for job_id, due_at in due.items():
        shard = shard_of_id[job_id]
        gaps[shard] = max(gaps.get(shard, 0.0), first_dispatch[job_id] - due_at)
    return gaps
