"""The standing red-team table: every hostile request in `http_cases` is refused with a 4xx
RFC 9457 problem and leaves everything stored exactly as it was."""

from __future__ import annotations

import httpx
import pytest

from .conftest import Service, snapshot
from .http_cases import CASES, Case

INJECTIONS = [
    "' OR '1'='1",
    "'; DROP TABLE sessions; --",
    '" OR ""="',
    "%",
    "_",
    "\\",
    "*",
    "$where",
    "{{7*7}}",
    "../../etc/passwd",
]


def send(service: Service, case: Case) -> httpx.Response:
    headers = dict(case.headers)
    if case.who is not None:
        headers["Authorization"] = f"Bearer {service.keys[case.who]}"
    content = case.content()
    if content is not None and "Content-Type" not in headers:
        headers["Content-Type"] = "application/json"
    with httpx.Client(base_url=service.url, timeout=60) as http:
        return http.request(case.method, case.path, content=content, headers=headers)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_a_hostile_request_is_a_4xx_problem_and_changes_nothing(
    hostile_service: Service, case: Case
) -> None:
    before = snapshot(hostile_service.tk)
    response = send(hostile_service, case)
    assert response.status_code in case.statuses, response.text[:500]
    assert "Traceback" not in response.text
    if case.path.startswith(OPENAI_PATHS):
        assert_openai_error(response)
    elif case.path.startswith(ANTHROPIC_PATHS):
        assert_anthropic_error(response)
    else:
        assert_problem(response)
    assert snapshot(hostile_service.tk) == before


OPENAI_PATHS = ("/v1/chat/completions", "/v1/conversations", "/v1/models", "/v1/responses")
"""The OpenAI-compatible routes answer errors in OpenAI's shape (what their SDKs read)."""
ANTHROPIC_PATHS = ("/v1/messages",)
"""Anthropic's Messages API answers errors in Anthropic's shape, a bad value a 400."""


def assert_problem(response: httpx.Response) -> None:
    assert response.headers["content-type"] == "application/problem+json", response.text[:500]
    problem = response.json()
    assert problem["status"] == response.status_code
    assert problem["type"].startswith("urn:turnkeeper:problem:")
    assert problem["title"] and problem["detail"]
    if response.status_code == 422:
        assert problem["errors"] and all(error["field"] for error in problem["errors"])


def assert_anthropic_error(response: httpx.Response) -> None:
    assert response.headers["content-type"] == "application/json", response.text[:500]
    body = response.json()
    assert body["type"] == "error" and body["error"]["type"] and body["error"]["message"]
    assert response.status_code != 422  # Anthropic's API answers a bad value 400


def assert_openai_error(response: httpx.Response) -> None:
    assert response.headers["content-type"] == "application/json", response.text[:500]
    error = response.json()["error"]
    assert error["message"] and error["type"] and error["code"]
    if response.status_code == 422:
        assert error["param"]


@pytest.mark.parametrize("text", INJECTIONS)
@pytest.mark.parametrize("name", ["subject", "kind", "key"])
def test_an_injection_in_a_filter_matches_nothing_and_leaks_nothing(
    hostile_service: Service, name: str, text: str
) -> None:
    """A text filter is a value, never SQL or a pattern: it matches no session of alpha's, and
    never one of beta's."""
    before = snapshot(hostile_service.tk)
    with hostile_service.client("a") as http:
        response = http.get("/v1/sessions", params={name: text})
    assert response.status_code == 200
    assert response.json()["items"] == []
    assert snapshot(hostile_service.tk) == before
