"""The crash bounds of the two fast release paths, as ``benchmarks/crash_bounds.py`` measures
them, at a small size: the same run (``run_one``) and the same verdict (``verdict``), so the
table the README's Reliability section prints and this test cannot drift apart.

* ``fast_publish``: PostgreSQL storage, a Redis broker, one atomic push per chunk; what a
  SIGKILL or SIGSTOP of the lock holder may send twice is the chunks in flight, at most
  ``min(batch_size, parallelism * TRANSACTION_CHUNK)``;
* ``one_script``: Redis storage and broker on one server, jobs carrying their messages, pushed
  and marked in one script: nothing may go twice.

Either way nothing is lost, nothing is logged as "sent after its claim expired", and the fault
lands in the middle of a release (the strike waits for the first pushes). The ``per_job`` and
``batch`` paths' bounds are asserted by ``test_lock_holder_faults.py`` and
``test_takeover_and_stall_bounds.py`` (SIGKILL and SIGSTOP each), so they are not repeated here.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from benchmarks.crash_bounds import PATHS, bound, run_one, verdict
from devtools.servers import PostgresServer, RedisServer

pytestmark = [pytest.mark.slow, pytest.mark.postgresql, pytest.mark.redis]

#: The benchmark's options at a small size: a short lease and poll (the take-over bound is
#: asserted elsewhere), enough jobs that the fast paths are still releasing when struck.
SMALL = argparse.Namespace(
    jobs=4_000,
    fast_jobs=20_000,
    parallelism=4,
    batch_size=500,
    poll_interval=0.1,
    lock_lease=2.0,
    dispatch_delay=0.001,
    strike_at=0.2,
    lead=4.0,
)


@pytest.mark.parametrize("fault", ["SIGKILL", "SIGSTOP"])
@pytest.mark.parametrize("path", ["fast_publish", "one_script"])
def test_a_fault_mid_release_stays_within_the_path_bound(
    path: str, fault: str, postgres: PostgresServer, redis: RedisServer, tmp_path: Path
) -> None:
    # Given two scheduler processes releasing due jobs on the path
    # When the lock holder is struck mid-release and the other takes over
    row = run_one(PATHS[path], fault, SMALL, postgres, redis, workdir=tmp_path)
    # Then every job went out (run_one raises otherwise), the fault landed mid-release, and the
    # benchmark's verdict holds: nothing lost, no more duplicated than the bound
    assert row["mid_pass"] and row["sent_before_fault"] < row["jobs"], row
    assert row["bound"] == bound(PATHS[path], SMALL)
    assert verdict(row, SMALL.parallelism) == [], row
    if path == "one_script":
        assert row["bound"] == 0
