"""The queue a Celery app routes a call to (``celery/routing.py``), as the scheduler stores it
with each firing: ``task_routes`` of names and patterns are asked once per task name, a router
function (which may read the arguments) every time; either way the answer is the router's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from celery import Celery

from parallel_scheduler.celery.routing import router_of


def test_name_routes_answer_as_the_router_and_are_asked_once_per_name() -> None:
    app = Celery("routing", broker="memory://", set_as_current=False)
    app.conf.task_routes = {"reports.*": {"queue": "reports"}, "mail.send": "mail"}
    app.conf.task_default_queue = "default"
    route = router_of(app)
    # the router's own answers
    assert route("reports.daily", [], {}) == "reports"
    assert route("mail.send", [1], {"to": "x"}) == "mail"
    assert route("other", [], {}) == "default"
    # asked once per name: a later change of the routes is not seen (they are read at start-up)
    app.conf.task_routes = {"reports.*": {"queue": "elsewhere"}}
    app.amqp.router = app.amqp.Router()
    assert route("reports.daily", [], {}) == "reports"


def test_a_router_function_is_asked_with_the_arguments_every_time() -> None:
    asked: list[Sequence[Any]] = []

    def by_tenant(
        name: str, args: Sequence[Any], kwargs: Mapping[str, Any], options: Any, **_: Any
    ) -> dict[str, str] | None:
        asked.append(args)
        return {"queue": f"tenant-{args[0]}"} if args else None

    app = Celery("routing", broker="memory://", set_as_current=False)
    app.conf.task_routes = (by_tenant,)
    route = router_of(app)
    assert route("t", [1], {}) == "tenant-1"
    assert route("t", [2], {}) == "tenant-2"
    assert route("t", [], {}) == "celery"  # Celery's default queue
    assert [list(args) for args in asked] == [[1], [2], []]
