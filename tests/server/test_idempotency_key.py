"""An `Idempotency-Key` reused for a different request is a 422 (IETF httpapi idempotency-key
draft) naming the header, and stores nothing; the same key with the same body is a replay.
On every backend, through the HTTP service on loopback and the official `openai` client."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from .conftest import Service, service_settings, start_service
from .upstream import Upstream


@pytest.fixture(params=["sqlite", "postgres", "postgres+redis"])
def service(
    request: pytest.FixtureRequest, tmp_path: Path, upstream_server: tuple[Upstream, str]
) -> Iterator[Service]:
    overrides: dict[str, Any] = {"llm_max_retries": 0}
    if request.param != "sqlite":
        overrides["database_url"] = request.getfixturevalue("postgres_url")
    if request.param == "postgres+redis":
        overrides["redis_url"] = request.getfixturevalue("redis_server")
    yield from start_service(service_settings(tmp_path, upstream_server[1], **overrides))


def stored(client: httpx.Client, session: str) -> list[tuple[str, str]]:
    items = client.get(f"/v1/sessions/{session}/messages").json()["items"]
    return [(m["role"], m["content"]) for m in items]


def assert_reused_key_problem(response: httpx.Response) -> None:
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["errors"] == [
        {"field": "Idempotency-Key", "problem": problem["detail"].split(": ", 1)[1]}
    ]
    assert "already used in this session for a request with other messages" in problem["detail"]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ({"role": "user", "content": "Noted"}, {"role": "user", "content": "Changed"}),
        ({"role": "user", "content": "Noted"}, {"role": "user", "content": "Noted", "author": "b"}),
        (
            {"role": "user", "content": "Noted"},
            {"messages": [{"role": "user", "content": "Noted"}, {"role": "user", "content": "+"}]},
        ),
        (
            {"messages": [{"role": "user", "content": "A"}, {"role": "user", "content": "B"}]},
            {"messages": [{"role": "user", "content": "A"}]},
        ),
    ],
    ids=["content", "author", "one-then-two", "two-then-one"],
)
def test_a_key_reused_for_other_messages_is_a_422_and_stores_nothing(
    client: httpx.Client, first: dict[str, Any], second: dict[str, Any]
) -> None:
    client.post("/v1/sessions", json={"key": "appends"})
    key = {"Idempotency-Key": "k-1"}

    def post(body: dict[str, Any]) -> httpx.Response:
        path = "/batch" if "messages" in body else ""
        return client.post(f"/v1/sessions/appends/messages{path}", json=body, headers=key)

    assert post(first).status_code == 201
    before = stored(client, "appends")
    assert_reused_key_problem(post(second))
    assert stored(client, "appends") == before
    replay = post(first)
    assert replay.status_code == 201 and stored(client, "appends") == before


def test_the_same_key_in_another_session_is_another_request(client: httpx.Client) -> None:
    key = {"Idempotency-Key": "k-1"}
    for session, text in (("one", "A"), ("two", "B")):
        client.post("/v1/sessions", json={"key": session})
        body = {"role": "user", "content": text}
        response = client.post(f"/v1/sessions/{session}/messages", json=body, headers=key)
        assert response.status_code == 201
    assert stored(client, "two") == [("user", "B")]


def test_chat_with_a_reused_key_and_other_content_is_a_422_and_asks_no_model(
    client: httpx.Client, upstream: Upstream
) -> None:
    key = {"Idempotency-Key": "turn-1"}
    first = client.post("/v1/sessions/c/chat", json={"content": "Hi", "create": True}, headers=key)
    assert first.status_code == 200
    other = client.post("/v1/sessions/c/chat", json={"content": "Bye"}, headers=key)
    assert_reused_key_problem(other)
    again = client.post("/v1/sessions/c/chat", json={"content": "Hi"}, headers=key)
    assert again.json()["replayed"] is True and again.json()["reply"] == first.json()["reply"]
    assert len(upstream.requests) == 1
    assert stored(client, "c") == [("user", "Hi"), ("assistant", first.json()["reply"]["content"])]


def test_the_proxy_answers_a_reused_key_with_an_openai_error_the_sdk_raises(
    llm: openai.OpenAI, client: httpx.Client, upstream: Upstream
) -> None:
    headers = {"X-Turnkeeper-Session": "proxied", "Idempotency-Key": "q-1"}
    first = llm.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Hi"}], extra_headers=headers
    )
    with pytest.raises(openai.UnprocessableEntityError) as raised:
        llm.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Other"}], extra_headers=headers
        )
    error = raised.value.body
    assert isinstance(error, dict)
    assert error["param"] == "Idempotency-Key" and error["type"] == "invalid_request_error"
    assert "already used in this session" in error["message"]
    assert raised.value.response.headers["x-should-retry"] == "false"
    assert len(upstream.requests) == 1
    assert stored(client, "proxied") == [
        ("user", "Hi"),
        ("assistant", first.choices[0].message.content),
    ]


TWO_KEYS = [("Idempotency-Key", "one"), ("Idempotency-Key", "two")]
"""Joined, these would read "one, two": a key neither header meant (and not the one "two, one"
would make)."""


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/sessions/twice/messages", {"role": "user", "content": "Noted"}),
        ("/v1/sessions/twice/messages/batch", {"messages": [{"role": "user", "content": "A"}]}),
        ("/v1/sessions/twice/chat", {"content": "Hi"}),
    ],
)
def test_two_idempotency_keys_are_a_400_naming_the_header_and_store_nothing(
    client: httpx.Client, upstream: Upstream, path: str, body: dict[str, Any]
) -> None:
    client.post("/v1/sessions", json={"key": "twice"})
    response = client.post(path, json=body, headers=TWO_KEYS)
    assert response.status_code == 400
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["errors"] == [
        {"field": "Idempotency-Key", "problem": "sent 2 times; send it once"}
    ]
    assert stored(client, "twice") == [] and upstream.requests == []


def test_the_proxy_answers_two_idempotency_keys_with_an_openai_400(
    client: httpx.Client, upstream: Upstream
) -> None:
    response = client.post(
        "/v1/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "Hi"}]},
        headers=[("X-Turnkeeper-Session", "proxied"), *TWO_KEYS],
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "Idempotency-Key" and error["type"] == "invalid_request_error"
    assert response.headers["x-should-retry"] == "false"
    assert upstream.requests == []
    assert client.get("/v1/sessions", params={"key": "proxied"}).json()["items"] == []
