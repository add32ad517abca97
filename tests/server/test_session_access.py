"""The hot session routes (append, batch, list, context) solve the session, the project and the
service as one dependency (`deps.SessionAccess`): each parameter is checked once, and the
routes document the same parameters as before."""

from __future__ import annotations

import httpx
import pytest

from .conftest import Service

BAD_PROJECT = {"project": "bad!"}


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/v1/sessions/s/context", None),
        ("GET", "/v1/sessions/s/messages", None),
        ("POST", "/v1/sessions/s/messages", {"role": "user", "content": "hi"}),
        ("POST", "/v1/sessions/s/messages/batch", {"messages": [{"role": "user", "content": "x"}]}),
    ],
)
def test_a_bad_project_is_named_once(
    client: httpx.Client, method: str, path: str, body: object
) -> None:
    # It was named twice: the session and the route each asked for the project's dependency,
    # and FastAPI checks a shared dependency's parameters again for every one that asks.
    answer = client.request(method, path, params=BAD_PROJECT, json=body)
    assert answer.status_code == 422
    assert [error["field"] for error in answer.json()["errors"]] == ["project"]


def test_every_invalid_parameter_is_named_once(client: httpx.Client) -> None:
    answer = client.get(
        "/v1/sessions/" + "x" * 300 + "/context", params={**BAD_PROJECT, "budget_tokens": 0}
    )
    assert answer.status_code == 422
    fields = [error["field"] for error in answer.json()["errors"]]
    assert sorted(fields) == ["budget_tokens", "project", "session"]


def test_the_hot_routes_document_their_parameters_and_key(service: Service) -> None:
    paths = service.app.openapi()["paths"]
    append = paths["/v1/sessions/{session}/messages"]["post"]
    assert [(p["name"], p["in"]) for p in append["parameters"]] == [
        ("session", "path"),
        ("project", "query"),
        ("idempotency-key", "header"),
        ("x-stainless-retry-count", "header"),
    ]
    context = paths["/v1/sessions/{session}/context"]["get"]
    assert [p["name"] for p in context["parameters"]] == [
        "session", "strategy", "budget_tokens", "max_tokens", "reserved_tokens", "keep_recent",
        "model",
        "include_internal", "format", "agent", "trigger", "preview", "project",
    ]  # fmt: skip
    assert append["security"] == context["security"] == [{"ApiKey": []}]
