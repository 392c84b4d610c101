"""A real loopback TCP listener that counts the connections made to it, for tests that assert
"one attempt, no hidden connect or retry loop" by counting attempts instead of timing them.

``CountingListener("reset")`` accepts each connection and resets it at once (``SO_LINGER`` 0):
a client sees its server gone, as with a port nothing listens on, and each attempt is counted.
``CountingListener("silent")`` accepts and never answers: the TCP connect succeeds and the
handshake never ends, what a hung or firewalled server looks like.
``CountingListener("forward", upstream=(host, port))`` relays each connection to a real server
there: the client talks to that server, and its connections are counted.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Literal

__all__ = ["CountingListener"]


class CountingListener:
    """A listener on ``127.0.0.1:<port>`` run by threads of the test's own; ``connections``
    counts the TCP connections it accepted. Use it as a context manager."""

    def __init__(
        self,
        mode: Literal["reset", "silent", "forward"] = "reset",
        *,
        upstream: tuple[str, int] | None = None,
    ) -> None:
        if (mode == "forward") != (upstream is not None):
            raise ValueError("an upstream (host, port) goes with mode='forward', and only with it")
        self.mode = mode
        self.upstream = upstream
        self._server = socket.socket()
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(64)
        self.port = int(self._server.getsockname()[1])
        self._lock = threading.Lock()
        self._accepted = 0
        self._sockets: list[socket.socket] = []
        self._closing = False
        self._thread = threading.Thread(target=self._serve, name="counting-listener", daemon=True)
        self._thread.start()

    @property
    def connections(self) -> int:
        """The TCP connections accepted so far."""
        with self._lock:
            return self._accepted

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._server.accept()
            except OSError:
                return  # closed
            with self._lock:
                if self._closing:
                    connection.close()
                    return
                self._accepted += 1
                self._sockets.append(connection)
            if self.mode == "reset":
                linger = struct.pack("ii", 1, 0)  # close with a RST, not a FIN
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
                connection.close()
            elif self.mode == "silent":
                self._start(self._hold, connection)
            else:
                self._start(self._forward, connection)

    @staticmethod
    def _start(target: Callable[..., None], *args: object) -> None:
        threading.Thread(target=target, args=args, daemon=True).start()

    @staticmethod
    def _hold(connection: socket.socket) -> None:
        """Read (and ignore) what the client sends, never answering, until it closes."""
        with contextlib.suppress(OSError):
            while connection.recv(65536):
                pass

    def _forward(self, connection: socket.socket) -> None:
        try:
            assert self.upstream is not None
            server = socket.create_connection(self.upstream, timeout=10)
        except OSError:
            connection.close()
            return
        server.settimeout(None)
        with self._lock:
            self._sockets.append(server)
        self._start(self._pump, server, connection)
        self._pump(connection, server)

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        with self._lock:
            self._closing = True
            sockets = list(self._sockets)
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        for each in sockets:
            with contextlib.suppress(OSError):
                each.shutdown(socket.SHUT_RDWR)
            each.close()
        self._thread.join(timeout=10)

    def __enter__(self) -> CountingListener:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
