"""Job ids and instance ids become parts of Redis keys: both are refused by one rule set, and the
message names which kind of id was wrong and why."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from storage_adapters import InvalidIdentifierError, validate_job_id
from storage_adapters.checks.instances import MAX_INSTANCE_ID_LENGTH, check_instance_id
from storage_adapters.records import MAX_JOB_ID_LENGTH


@pytest.mark.parametrize(
    ("check", "what", "limit"),
    [
        (validate_job_id, "job id", MAX_JOB_ID_LENGTH),
        (check_instance_id, "instance id", MAX_INSTANCE_ID_LENGTH),
    ],
)
def test_an_id_is_printable_bounded_and_named_when_refused(
    check: Callable[[str], str], what: str, limit: int
) -> None:
    assert check("a-1:b") == "a-1:b"
    assert check("x" * limit) == "x" * limit
    with pytest.raises(InvalidIdentifierError, match=rf"^{what} must be a non-empty string$"):
        check("")
    with pytest.raises(
        InvalidIdentifierError,
        match=rf"^{what} is {limit + 1} characters long; the limit is {limit}$",
    ):
        check("x" * (limit + 1))
    with pytest.raises(
        InvalidIdentifierError, match=rf"^{what} 'a b' has whitespace or unprintable characters$"
    ):
        check("a b")
