"""``parallel-scheduler profile``: small real sweeps, their verification, outputs and proxy."""

from __future__ import annotations

import json
import socket
import statistics
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from parallel_scheduler.cli import main
from parallel_scheduler.engine.stats import PassStats
from parallel_scheduler.profiling.latency_proxy import LatencyProxy
from parallel_scheduler.profiling.report import knee_of
from parallel_scheduler.profiling.verify import Observation, problems
from storage_adapters import ClaimedJob, JobState
from tests.conftest import POSTGRESQL_URL, RABBITMQ_URL, REDIS_URL, require_server

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def profile(tmp_path: Path, *args: str) -> tuple[int, dict[str, Any] | None]:
    """Run the command with small defaults; returns its exit status and the JSON it wrote."""
    out = tmp_path / "profile.json"
    code = main(["--log-level", "WARNING", "profile", "--out", str(out), *args])
    return code, json.loads(out.read_text()) if code == 0 else None


def test_sqlite_sweep_is_verified_and_writes_table_json_and_png(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    png = tmp_path / "curve.png"
    code, report = profile(
        tmp_path,
        "--batch-sizes", "10,30", "--parallelism", "1,3", "--repetitions", "2",
        "--warmup", "1", "--png", str(png), "--seed", "7",
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert report is not None
    for header in ("Batching On?", "Batch Size", "Parallelism Degree", "Sec/Batch", "Jobs/s"):
        assert header in out
    assert "% Improvement" in out and "◀ knee" in out
    # 4 cells x (1 warm-up + 2 kept) passes, each verified before any figure was printed.
    assert out.index("verified: 12 passes, 240 jobs") < out.index("Sec/Batch")
    assert report["verification"] == {**report["verification"], "passes": 12, "jobs": 240}
    cells = {(c["batch_size"], c["parallelism"]): c for c in report["cells"]}
    assert set(cells) == {(10, 1), (10, 3), (30, 1), (30, 3)}
    for cell in cells.values():
        assert len(cell["seconds"]) == 2 and len(cell["warmup_seconds"]) == 1
        assert cell["minimum"] <= cell["median"] <= cell["maximum"]
        assert cell["jobs_per_second"] == pytest.approx(cell["batch_size"] / cell["median"])
        assert all(p["released"] == cell["batch_size"] for p in cell["passes"])
    assert cells[(10, 1)]["improvement"] == 0.0
    assert set(report["knees"]) == {"10", "30"}
    assert set(report["knees"].values()) <= {1, 3}
    assert png.read_bytes().startswith(PNG_MAGIC)


def test_existing_output_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "profile.json").write_text("yesterday's figures")
    database = tmp_path / "untouched.db"
    code, _ = profile(tmp_path, "--storage-url", f"sqlite:///{database}")
    assert code == 2
    assert "profile.json exists; the profile never overwrites" in capsys.readouterr().err
    assert (tmp_path / "profile.json").read_text() == "yesterday's figures"
    assert not database.exists() and not (tmp_path / "profile.png").exists()


def test_latency_needs_a_storage_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = profile(tmp_path, "--latency-ms", "1", "--no-png")
    assert code == 2 and report is None
    assert "--latency-ms needs a storage server reached over TCP" in capsys.readouterr().err


def test_a_pass_that_sends_a_job_twice_stops_the_run_before_any_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from parallel_scheduler.profiling import workload

    def twice(
        self: workload.CountingDispatcher, jobs: Sequence[ClaimedJob], keep_going: object = None
    ) -> None:
        self.record([*jobs, jobs[0]])

    monkeypatch.setattr(workload.CountingDispatcher, "dispatch_many", twice)
    code, report = profile(
        tmp_path, "--batch-sizes", "10", "--parallelism", "2", "--release-mode", "batch"
    )
    captured = capsys.readouterr()
    assert code == 2 and report is None
    assert "verification failed for batch size 10 x parallelism 2, warm-up 1" in captured.err
    assert "dispatched more than once" in captured.err
    assert "Sec/Batch" not in captured.out and not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("points", "knee"),
    [
        ([(1, 10.0), (2, 5.0), (5, 2.1), (10, 2.0), (20, 2.05)], 5),  # 2.1 is within 10% of 2.0
        ([(1, 10.0), (2, 5.0), (5, 2.3), (10, 2.0)], 10),
        ([(1, 1.0), (2, 1.5)], 1),  # parallelism never paid
        ([], None),
    ],
)
def test_knee_is_the_smallest_parallelism_within_ten_percent_of_the_best(
    points: list[tuple[int, float]], knee: int | None
) -> None:
    assert knee_of(points) == knee


