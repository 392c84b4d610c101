"""The dashboard's number fields (``parse_int``, ``parse_seconds``): blank means the default, and
anything else that is not a usable number is refused with a message naming the field."""

from __future__ import annotations

import pytest

from parallel_scheduler.dashboard.inputs import BadInput, parse_int, parse_seconds


def test_whole_numbers_default_when_blank_and_keep_to_their_range() -> None:
    assert parse_int({}, "limit", 50, 1, 500) == 50
    assert parse_int({"limit": "  "}, "limit", 50, 1, 500) == 50
    assert parse_int({"limit": "500"}, "limit", 50, 1, 500) == 500
    with pytest.raises(BadInput, match=r"^limit '2\.5' is not a whole number$"):
        parse_int({"limit": "2.5"}, "limit", 50, 1, 500)
    with pytest.raises(BadInput, match=r"^limit must be between 1 and 500, not 0$"):
        parse_int({"limit": "0"}, "limit", 50, 1, 500)
    with pytest.raises(BadInput, match=r"^limit is 21 characters; the limit is 20$"):
        parse_int({"limit": "1" * 21}, "limit", 50, 1, 500)


def test_seconds_are_none_when_blank_and_finite_otherwise() -> None:
    assert parse_seconds({}, "countdown") is None
    assert parse_seconds({"countdown": "1.5"}, "countdown") == 1.5
    with pytest.raises(BadInput, match=r"^countdown 'soon' is not a number of seconds$"):
        parse_seconds({"countdown": "soon"}, "countdown")
    with pytest.raises(BadInput, match=r"^countdown must be a finite number of seconds$"):
        parse_seconds({"countdown": "inf"}, "countdown")
