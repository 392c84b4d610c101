"""The HTTP API against its own OpenAPI document, property-based (schemathesis): every operation
with generated inputs, valid and invalid, on a real SQLite store through the Flask app. Each
answer must be documented (status code, content type, body schema), no input may produce a 500,
and an input outside the document must be refused with a 4xx. Not checked: that every input the
document allows is accepted (a cron expression's syntax, an instant's range, a task name's rules
are the API's validation, which JSON Schema cannot express; such input is a 400 naming it).
Kept small (``MAX_EXAMPLES`` per operation) so the whole run stays well under a minute."""

from __future__ import annotations

from typing import Any

import hypothesis
import pytest
import schemathesis
from flask import Flask
from schemathesis import GenerationMode
from schemathesis.checks import positive_data_acceptance

from parallel_scheduler import Client
from parallel_scheduler.dashboard import TokenAuth, create_app
from parallel_scheduler.dashboard.api.openapi import paths
from storage_adapters import Storage

pytestmark = pytest.mark.timeout(120)

TOKEN = "schema-token-123"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
MAX_EXAMPLES = 8


@pytest.fixture(params=["sqlite"])
def adapter_kind(request: pytest.FixtureRequest) -> str:
    """SQLite only: the generated inputs exercise the API, not the adapters (the ordinary API
    tests run on every adapter)."""
    return str(request.param)


@pytest.fixture
def api_app(storage: Storage) -> Flask:
    client = Client(storage, retry_for=1.0)
    client.schedule("t.a", countdown=600, job_id="job-1")
    client.recurring.save("nightly", "t.r", "0 2 * * *")
    app = create_app(client, auth=TokenAuth(TOKEN))
    app.testing = True
    return app


OPERATIONS = [
    (path, method.upper()) for path, methods in paths().items() for method in sorted(methods)
]
#: Each operation with valid inputs, and with invalid ones where it takes any input at all.
CASES = [
    pytest.param(path, method, mode, id=f"{method} {path} {mode}")
    for path, methods in paths().items()
    for method, operation in sorted(methods.items())
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    if mode is GenerationMode.POSITIVE or operation["parameters"] or "requestBody" in operation
]


@pytest.mark.parametrize(("path", "method", "mode"), CASES)
def test_every_operation_answers_as_documented(
    api_app: Flask, path: str, method: str, mode: GenerationMode
) -> None:
    schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", api_app, headers=HEADERS)
    operation = schema[path][method]

    @hypothesis.given(case=operation.as_strategy(generation_mode=mode))
    @hypothesis.settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(hypothesis.HealthCheck),
    )
    def answers_as_documented(case: Any) -> None:
        response = case.call_and_validate(
            headers=HEADERS, excluded_checks=[positive_data_acceptance]
        )
        assert response.status_code < 500, response.text

    answers_as_documented()


def test_the_document_names_every_route_of_the_api(api_app: Flask) -> None:
    """No route under /api/v1/ is missing from the document (nor documented without a route)."""
    routes = {
        (
            rule.rule.removeprefix("/api/v1")
            .replace("<path:", "<")
            .replace("<", "{")
            .replace(">", "}"),
            method,
        )
        for rule in api_app.url_map.iter_rules()
        if rule.rule.startswith("/api/v1/")
        for method in rule.methods or ()
        if method not in ("HEAD", "OPTIONS")
    }
    assert routes - {("/openapi.json", "GET")} == set(OPERATIONS)