def test_verification_names_lost_duplicated_and_leftover_jobs() -> None:
    expected = frozenset({"a", "b", "c"})
    clean = Observation(
        expected=expected,
        stats=PassStats(lock_acquired=True, released=3, fetched=3),
        handed_over=Counter({"a": 1, "b": 1, "c": 1}),
        counts=dict.fromkeys(JobState, 0) | {JobState.ENQUEUED: 3},
        stored_ids=expected,
        all_ids=expected,
        broker_messages=3,
    )
    assert problems(clean) == []
    broken = Observation(
        expected=expected,
        stats=PassStats(lock_acquired=True, released=2, fetched=3, failed=1),
        handed_over=Counter({"a": 2, "b": 1}),
        counts=dict.fromkeys(JobState, 0) | {JobState.ENQUEUED: 2, JobState.SCHEDULED: 1},
        stored_ids=frozenset({"a", "b"}),
        all_ids=expected,
        broker_messages=3,
    )
    found = "; ".join(problems(broken))
    assert "released 2 of 3" in found and "1 failed" in found
    assert "1 job(s) never reached the dispatcher (lost): c" in found
    assert "1 job(s) dispatched more than once: a" in found
    assert "storage still holds 1 scheduled job(s)" in found
    assert "1 job(s) not enqueued in storage: c" in found


@pytest.fixture
def echo_server() -> Iterator[tuple[str, int]]:
    """A loopback TCP echo server: the proxy's far end, with no database in the way."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener.getsockname()[:2]
    stop.set()
    listener.close()


def median_rtt(address: tuple[str, int], samples: int = 20) -> float:
    with socket.create_connection(address) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        times = []
        for i in range(samples + 3):
            started = time.perf_counter()
            conn.sendall(b"ping %d" % i)
            assert conn.recv(100) == b"ping %d" % i
            times.append(time.perf_counter() - started)
    return statistics.median(times[3:])


def test_proxy_adds_the_configured_delay_each_way_and_keeps_the_bytes(
    echo_server: tuple[str, int],
) -> None:
    delay = 0.002
    with LatencyProxy(echo_server, delay) as proxy:
        through = ("127.0.0.1", proxy.port)
        rtt = median_rtt(through)
        blob = bytes(range(256)) * 8192  # 2 MiB: many chunks, which must arrive whole and in order
        with socket.create_connection(through) as conn:
            sender = threading.Thread(target=conn.sendall, args=(blob,))
            sender.start()
            echoed = bytearray()
            while len(echoed) < len(blob):
                echoed += conn.recv(1 << 20)
            sender.join()
        assert proxy.cpu_seconds() >= 0
        pid = proxy.pid
    assert rtt >= 2 * delay, f"median RTT {rtt * 1000:.2f} ms through a {delay * 1000} ms proxy"
    assert bytes(echoed) == blob
    assert pid is not None and proxy.pid is None  # stopped by the context manager


@pytest.mark.postgresql
def test_postgresql_through_the_latency_proxy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    require_server("postgresql")
    code, report = profile(
        tmp_path,
        "--storage-url", POSTGRESQL_URL, "--latency-ms", "1", "--batch-sizes", "20",
        "--parallelism", "1,4", "--repetitions", "1", "--no-png",
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert report is not None
    assert "storage RTT through the proxy (+1 ms each way)" in out
    rtt = report["rtt_ms"]
    assert rtt["through_proxy"] >= 2.0 > rtt["direct"]
    assert [len(c["seconds"]) for c in report["cells"]] == [1, 1]
    import psycopg

    dsn = POSTGRESQL_URL.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn) as conn:
        pattern = f"prof_{report['run_id']}%"
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE tablename LIKE %s", [pattern])
        assert tables.fetchone() == (0,)  # every cell's prefix was dropped


@pytest.mark.parametrize(
    "broker",
    [
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("rabbitmq", marks=pytest.mark.rabbitmq),
    ],
)
def test_a_real_broker_receives_each_job_once_and_its_queue_is_removed(
    broker: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    require_server(broker)
    url = REDIS_URL if broker == "redis" else RABBITMQ_URL
    code, report = profile(
        tmp_path,
        "--broker", url, "--batch-sizes", "25", "--parallelism", "1,3", "--repetitions", "1",
        "--release-mode", "batch", "--no-png",
    )  # fmt: skip
    assert code == 0, capsys.readouterr()
    assert report is not None and report["verification"]["jobs"] == 100
    from kombu import Connection

    with Connection(url) as connection:
        channel = connection.default_channel
        if broker == "redis":
            name = report["broker_queue"]
            assert not channel.client.exists(name, f"_kombu.binding.{name}")
        else:
            with pytest.raises(Exception, match="NOT_FOUND"):
                channel.queue_declare(report["broker_queue"], passive=True)
