"""How a prefork pool's children hand their outcome metrics to the process serving ``/metrics``:
each child writes its tallies (``outcome_metrics``) to ``<folder>/<pid>.json`` (a whole file,
renamed into place), at most once every ``WRITE_EVERY`` seconds and when it exits; the serving
process sums the files. A file whose process has ended is folded into a running total and
removed, so a pool that replaces its children (``--max-tasks-per-child``) keeps one file per
live child and counters never go down.

The folder is made by the worker's main process before its pool forks (the children inherit
the spool through the fork), and removed when the worker stops.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from celery import signals

from parallel_scheduler.celery.outcome_metrics import Tallies, tallies

__all__ = ["WRITE_EVERY", "OutcomeSpool"]

logger = logging.getLogger(__name__)
#: Seconds between two writes of a child's file (while it counts).
WRITE_EVERY = 1.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, another user's: not one of ours, but alive
        return True
    return True


class OutcomeSpool:
    """One worker's spool: made in its main process, written by its pool's children."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or Path(tempfile.mkdtemp(prefix="parallel-scheduler-outcomes-"))
        self._owner = os.getpid()
        self._retired = Tallies()  # counts of children that have ended
        self._read_guard = threading.Lock()
        self._writer_pid = 0
        self._start_guard = threading.Lock()
        self._dirty = threading.Event()
        tallies().changed.append(self._changed)
        signals.worker_process_shutdown.connect(self._exiting, weak=False)

    # -- in a pool child ---------------------------------------------------------------------

    def _changed(self) -> None:
        if os.getpid() == self._owner:  # the serving process reads its own tallies directly
            return
        with self._start_guard:
            if self._writer_pid != os.getpid():  # the first count in this child: its writer
                self._writer_pid = os.getpid()
                self._dirty = threading.Event()
                loop = threading.Thread(target=self._write_loop, name="outcome-spool", daemon=True)
                loop.start()
        self._dirty.set()

    def _write_loop(self) -> None:
        dirty = self._dirty
        while True:
            dirty.wait()
            dirty.clear()
            self.write()
            # at most one write a second; a change meanwhile is written at the next turn
            threading.Event().wait(WRITE_EVERY)

    def _exiting(self, **_: Any) -> None:
        if self._writer_pid == os.getpid():
            self.write()

    def write(self) -> None:
        """Write this child's tallies now (also called when the child exits)."""
        if os.getpid() == self._owner:
            return
        path = self.folder / f"{os.getpid()}.json"
        temporary = path.with_suffix(".tmp")
        try:
            temporary.write_text(json.dumps(tallies().copy().to_json()), encoding="utf-8")
            os.replace(temporary, path)
        except OSError:  # the worker is stopping and removed the folder; never fail a task
            logger.debug("writing outcome metrics to %s failed", path, exc_info=True)

    # -- in the serving process --------------------------------------------------------------

    def read(self) -> Tallies:
        """Every child's tallies, those of ended children included."""
        with self._read_guard:
            total = Tallies()
            total.add(self._retired)
            for path in sorted(self.folder.glob("*.json")):
                try:
                    pid = int(path.stem)
                    ended = not _alive(pid)  # asked first: then what is read is its last write
                    found = Tallies.from_json(json.loads(path.read_text(encoding="utf-8")))
                except (OSError, ValueError) as exc:
                    logger.debug("skipping outcome metrics file %s: %s", path, exc)
                    continue
                total.add(found)
                if ended:  # keep its counts, drop its file
                    self._retired.add(found)
                    path.unlink(missing_ok=True)
            return total

    def close(self) -> None:
        """Remove the folder (the worker stops)."""
        if os.getpid() != self._owner:
            return
        signals.worker_process_shutdown.disconnect(self._exiting)
        if self._changed in tallies().changed:
            tallies().changed.remove(self._changed)
        shutil.rmtree(self.folder, ignore_errors=True)
