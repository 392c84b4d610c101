"""Pauses on Redis (``PauseStore``): the part of ``RedisStorage`` that pauses and resumes the
jobs of a queue or a task.

Keys: ``pauses`` (hash: ``queue:<name>`` or ``task:<name>`` -> ``<paused_at> <JSON [paused_by,
note]>``) and ``state:held`` (the held jobs by due time, the ``HELD`` state index). A held job is
never in ``schedule``, so nothing that reads or claims the due set sees it.

Every script that makes a job due (accept, firings, unclaim, back-off, recovery, reschedule) reads
the pauses first (``pauses_in_force`` in ``lua/_common.lua``: one ``HLEN`` when none is in force)
and holds the jobs a pause matches instead. ``pause`` puts the pause in force, then sweeps the due
set in chunks of ``SWEEP_CHUNK`` members, one script each (``lua/move_paused.lua``), so a paused
queue of a million due jobs never blocks the server for long; a claim script that meets a job of a
paused name before the sweep does holds it itself. ``resume`` ends the pause, then sweeps the held
set the same way, earliest first, giving back the jobs no other pause holds. A resume that failed
part-way leaves held jobs no pause holds: resuming again (even a name no longer paused) finishes
the sweep, which otherwise finds nothing to move.
"""

from __future__ import annotations

import json

from storage_adapters.checks.pauses import check_pause, check_pause_name
from storage_adapters.records import JobState, PauseKind, PauseRecord
from storage_adapters.redis.plumbing import RedisPlumbing

__all__ = ["PAUSE_SCRIPTS", "SWEEP_CHUNK", "RedisPauseStore"]

#: The scripts (lua/<name>.lua) this mixin runs; the host loads them with its own.
PAUSE_SCRIPTS = ("put_pause", "remove_pause", "move_paused")
#: Members of the due (or held) set one sweep script examines: about 30 ms of the server when
#: most of them move (200,000 jobs held in about 1.3 s), other clients' commands between chunks.
SWEEP_CHUNK = 5000


class RedisPauseStore(RedisPlumbing):
    """Pause and resume queues and tasks, for ``RedisStorage`` to inherit."""

    def pause(self, kind: PauseKind, name: str, note: str, paused_by: str) -> int:
        checked, name, note, paused_by = check_pause(kind, name, note, paused_by)
        record = json.dumps([paused_by, note])
        self._run("put_pause", [self._key("pauses")], [f"{checked.value}:{name}", record])
        return self._sweep(hold=True)

    def resume(self, kind: PauseKind, name: str) -> int:
        checked, name = check_pause_name(kind, name)
        self._run("remove_pause", [self._key("pauses")], [f"{checked.value}:{name}"])
        return self._sweep(hold=False)

    def list_pauses(self) -> list[PauseRecord]:
        with self._talking() as client:
            stored = client.hgetall(self._key("pauses"))
        records = []
        for field, value in stored.items():
            kind, _, name = field.partition(":")
            paused_at, _, record = value.partition(" ")
            try:
                paused_by, note = json.loads(record)
                records.append(
                    PauseRecord(PauseKind(kind), name, str(note), str(paused_by), float(paused_at))
                )
            except (ValueError, TypeError):  # a hand-edited field: listing must not crash
                continue
        return sorted(records, key=lambda pause: (pause.kind.value, pause.name))

    def _sweep(self, *, hold: bool) -> int:
        """Move every job the pauses now in force hold from the due set to the held set
        (``hold``), or every one they no longer hold back; returns how many moved."""
        due, held = self._key("schedule"), self._state_key(JobState.HELD)
        keys = [due, held, self._key("pauses")] if hold else [held, due, self._key("pauses")]
        after: tuple[str, str] = ("", "")
        total = 0
        while True:
            args = [self._key("job:"), "hold" if hold else "release", *after, SWEEP_CHUNK]
            examined, moved, score, member = self._run("move_paused", keys, args)
            total += int(moved)
            if int(examined) < SWEEP_CHUNK:
                return total
            after = (score, member)
