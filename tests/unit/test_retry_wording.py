"""The WARNING of a retried send or storage call says in words what failed and when it is
retried, never the private name of the function retried (issue 19, section 6)."""

from __future__ import annotations

import logging
import socket

import pytest

from parallel_scheduler.engine.retrying import call_dispatcher


def _unused_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_send_retry_warning_names_what_failed_in_words(caplog: pytest.LogCaptureFixture) -> None:
    port = _unused_port()

    def send() -> None:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()

    caplog.set_level(logging.WARNING, logger="parallel_scheduler.engine.retrying")
    with pytest.raises(ConnectionRefusedError):
        call_dispatcher(send, attempts=2, what="sending 3 job(s) to the broker")
    logger = "parallel_scheduler.engine.retrying"
    lines = [r.getMessage() for r in caplog.records if r.name == logger]
    assert len(lines) == 1, lines
    assert lines[0].startswith("sending 3 job(s) to the broker failed (ConnectionRefusedError:")
    assert "retrying in" in lines[0]
    assert "<locals>" not in lines[0] and "Retrying" not in lines[0]
