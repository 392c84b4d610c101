"""A rate's text (``parallel_scheduler.rate_limits``): ``COUNT/UNIT`` read into a count and a
period, said back the same way, and each kind of bad text refused by name."""

from __future__ import annotations

import pytest

from parallel_scheduler.rate_limits import (
    RATE_PATTERN,
    checked_limit,
    parse_burst,
    parse_rate,
    rate_text,
)
from storage_adapters import InvalidArgumentError, PauseKind


@pytest.mark.parametrize(
    ("text", "count", "period"),
    [
        ("100/s", 100, 1.0),
        ("100/sec", 100, 1.0),
        ("100/m", 100, 60.0),
        ("5/min", 5, 60.0),
        ("100/h", 100, 3600.0),
        ("1/hour", 1, 3600.0),
        ("1000000/s", 1_000_000, 1.0),
    ],
)
def test_a_rate_is_read_and_said_back(text: str, count: int, period: float) -> None:
    assert parse_rate(text) == (count, period)
    assert rate_text(count, period) == text.replace("sec", "s").replace("min", "m").replace(
        "hour", "h"
    )


def test_a_period_set_through_storage_is_said_in_seconds() -> None:
    assert rate_text(7, 30.0) == "7 per 30 s"


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        ("ten/s", "a rate's count must be a whole number of 1-1,000,000, not 'ten' (in 'ten/s')"),
        ("0/s", "not '0' (in '0/s')"),
        ("-1/s", "not '-1' (in '-1/s')"),
        ("1.5/s", "not '1.5'"),
        ("10000000/s", "not '10000000'"),
        ("100", "a rate is COUNT/UNIT (e.g. 100/s, 100/m or 100/h), not '100'"),
        ("", "not ''"),
        ("100/s/s", "a rate is COUNT/UNIT"),
        (" 100/s", "not ' 100'"),
        ("100/d", "a rate's unit is s, m or h (also sec, min, hour), not 'd' (in '100/d')"),
        ("100/S", "not 'S'"),
        (100, "a rate is text (e.g. 100/s, 100/m or 100/h), not 100"),
        (None, "not None"),
    ],
)
def test_bad_text_is_refused_by_name(bad: object, words: str) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        parse_rate(bad)
    assert words in str(refused.value)
    assert isinstance(refused.value, ValueError)


def test_the_apis_pattern_takes_exactly_the_good_rates() -> None:
    import re

    pattern = re.compile(RATE_PATTERN)
    for good in ("1/s", "100/sec", "100/m", "5/min", "100/h", "1/hour"):
        assert pattern.fullmatch(good), good
    for bad in ("ten/s", "100", "100/d", "-1/s", "1.5/s", " 1/s", "100/S"):
        assert not pattern.fullmatch(bad), bad


def test_a_burst_is_a_whole_number_typed_or_given() -> None:
    assert parse_burst("5") == 5 and parse_burst(" 7 ") == 7 and parse_burst(3) == 3
    for bad in ("0", "x", "", "1.5", "-2", 0, 1_000_001, True, 2.0, None):
        with pytest.raises(InvalidArgumentError, match="burst must be a whole number"):
            parse_burst(bad)
    with pytest.raises(InvalidArgumentError, match="not '5'"):
        parse_burst("5", typed=False)  # a JSON body or a Python call gives a number


def test_a_limit_is_checked_whole_before_anything_is_written() -> None:
    assert checked_limit("queue", "emails", "100/m", 2, "ops") == (
        PauseKind.QUEUE,
        "emails",
        100,
        60.0,
        2,
        "ops",
    )
    assert checked_limit("task", "t", "1/s", 1, None)[5]  # user@host by default
    for kind, name, words in (
        ("topic", "emails", "a rate limit names a 'queue' or a 'task', not 'topic'"),
        (None, "emails", "a rate limit names a 'queue' or a 'task', not None"),
        (["queue"], "emails", "not \\['queue'\\]"),
        ("queue", "", "queue name must be a string of 1-255 characters"),
        ("queue", " emails", "must be printable, without leading or trailing spaces"),
    ):
        with pytest.raises(InvalidArgumentError, match=words):
            checked_limit(kind, name, "1/s", 1, None)
    with pytest.raises(InvalidArgumentError, match="set_by must be a string of at most 255"):
        checked_limit("queue", "emails", "1/s", 1, "x" * 256)
