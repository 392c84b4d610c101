"""A delaying TCP proxy on loopback: network latency between scheduler and database, on demand.

Kernels without ``netem`` (containers, this project's CI) cannot add delay to a link, yet the
question the profile answers ("where does parallelism pay?") depends on the round trip to the
database. So the profile starts this forwarder itself: ``127.0.0.1:<free port>`` -> the real
server, holding every chunk ``delay`` seconds in each direction before passing it on.

It is a *delay line*, not a rate limiter: each chunk is stamped when it arrives and sent when its
own deadline passes, so chunks that follow each other closely are not delayed one after the other
(a reply split over several TCP segments costs one delay, as on a real link). Order is kept. Each
direction of each connection has one thread: it reads a chunk, sleeps until the chunk's deadline
and sends it. The stamp is the kernel's receive time of the chunk (``SO_TIMESTAMPNS``), not the
moment the thread got to read it, so a chunk that arrived while the thread slept for the one
before it is not held longer. One thread rather than a reader and a writer handing chunks over
through a queue halves the thread wake-ups per chunk: the proxy shares the machine's cores with
the scheduler it measures, and its CPU per job was as large as the scheduler's own. ``time.sleep``
has microsecond resolution here, where an event loop's timer would round a 0.5 ms delay up to a
whole millisecond.

The profile runs it in a child process (``python -m parallel_scheduler.profiling.latency_proxy``),
so its threads never compete with the measured scheduler for the GIL; ``LatencyProxy`` starts and
stops that child, which also exits when its standard input closes, so it cannot outlive the
profile.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import selectors
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from types import TracebackType

__all__ = ["DelayingProxy", "LatencyProxy", "main"]

CHUNK = 65536
ACCEPT_POLL = 0.2  # seconds: how soon the accept loop notices stop()
START_TIMEOUT = 30.0
PR_SET_TIMERSLACK = 29  # linux/prctl.h


#: Linux's SO_TIMESTAMPNS (also the control message's type, SCM_TIMESTAMPNS); the ``socket``
#: module does not name it. Its message carries a ``struct timespec`` on the real-time clock.
_SO_TIMESTAMPNS = 35
_TIMESPEC = struct.Struct("@qq")
_TIMESTAMP_SPACE = socket.CMSG_SPACE(_TIMESPEC.size)


def _stamp_arrivals(sock: socket.socket) -> None:
    """Ask the kernel to stamp received data (best effort: without it, stamps are read times)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)


def _arrival(ancillary: list[tuple[int, int, bytes]]) -> float:
    """When the chunk reached the socket (``time.time()`` scale), or now if it was not stamped."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(data) >= _TIMESPEC.size:
            seconds, nanoseconds = _TIMESPEC.unpack_from(data)
            return float(seconds + nanoseconds / 1e9)
    return time.time()


def _no_delay(sock: socket.socket) -> None:
    """Without TCP_NODELAY, Nagle's algorithm would add its own (much larger) delay."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _Connection:
    """One proxied connection: two directions, each one delaying thread."""

    def __init__(
        self,
        client: socket.socket,
        upstream: socket.socket,
        delay: float,
        on_closed: Callable[[_Connection], None],
    ) -> None:
        self._sockets = (client, upstream)
        self._delay = delay
        self._on_closed = on_closed
        self._writers_left = 2
        self._guard = threading.Lock()
        for source, sink in ((client, upstream), (upstream, client)):
            _stamp_arrivals(source)
            threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        """Read a chunk, hold it until its arrival + delay, send it; pass the half-close on."""
        try:
            while True:
                data, ancillary, _, _ = source.recvmsg(CHUNK, _TIMESTAMP_SPACE)
                if not data:
                    break
                wait = _arrival(ancillary) + self._delay - time.time()
                if wait > 0:
                    time.sleep(wait)
                sink.sendall(data)
        except OSError:
            self.abort()
        else:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)  # pass the half-close on, as TCP would
        self._writer_done()

    def _writer_done(self) -> None:
        with self._guard:
            self._writers_left -= 1
            last = self._writers_left == 0
        if last:
            for sock in self._sockets:
                sock.close()
            self._on_closed(self)

    def abort(self) -> None:
        """Wake both readers: their recv() fails, and both writers then finish."""
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class DelayingProxy:
    """Forward ``127.0.0.1:<port>`` to ``target``, delaying each direction by ``delay`` seconds."""

    def __init__(self, target: tuple[str, int], delay: float, listen_host: str = "127.0.0.1"):
        if delay < 0:
            raise ValueError(f"delay must be >= 0 seconds, not {delay!r}")
        self.target = target
        self.delay = delay
        self._listener = socket.create_server((listen_host, 0))
        self._listener.settimeout(ACCEPT_POLL)
        self.port: int = self._listener.getsockname()[1]
        self._stopping = threading.Event()
        self._connections: set[_Connection] = set()
        self._guard = threading.Lock()
        self._thread = threading.Thread(target=self._accept_loop, name="proxy-accept", daemon=True)

    def start(self) -> DelayingProxy:
        self._thread.start()
        return self

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            client.settimeout(None)
            _no_delay(client)
            _no_delay(upstream)
            with self._guard:
                self._connections.add(_Connection(client, upstream, self.delay, self._closed))

    def _closed(self, connection: _Connection) -> None:
        with self._guard:
            self._connections.discard(connection)

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join()
        self._listener.close()
        with self._guard:
            open_connections = list(self._connections)
        for connection in open_connections:
            connection.abort()


