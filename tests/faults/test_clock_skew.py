"""Two scheduler processes whose clocks are five minutes apart release every job at the storage
clock's due time: the host whose clock runs ahead does not release early, the one behind does
not release late, and where they share jobs each job goes out once."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest

from devtools.scheduler_process import read_dispatches
from devtools.servers import Server
from devtools.waiting import wait_until
from storage_adapters import Storage
from tests.conftest import unique_prefix
from tests.faults.harness import SchedulerProcess, Tally, add_jobs

pytestmark = [pytest.mark.slow, pytest.mark.postgresql]

SKEW = 300.0  # five minutes, each way
POLL = 0.1
# The job is due in 60 s; 3 to 6 s shows the same (a host five minutes ahead sees it
# as long overdue from the first moment) at a tenth of the suite's time.
FIRST_DUE, SPREAD, PER_PREFIX = 3.0, 3.0, 10
LATE_SLACK = 1.5  # scheduling noise on a loaded machine, beyond one poll interval


def test_skewed_hosts_release_on_the_storage_clock(
    postgres: Server,
    open_storage: Callable[[str, str], Storage],
    spawn: Callable[..., SchedulerProcess],
) -> None:
    names = [unique_prefix() for _ in range(3)]
    ahead_only, behind_only, shared = (open_storage(postgres.url, name) for name in names)
    prefix = dict(zip((ahead_only, behind_only, shared), names, strict=True))
    settings = {"poll_interval": POLL, "lock_lease": 3.0, "parallelism": 2}
    # Given a host five minutes ahead and one five minutes behind (time.time shifted in-process)
    ahead = spawn(
        "ahead", postgres.url, [prefix[ahead_only], prefix[shared]], clock_offset=SKEW, **settings
    )
    behind = spawn(
        "behind", postgres.url, [prefix[behind_only], prefix[shared]], clock_offset=-SKEW,
        **settings,
    )  # fmt: skip
    for process, offset in ((ahead, SKEW), (behind, -SKEW)):
        info = process.wait_ready()
        assert info["believed"] - info["real"] == pytest.approx(offset, abs=1.0)
    # When jobs fall due a few seconds from now, by the storage server's clock
    due: dict[str, float] = {}
    for storage in (ahead_only, behind_only, shared):
        now = storage.now()
        ids = [f"{prefix[storage]}-{i}" for i in range(PER_PREFIX)]
        times = [now + FIRST_DUE + SPREAD * i / PER_PREFIX for i in range(PER_PREFIX)]
        add_jobs(storage, ids, times)
        due.update(zip(ids, times, strict=True))
    records = [ahead.record, behind.record]
    wait_until(lambda: len(read_dispatches(records)) >= len(due), timeout=FIRST_DUE + SPREAD + 30)
    # Then each goes out once, at its due time by the storage clock, whichever host sent it
    dispatches = read_dispatches(records)
    early = max(due[d.job_id] - d.at for d in dispatches)
    late = max(d.at - due[d.job_id] for d in dispatches)
    by = {d.job_id: d.by for d in dispatches}
    tally = Tally.count(
        f"scheduler clocks {SKEW:.0f} s ahead and behind", due, [d.job_id for d in dispatches],
        [ahead_only, behind_only, shared], earliest_s_before_due=round(early, 3),
        latest_s_after_due=round(late, 3),
        shared_jobs_sent_by=dict(Counter(by[i] for i in due if i.startswith(prefix[shared]))),
    )  # fmt: skip
    tally.report()
    assert tally.lost == 0 and tally.duplicated == 0
    assert early <= 0.01, f"a job went out {early:.3f} s before it was due"
    assert late <= POLL + LATE_SLACK, f"a job went out {late:.3f} s after it was due"
    assert all(by[i] == "ahead" for i in due if i.startswith(prefix[ahead_only]))
    assert all(by[i] == "behind" for i in due if i.startswith(prefix[behind_only]))
