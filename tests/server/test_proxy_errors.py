"""Errors of `/v1/chat/completions` in OpenAI's shape, read by the official `openai` client;
upstream failures retried with backoff a bounded number of times, `Retry-After` passed on."""

from __future__ import annotations

import httpx
import openai
import pytest

from .conftest import Service
from .upstream import Upstream

REMEMBER = {"X-Turnkeeper-Session": "errors"}


def test_a_failing_model_reads_as_an_openai_error_with_its_message(
    llm: openai.OpenAI, upstream: Upstream
) -> None:
    upstream.mode = "error"
    with pytest.raises(openai.InternalServerError) as caught:
        llm.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Hi"}], extra_headers=REMEMBER
        )
    assert caught.value.status_code == 502
    assert "model overloaded" in caught.value.message
    assert caught.value.body == {
        "message": "the upstream model answered 500: model overloaded",
        "type": "api_error",
        "param": None,
        "code": "bad_gateway",
    }


def test_a_bad_request_names_the_field_as_param(service: Service, upstream: Upstream) -> None:
    with service.client("a") as http:
        response = http.post("/v1/chat/completions", json={"model": "m", "messages": "nope"})
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/json"
    assert response.headers["x-should-retry"] == "false"
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == "messages"
    assert "messages" in error["message"]
    assert upstream.requests == []


def test_a_bad_key_reads_as_an_authentication_error(service: Service) -> None:
    bad = openai.OpenAI(base_url=f"{service.url}/v1", api_key="tk_nope", max_retries=0)
    with bad, pytest.raises(openai.AuthenticationError) as caught:
        bad.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}])
    assert caught.value.body["type"] == "authentication_error"  # type: ignore[index]
    assert caught.value.message


def test_other_routes_keep_problem_documents(client: httpx.Client, upstream: Upstream) -> None:
    upstream.mode = "error"
    response = client.post("/v1/sessions/nowhere/chat", json={"content": "Hi", "create": True})
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["status"] == 502


def test_transient_upstream_failures_are_retried_before_the_client_sees_them(
    llm: openai.OpenAI, client: httpx.Client, upstream: Upstream
) -> None:
    upstream.failures, upstream.fail_status = 2, 503  # llm_max_retries is 2 by default
    answer = llm.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Hi"}], extra_headers=REMEMBER
    )
    assert answer.choices[0].message.content == "reply 3 to: Hi"
    assert len(upstream.requests) == 3
    assert [m["role"] for m in client.get("/v1/sessions/errors/messages").json()["items"]] == [
        "user",
        "assistant",
    ]


def test_a_rate_limit_that_outlasts_the_retries_is_a_429_with_the_upstreams_retry_after(
    llm: openai.OpenAI, upstream: Upstream
) -> None:
    upstream.failures, upstream.fail_status, upstream.retry_after = 10, 429, "7"
    with pytest.raises(openai.RateLimitError) as caught:
        llm.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}])
    assert caught.value.response.headers["retry-after"] == "7"
    assert caught.value.body["type"] == "rate_limit_error"  # type: ignore[index]
    assert len(upstream.requests) == 3  # the first try and two retries, then it gave up


def test_a_refusal_is_not_retried(llm: openai.OpenAI, upstream: Upstream) -> None:
    upstream.mode = "refuse"  # 404: another try would not help
    with pytest.raises(openai.InternalServerError):
        llm.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}])
    assert len(upstream.requests) == 1


def test_a_refusal_tells_the_client_not_to_retry_it(service: Service, upstream: Upstream) -> None:
    upstream.mode = "refuse"
    with (
        openai.OpenAI(
            base_url=f"{service.url}/v1", api_key=service.keys["a"], max_retries=2, timeout=10
        ) as retrying,
        pytest.raises(openai.InternalServerError) as caught,
    ):
        retrying.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Hi"}], extra_headers=REMEMBER
        )
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert len(upstream.requests) == 1  # the SDK did not send it again


def test_a_stream_that_breaks_ends_with_an_openai_error_chunk(
    service: Service, upstream: Upstream
) -> None:
    upstream.mode = "break"
    body = {"model": "m", "messages": [{"role": "user", "content": "Go"}], "stream": True}
    with service.client("a") as http:
        response = http.post("/v1/chat/completions", json=body, headers=REMEMBER)
    last = response.text.strip().split("\n\n")[-1]
    assert last.startswith('data: {"error"')
    # The client learns that the model failed, not where the model lives (see problems.py).
    assert '"type":"api_error"' in last
    assert '"message":"the model endpoint could not be reached or failed mid-answer"' in last
