"""The Celery wing's structure, checked: every module imports first in a fresh interpreter (no
import loop hidden by import order), the core never loads Celery, and the public names that moved
into ``parallel_scheduler.celery.publish`` are still where users import them from."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import pytest

import parallel_scheduler
import parallel_scheduler.celery
from parallel_scheduler.delayed.envelopes import decode_envelope, encode_envelope, release_facts
from parallel_scheduler.jobs import JobSpec

WING = sorted(
    module.name
    for module in pkgutil.walk_packages(
        parallel_scheduler.celery.__path__, parallel_scheduler.celery.__name__ + "."
    )
)


def _fresh(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_wing_has_the_modules_the_structure_names() -> None:
    for name in ("install", "integration", "wiring", "beat_sync", "beat", "bootstep"):
        assert f"parallel_scheduler.celery.{name}" in WING
    for name in ("send_task", "redis_lists", "amqp", "amqp_pool", "amqp_frames", "amqp_routes"):
        assert f"parallel_scheduler.celery.publish.{name}" in WING


@pytest.mark.parametrize("module", WING)
def test_every_module_of_the_wing_imports_first(module: str) -> None:
    # a loop between two modules fails when one of them is the first imported
    _fresh(f"import {module}")


def test_the_core_loads_neither_celery_nor_the_wing() -> None:
    loaded = json.loads(
        _fresh(
            "import json, sys\n"
            "import parallel_scheduler, parallel_scheduler.client\n"
            "import parallel_scheduler.delayed.envelopes\n"
            "import parallel_scheduler.process.service, parallel_scheduler.process.one_pass\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('celery', 'kombu', 'amqp') or m.startswith('parallel_scheduler.celery'))))"
        )
    )
    assert loaded == []


def test_moved_public_names_still_import_from_where_they_were() -> None:
    from parallel_scheduler.celery import CeleryDispatcher as from_wing
    from parallel_scheduler.celery.publish.send_task import CeleryDispatcher

    assert parallel_scheduler.CeleryDispatcher is CeleryDispatcher is from_wing
    assert "CeleryDispatcher" in parallel_scheduler.__all__
    with pytest.raises(AttributeError, match="no attribute 'Nonesuch'"):
        _ = parallel_scheduler.Nonesuch


def test_an_envelope_decodes_to_what_was_encoded() -> None:
    message = '{"body":"x","headers":{"note":"two\\nlines"}}\nand a raw newline'
    envelope = encode_envelope("celery\x06\x163", message)
    assert envelope == "celery\x06\x163\n" + message
    assert decode_envelope(envelope) == ("celery\x06\x163", message)


def test_release_facts_come_from_the_options_not_from_the_text() -> None:
    # an "expires" among the arguments is no expiry; one in the options is
    plain = JobSpec("t", args=['"expires"'], kwargs={"expires": 1}).encode(1_000.0)
    expiring = JobSpec("t", args=[1], options={"expires": 2_000.5}).encode(1_000.0)
    assert release_facts(plain.payload).expires_at is None
    assert release_facts(plain.payload).args == ['"expires"']
    facts = release_facts(expiring.payload)
    assert facts.expires_at == 2_000.5
    assert (facts.args, facts.kwargs, facts.options) == ([1], {}, {"expires": 2_000.5})


def test_release_facts_are_the_same_each_time_for_long_and_short_payloads() -> None:
    # recent short payloads are kept decoded, long ones decoded each time: the same facts
    long_args = ["x" * 5_000]
    for args in (long_args, ["short"]):
        job = JobSpec("t", args=args, options={"expires": 2_000.0}).encode(1_000.0)
        first, again = release_facts(job.payload), release_facts(job.payload)
        assert first == again
        assert (first.args, first.expires_at) == (args, 2_000.0)
