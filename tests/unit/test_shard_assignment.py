"""Shard assignment (``process/shard_assignment.py``): fair, deterministic, stable, and a join or a
leave moves close to the unavoidable minimum, checked against brute force for many (S, N)."""

from __future__ import annotations

import itertools
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parallel_scheduler import Settings
from parallel_scheduler.process.shard_assignment import (
    ShardAssignment,
    assign,
    describe_shards,
    live_ids,
    liveness_threshold,
    shards_for,
)
from storage_adapters import InstanceRecord

ids_strategy = st.sets(st.text(min_size=1, max_size=30), min_size=1, max_size=12)


def owners(assignment: dict[str, frozenset[int]]) -> dict[int, str]:
    return {shard: instance for instance, mine in assignment.items() for shard in mine}


def fewest_moves(before: dict[int, str], shards: int, after_ids: set[str]) -> int:
    """Brute force over every fair assignment among ``after_ids``: the fewest shards whose owner
    must change from ``before``. Tiny cases only (see ``fewest_moves_formula`` for the rest)."""
    ids = sorted(after_ids)
    base, extra = divmod(shards, len(ids))
    best = shards
    for choice in itertools.product(ids, repeat=shards):
        counts = [choice.count(i) for i in ids]
        if sorted(counts) != sorted([base + 1] * extra + [base] * (len(ids) - extra)):
            continue
        best = min(best, sum(1 for s in range(shards) if before[s] != choice[s]))
    return best


def fewest_moves_formula(before: dict[int, str], shards: int, after_ids: set[str]) -> int:
    """The same minimum in closed form: every instance keeps at most its new quota of its own
    shards, and ``S % N`` of those with more than ``S // N`` may keep one more."""
    base, extra = divmod(shards, len(after_ids))
    had = {i: sum(1 for owner in before.values() if owner == i) for i in after_ids}
    kept = sum(min(count, base) for count in had.values())
    kept += min(extra, sum(1 for count in had.values() if count > base))
    return shards - kept


def moves(before: dict[int, str], after: dict[int, str]) -> int:
    return sum(1 for shard, owner in before.items() if after[shard] != owner)


def check_fair(shards: int, assignment: dict[str, frozenset[int]]) -> None:
    n = len(assignment)
    everything = [s for mine in assignment.values() for s in mine]
    assert sorted(everything) == list(range(shards)), "disjoint and covering"
    counts = sorted(len(mine) for mine in assignment.values())
    base, extra = divmod(shards, n)
    assert counts == [base] * (n - extra) + [base + 1] * extra


@settings(max_examples=200, deadline=None)
@given(shards=st.integers(1, 200), ids=ids_strategy)
def test_fair_disjoint_and_covering(shards: int, ids: set[str]) -> None:
    check_fair(shards, assign(shards, ids))


@settings(max_examples=100, deadline=None)
@given(shards=st.integers(1, 100), ids=ids_strategy, seed=st.integers(0, 2**32))
def test_deterministic_from_the_set_alone(shards: int, ids: set[str], seed: int) -> None:
    ordered = sorted(ids)
    shuffled = list(ordered)
    random.Random(seed).shuffle(shuffled)
    first = assign(shards, ordered)
    assert assign(shards, shuffled) == first
    assert assign(shards, [*shuffled, *shuffled]) == first  # duplicates are one instance
    for instance in ids:  # what each process computes for itself is its part of the whole
        assert shards_for(instance, shards, ids - {instance}) == first[instance]


def test_known_values_do_not_change_between_versions() -> None:
    # The weights come from BLAKE2b, not hash(): every process, every Python, the same answer.
    got = assign(8, ["a", "b", "c"])
    assert {k: sorted(v) for k, v in got.items()} == {
        k: sorted(v) for k, v in assign(8, ["c", "b", "a"]).items()
    }
    assert sorted(len(v) for v in got.values()) == [2, 3, 3]
    assert got == {"a": frozenset({0, 4, 7}), "b": frozenset({3, 6}), "c": frozenset({1, 2, 5})}


