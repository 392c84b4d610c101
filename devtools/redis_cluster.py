"""A throwaway six-node Redis Cluster (three masters, one replica each) from the installed binaries.

Tests need a real cluster (slots, redirections, failover), and a fresh machine has only the
``redis-server`` and ``redis-cli`` packages. ``start()`` picks free ports at run time (each node
also needs its port + 10000 for the cluster bus), starts six ``redis-server`` processes in their own
folders under one temporary folder, joins them with ``redis-cli --cluster create`` and waits, with a
deadline, until every node says ``cluster_state:ok`` and every slot is covered. ``stop()`` ends
exactly the processes it started (by their recorded pids) and removes the folders.

Python: ``cluster = start(); cluster.url; cluster.master_of(key); cluster.kill_master_of(key);
cluster.stop()``. Command line: ``python -m devtools.redis_cluster start`` prints
``export PARALLEL_SCHEDULER_TEST_REDIS_CLUSTER_URL=...`` and records the cluster in
``$PARALLEL_SCHEDULER_SERVICES_DIR/redis-cluster``; ``python -m devtools.redis_cluster stop``
ends it.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "ENV",
    "MissingBinaryError",
    "RedisCluster",
    "free_ports",
    "key_slot",
    "recorded",
    "start",
    "stop_recorded",
]

ENV = "PARALLEL_SCHEDULER_TEST_REDIS_CLUSTER_URL"
NODES = 6
BUS_OFFSET = 10_000  # Redis Cluster's bus port is always the client port + 10000
READY_SECONDS = 60.0
STOP_SECONDS = 15.0
STATE_FILE = "cluster.json"
INSTALL_HINT = (
    "Redis Cluster tests need redis-server and redis-cli; run `apt-get install -y redis-server` "
    "(the package ships both), or set {env}=redis+cluster://host:port,... to a cluster of your own"
)


class MissingBinaryError(RuntimeError):
    """``redis-server`` or ``redis-cli`` is not installed."""


def _binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise MissingBinaryError(f"{name} is not installed. " + INSTALL_HINT.format(env=ENV))
    return path


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(count: int) -> list[int]:
    """``count`` ports whose bus ports (+10000) are free too, chosen at random below 55536 so
    the bus port stays a valid port."""
    chosen: list[int] = []
    for _ in range(10_000):
        port = random.randint(20_000, 65_535 - BUS_OFFSET)
        if port in chosen or port + BUS_OFFSET in chosen:
            continue
        if _port_free(port) and _port_free(port + BUS_OFFSET):
            chosen.append(port)
            if len(chosen) == count:
                return chosen
    raise RuntimeError(f"found no {count} free port pairs (port and port + {BUS_OFFSET})")


def key_slot(key: str) -> int:
    """The cluster slot of ``key`` (CRC16 of its hash tag, mod 16384), as the server computes."""
    from redis.crc import key_slot as crc_slot

    return int(crc_slot(key.encode()))


def _is_our_server(pid: int, port: int) -> bool:
    """The pid still runs ``redis-server`` on ``port`` (not a recycled pid of something else)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()  # redis-server rewrites its title
    except OSError:
        return False
    return b"redis-server" in cmdline and str(port).encode() in cmdline


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child of ours counts as gone
        status = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return status != "Z"


def _end(pid: int, port: int, sig: int) -> None:
    if _is_our_server(pid, port):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


