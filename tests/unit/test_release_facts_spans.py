"""``release_facts`` hands the publishers each payload part as JSON text, cut from the stored
payload when it has the layout ``JobSpec.encode`` writes. The oracle is the standard library:
whatever the layout, each span must decode to exactly what ``json.loads`` of the whole payload
gives, so a message body spliced from the spans carries the job's own arguments."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from parallel_scheduler import JobSpec
from parallel_scheduler.delayed.envelopes import release_facts

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
#: Keyword names as the Client takes them: non-empty strings (a message carries them by name).
_NAMES = st.text(min_size=1, max_size=8)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def _check(payload: str) -> None:
    whole = json.loads(payload)
    facts = release_facts(payload)
    assert json.loads(facts.args_json) == whole.get("args", []) == facts.args
    assert json.loads(facts.kwargs_json) == whole.get("kwargs", {}) == facts.kwargs
    assert json.loads(facts.options_json) == whole.get("options", {}) == facts.options


# derandomize: the same examples every run. Under load Hypothesis 6.170's own engine once failed
# an internal assertion while mutating examples here (``assert 519 < 519`` in _starts_and_ends),
# which no code of ours reaches; a fixed seed keeps CI deterministic and still checks 250 payloads.
@settings(max_examples=150, deadline=None, derandomize=True)
@given(args=st.lists(_VALUES, max_size=5), kwargs=st.dictionaries(_NAMES, _VALUES))
def test_spans_of_an_encoded_payload_are_its_parts(args: list[Any], kwargs: dict[str, Any]) -> None:
    # Given a payload as the Client stores it (arbitrary JSON arguments, unicode, big integers)
    payload = JobSpec("t", args=args, kwargs=kwargs, options={"queue": "q"}).encode(0.0).payload
    # Then each span is valid JSON of exactly that part
    _check(payload)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(
    args=st.lists(_VALUES, max_size=4),
    kwargs=st.dictionaries(st.text(max_size=8), _VALUES, max_size=3),
    indent=st.sampled_from([None, 1]),
    order=st.permutations(["args", "kwargs", "options"]),
)
def test_any_other_layout_reads_the_same(
    args: list[Any], kwargs: dict[str, Any], indent: int | None, order: list[str]
) -> None:
    # Given a payload written some other way (by hand, an older writer): spaces, another order
    parts = {"args": args, "kwargs": kwargs, "options": {"expires": 5.5}}
    payload = json.dumps({name: parts[name] for name in order}, indent=indent)
    # Then the facts are the same as the standard library reads them
    _check(payload)
    assert release_facts(payload).expires_at == 5.5


def test_a_canonical_prefix_with_a_bad_tail_is_read_the_general_way() -> None:
    # A payload that starts like ours but holds an extra member after options
    payload = '{"args":[1],"kwargs":{},"options":{},"extra":2}'
    _check(payload)
    # and one whose args are not a list is refused by the shape check, read as the general
    # reader reads it (decode_payload turns a string into a list of characters, as before)
    odd = release_facts('{"args":"ab","kwargs":{},"options":{}}')
    assert odd.args == ["a", "b"] and json.loads(odd.args_json) == ["a", "b"]