@pytest.mark.parametrize(("shards", "n"), [(s, n) for s in range(1, 7) for n in (1, 2, 3)])
def test_the_closed_form_minimum_is_the_brute_force_one(shards: int, n: int) -> None:
    rnd = random.Random(shards * 10 + n)
    for _ in range(3):
        ids = {f"p{rnd.random()}" for _ in range(n + 1)}
        fewer = set(sorted(ids)[1:])
        for old, new in ((fewer, ids), (ids, fewer)):
            before = owners(assign(shards, old))
            if len(new) ** shards > 5000:
                continue
            assert fewest_moves(before, shards, new) == fewest_moves_formula(before, shards, new)


@settings(max_examples=150, deadline=None)
@given(shards=st.integers(1, 256), ids=ids_strategy, extra=st.text(min_size=1, max_size=30))
def test_a_join_or_a_leave_moves_little_more_than_it_must(
    shards: int, ids: set[str], extra: str
) -> None:
    grown = ids | {extra}
    if grown == ids:
        return
    small, large = owners(assign(shards, ids)), owners(assign(shards, grown))
    share = math.ceil(shards / len(grown))
    for before, after, new in ((small, large, grown), (large, small, ids)):
        must = fewest_moves_formula(before, shards, new)
        moved = moves(before, after)
        assert must <= moved <= must + 2 * share + 8, (shards, len(grown), moved, must)


@pytest.mark.parametrize(  # four shards each or more: below, a share is a shard or two
    ("shards", "n"),
    [(s, n) for s in (8, 16, 64, 256, 1024) for n in (2, 3, 5, 10) if s >= 4 * n],
)
def test_joins_and_leaves_move_about_one_share(shards: int, n: int) -> None:
    rnd = random.Random(shards * 100 + n)
    moved_total = must_total = 0
    for _ in range(4 if shards >= 256 else 10):
        ids = {f"host{rnd.randrange(10**6)}:{rnd.randrange(10**5)}" for _ in range(n)}
        joiner = f"joiner{rnd.random()}"
        before = owners(assign(shards, ids))
        after = owners(assign(shards, ids | {joiner}))
        must = fewest_moves_formula(before, shards, ids | {joiner})
        moved = moves(before, after)
        share = math.ceil(shards / (n + 1))
        assert moved <= must + 3 * share, "a join reshuffled far more than its share"
        assert moved < shards // 2 + share
        moved_total += moved
        must_total += must
    assert moved_total <= 2.5 * must_total  # within a small factor of the minimum


@settings(max_examples=50, deadline=None)
@given(shards=st.integers(1, 128), ids=ids_strategy)
def test_a_steady_set_keeps_its_assignment(shards: int, ids: set[str]) -> None:
    me = min(ids)
    changes: list[tuple[frozenset[int], frozenset[int]]] = []
    assignment = ShardAssignment(shards, me, lambda before, after: changes.append((before, after)))
    assert assignment.served == frozenset(range(shards))  # alone until it has seen the others
    assignment.update(ids)
    served = assignment.served
    assert served == assign(shards, ids)[me]
    for _ in range(3):
        assert assignment.update(set(ids)) is False
        assert assignment.served == served
    assert len(changes) == (0 if served == frozenset(range(shards)) else 1)


def record(instance: str, heartbeat_at: float) -> InstanceRecord:
    return InstanceRecord(instance, "host", 1, "0", 0.0, heartbeat_at, "{}")


def test_liveness_counts_fresh_heartbeats_and_always_itself() -> None:
    records = [record("fresh", 95.0), record("edge", 90.0), record("stale", 89.9)]
    assert live_ids(records, 100.0, 10.0, "me") == {"fresh", "edge", "me"}
    assert live_ids([], 100.0, 10.0, "me") == {"me"}


@pytest.mark.parametrize(
    ("lease", "interval", "expected"),
    [(10.0, 2.0, 5.0), (10.0, 5.0, 10.0), (2.0, 0.2, 1.0), (2.0, 3.0, 6.0)],
)
def test_the_threshold_spans_half_a_lease_and_two_heartbeats(
    lease: float, interval: float, expected: float
) -> None:
    settings_ = Settings(lock_lease=lease, heartbeat_interval=interval)
    assert liveness_threshold(settings_) == expected


@pytest.mark.parametrize(
    ("shards", "shown"),
    [([0, 1, 2, 3, 7, 9, 10], "0-3,7,9-10"), ([5], "5"), ([], "-"), ([3, 1, 3], "1,3")],
)
def test_shard_sets_are_shown_as_ranges(shards: list[int], shown: str) -> None:
    assert describe_shards(shards) == shown