@dataclass
class RedisCluster:
    """A running throwaway cluster: its folder, the node ports and their ``redis-server`` pids
    (``pids[i]`` serves ``ports[i]``)."""

    folder: Path
    ports: list[int]
    pids: list[int]
    killed: set[int] = field(default_factory=set)

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{port}" for port in self.ports)

    def _client(self, port: int, timeout: float = 2.0) -> Any:
        import redis

        return redis.Redis(port=port, socket_timeout=timeout, decode_responses=True)

    def master_of(self, key: str) -> tuple[int, int]:
        """``(port, pid)`` of the master that serves ``key``'s slot now, asked of a live node."""
        slot = key_slot(key)
        for port in self.ports:
            if self.pids[self.ports.index(port)] in self.killed:
                continue
            try:
                ranges = self._client(port).execute_command("CLUSTER", "SLOTS")
            except Exception:  # a node that cannot answer now: ask the next
                continue
            for first, last, master, *_ in ranges:
                if first <= slot <= last:
                    owner = int(master[1])
                    return owner, self.pids[self.ports.index(owner)]
        raise RuntimeError(f"no live node knows the master of slot {slot}")

    def kill_master_of(self, key: str) -> tuple[int, int]:
        """``kill -9`` the master serving ``key``'s slot (a process this cluster started) and
        return its ``(port, pid)``; its replica takes over after the failure detection."""
        port, pid = self.master_of(key)
        _end(pid, port, signal.SIGKILL)
        self.killed.add(pid)
        deadline = time.monotonic() + STOP_SECONDS
        while _alive(pid):
            _reap(pid)
            if time.monotonic() > deadline:
                raise RuntimeError(f"redis-server pid {pid} survived SIGKILL")
            time.sleep(0.02)
        return port, pid

    def wait_for_master_change(self, key: str, old_port: int, timeout: float = 60.0) -> int:
        """Wait until a live node serves ``key``'s slot as master in place of ``old_port`` and
        the cluster is ok again (the promoted master has no replica then); return the new
        master's port."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                port, _ = self.master_of(key)
            except RuntimeError:
                port = old_port
            if port != old_port and self._all_ok(skip_killed=True, replicas=False):
                return port
            time.sleep(0.1)
        raise TimeoutError(
            f"no replica took over {key!r}'s slot from port {old_port} in {timeout} s"
        )

    def restart(self, port: int, timeout: float = READY_SECONDS) -> int:
        """Start the killed node on ``port`` again; it rejoins as a replica of the master that
        replaced it. Waits until every node is ok and every master has its replica online
        again; returns the new pid (recorded, so ``stop`` ends it)."""
        index = self.ports.index(port)
        if self.pids[index] not in self.killed:
            raise RuntimeError(f"node {port} was not killed by this cluster")
        self.killed.discard(self.pids[index])
        self.pids[index] = _launch(_binary("redis-server"), port, self.folder / str(port))
        self.record()
        deadline = time.monotonic() + timeout
        _wait_answering(port, self.pids[index], self.folder / str(port) / "redis.log", deadline)
        while not self._all_ok():
            if time.monotonic() > deadline:
                raise TimeoutError(f"node {port} did not rejoin as a replica in {timeout} s")
            time.sleep(0.1)
        return self.pids[index]

    def wait_whole(self, timeout: float = READY_SECONDS) -> None:
        """Wait until every node is up and ok, every slot is served and every master has its
        replica online: the cluster as ``start`` left it (for a test that takes it over from
        one that killed and restarted a node)."""
        deadline = time.monotonic() + timeout
        while not self._all_ok():
            if self.killed:
                raise RuntimeError(f"nodes {sorted(self.killed)} were killed and not restarted")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the cluster on {self.ports} was not whole within {timeout} s")
            time.sleep(0.1)

    def _all_ok(self, skip_killed: bool = False, replicas: bool = True) -> bool:
        for port, pid in zip(self.ports, self.pids, strict=True):
            if skip_killed and pid in self.killed:
                continue
            try:
                info = self._client(port).execute_command("CLUSTER", "INFO")
            except Exception:  # not up yet
                return False
            text = info if isinstance(info, str) else str(info)
            if "cluster_state:ok" not in text or "cluster_slots_assigned:16384" not in text:
                return False
            if "cluster_slots_ok:16384" not in text:
                return False
            try:
                if replicas and not self._replicating(port):
                    return False
            except Exception:  # went away meanwhile
                return False
        return True

    def _replicating(self, port: int) -> bool:
        """A master has a replica online, a replica has its link to its master up: until then
        a failover has no one to promote and ``WAIT`` counts no replica."""
        info = self._client(port).info("replication")
        if info.get("role") == "master":
            replica = info.get("slave0")
            return isinstance(replica, dict) and replica.get("state") == "online"
        return bool(info.get("master_link_status") == "up")

    def stop(self) -> None:
        """End the recorded servers (SIGTERM, then SIGKILL at the deadline) and remove the
        folder."""
        for port, pid in zip(self.ports, self.pids, strict=True):
            _end(pid, port, signal.SIGTERM)
        deadline = time.monotonic() + STOP_SECONDS
        for port, pid in zip(self.ports, self.pids, strict=True):
            while _alive(pid):
                _reap(pid)
                if time.monotonic() > deadline:
                    _end(pid, port, signal.SIGKILL)
                time.sleep(0.02)
            _reap(pid)
        shutil.rmtree(self.folder, ignore_errors=True)

    def record(self) -> None:
        state = {"folder": str(self.folder), "ports": self.ports, "pids": self.pids}
        (self.folder / STATE_FILE).write_text(json.dumps(state))


def _wait_answering(port: int, pid: int, log: Path, deadline: float) -> None:
    import redis

    client = redis.Redis(port=port, socket_timeout=1.0, socket_connect_timeout=1.0)
    while True:
        try:
            if client.ping():
                return
        except redis.RedisError:
            pass
        if not _alive(pid):
            raise RuntimeError(f"redis-server on port {port} exited: {log.read_text()[-2000:]}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"redis-server on port {port} did not answer in time")
        time.sleep(0.05)


def _launch(server: str, port: int, node: Path) -> int:
    """Start one node's ``redis-server`` in its folder (its ``nodes.conf`` says who it is, so a
    node started again rejoins the cluster as it was); returns its pid."""
    with (node / "redis.log").open("a") as log:
        process = subprocess.Popen(
            [server, "--port", str(port), "--bind", "127.0.0.1",
             "--cluster-enabled", "yes", "--cluster-config-file", str(node / "nodes.conf"),
             "--cluster-node-timeout", "2000", "--repl-diskless-sync-delay", "0",
             "--dir", str(node), "--save", "",
             "--appendonly", "no", "--daemonize", "no"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
    return process.pid


def start(folder: Path | None = None, timeout: float = READY_SECONDS) -> RedisCluster:
    """Start a six-node cluster and wait until it serves every slot; the caller stops it."""
    server, cli = _binary("redis-server"), _binary("redis-cli")
    folder = Path(tempfile.mkdtemp(prefix="ps-redis-cluster-")) if folder is None else folder
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    cluster = RedisCluster(folder, free_ports(NODES), [])
    deadline = time.monotonic() + timeout
    try:
        for port in cluster.ports:
            node = folder / str(port)
            node.mkdir()
            cluster.pids.append(_launch(server, port, node))
        cluster.record()
        for port, pid in zip(cluster.ports, cluster.pids, strict=True):
            _wait_answering(port, pid, folder / str(port) / "redis.log", deadline)
        nodes = [f"127.0.0.1:{port}" for port in cluster.ports]
        created = subprocess.run(
            [cli, "--cluster", "create", *nodes, "--cluster-replicas", "1", "--cluster-yes"],
            capture_output=True, text=True, timeout=max(1.0, deadline - time.monotonic()),
        )  # fmt: skip
        if created.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed: {created.stdout[-2000:]}")
        while not cluster._all_ok():
            if time.monotonic() > deadline:
                raise TimeoutError(f"the cluster on {nodes} was not ok within {timeout} s")
            time.sleep(0.1)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _state_folder() -> Path:
    base = Path(
        os.environ.get("PARALLEL_SCHEDULER_SERVICES_DIR", "/tmp/parallel-scheduler-services")
    )
    return base / "redis-cluster"


def _recorded(folder: Path | None) -> RedisCluster | None:
    state_file = (folder or _state_folder()) / STATE_FILE
    if not state_file.exists():
        return None
    state = json.loads(state_file.read_text())
    return RedisCluster(Path(state["folder"]), state["ports"], state["pids"])


def recorded(folder: Path | None = None) -> RedisCluster | None:
    """The cluster a ``start`` recorded in ``folder``, when every node it started still runs
    and it is whole (every slot served, every master with its replica); else ``None``."""
    cluster = _recorded(folder)
    if cluster is None:
        return None
    nodes = zip(cluster.ports, cluster.pids, strict=True)
    if not all(_is_our_server(pid, port) for port, pid in nodes):
        return None
    return cluster if cluster._all_ok() else None


def stop_recorded(folder: Path | None = None) -> None:
    """Stop the cluster recorded in ``folder`` by a command-line ``start`` (nothing if none)."""
    cluster = _recorded(folder)
    if cluster is not None:
        cluster.stop()


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1] not in ("start", "stop"):
        print("usage: python -m devtools.redis_cluster start|stop", file=sys.stderr)
        return 2
    folder = _state_folder()
    if argv[1] == "stop":
        stop_recorded(folder)
        return 0
    stop_recorded(folder)  # a previous start's cluster would otherwise be orphaned
    try:
        cluster = start(folder)
    except (MissingBinaryError, RuntimeError, TimeoutError) as exc:
        print(f"redis cluster: {exc}", file=sys.stderr)
        return 1
    print(f"export {ENV}='{cluster.url}'")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