class LatencyProxy:
    """Run a ``DelayingProxy`` in a child process; a context manager that always stops it."""

    def __init__(self, target: tuple[str, int], delay: float) -> None:
        self.target = target
        self.delay = delay
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> LatencyProxy:
        host, port = self.target
        command = [
            sys.executable, "-m", "parallel_scheduler.profiling.latency_proxy",
            "--target", f"{host}:{port}", "--delay-ms", repr(self.delay * 1000),
        ]  # fmt: skip
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            self.port = int(json.loads(self._first_line(self._process))["port"])
        except BaseException:
            self.close()
            raise
        return self

    @staticmethod
    def _first_line(process: subprocess.Popen[bytes]) -> bytes:
        assert process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            if not selector.select(START_TIMEOUT):
                raise RuntimeError(f"the latency proxy did not start within {START_TIMEOUT:.0f} s")
        line = process.stdout.readline()
        if not line:
            raise RuntimeError(f"the latency proxy exited at start (status {process.wait()})")
        return line

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def cpu_seconds(self) -> float:
        """CPU time the proxy process has used so far (user + system), to judge its own cost."""
        import psutil

        if self._process is None or self._process.poll() is not None:
            return 0.0
        times = psutil.Process(self._process.pid).cpu_times()
        return float(times.user + times.system)

    def close(self) -> None:
        """Close its stdin (it exits by itself), then SIGTERM/SIGKILL this child by pid if not."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.terminate()
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stdout is not None:
            process.stdout.close()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _target(raw: str) -> tuple[str, int]:
    host, separator, port = raw.rpartition(":")
    if not separator or not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"{raw!r}: expected HOST:PORT")
    return host.strip("[]"), int(port)


def _tight_timers() -> None:
    """Linux rounds a sleeping thread's wake-up up by its timer slack (50 us by default) to
    batch wake-ups; a delay line wants its 0.5 ms to be 0.5 ms, so ask for 1 ns (best effort)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)


def main(argv: Sequence[str] | None = None) -> int:
    """The child process: print ``{"port": N}``, serve until standard input closes."""
    _tight_timers()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", type=_target, required=True, metavar="HOST:PORT")
    parser.add_argument("--delay-ms", type=float, required=True, help="delay in each direction")
    ns = parser.parse_args(argv)
    proxy = DelayingProxy(ns.target, ns.delay_ms / 1000).start()
    print(json.dumps({"port": proxy.port}), flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        sys.stdin.buffer.read()  # returns at EOF: the parent closed the pipe, or died
    proxy.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
