"""Each turn is stored exactly once, however a client retries: the official `openai` client's
own retry loop (whole and streamed), a program retrying by hand after a 502, a program
re-sending its transcript, an `Idempotency-Key`, and `/chat` retried without an id."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from .conftest import Service, service_settings, start_service
from .upstream import Upstream

QUESTION = "How many days in Lisbon?"


@pytest.fixture
def service(tmp_path: Path, upstream_server: tuple[Upstream, str]) -> Iterator[Service]:
    """The service retrying the upstream itself 0 times, so every upstream failure reaches the
    client and the client's own retries are what is tested."""
    yield from start_service(service_settings(tmp_path, upstream_server[1], llm_max_retries=0))


def sdk(service: Service, *, max_retries: int) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=f"{service.url}/v1", api_key=service.keys["a"], max_retries=max_retries,
        timeout=10,
    )  # fmt: skip


def stored(client: httpx.Client, session: str) -> list[tuple[str, str]]:
    items = client.get(f"/v1/sessions/{session}/messages").json()["items"]
    return [(m["role"], m["content"]) for m in items]


def sent_contents(upstream: Upstream, index: int) -> list[str]:
    return [m["content"] for m in upstream.requests[index]["messages"]]


def ask(llm: openai.OpenAI, session: str, messages: list[dict[str, Any]], **extra: Any) -> str:
    stream = extra.pop("stream", False)
    headers = {"X-Turnkeeper-Session": session} | extra.pop("headers", {})
    if stream:
        chunks = llm.chat.completions.create(
            model="m",
            messages=messages,
            stream=True,
            extra_headers=headers,
            **extra,  # type: ignore[arg-type]
        )
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    answer = llm.chat.completions.create(
        model="m",
        messages=messages,
        extra_headers=headers,
        **extra,  # type: ignore[arg-type]
    )
    return answer.choices[0].message.content or ""


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_sdks_own_retries_store_the_turn_once(
    service: Service, client: httpx.Client, upstream: Upstream, stream: bool
) -> None:
    upstream.failures = 2
    with sdk(service, max_retries=2) as llm:
        text = ask(llm, "trip", [{"role": "system", "content": "S"},
                                 {"role": "user", "content": QUESTION}], stream=stream)  # fmt: skip
    assert len(upstream.requests) == 3  # the SDK tried three times: two failures, an answer
    assert stored(client, "trip") == [("system", "S"), ("user", QUESTION), ("assistant", text)]
    assert sent_contents(upstream, 2) == ["S", QUESTION]


def test_a_manual_retry_after_a_502_and_a_later_transcript_store_each_turn_once(
    service: Service, client: httpx.Client, upstream: Upstream
) -> None:
    upstream.failures = 1
    with sdk(service, max_retries=0) as llm:
        with pytest.raises(openai.InternalServerError):
            ask(llm, "manual", [{"role": "user", "content": QUESTION}])
        first = ask(llm, "manual", [{"role": "user", "content": QUESTION}])
        assert sent_contents(upstream, 1) == [QUESTION]
        transcript = [
            {"role": "user", "content": QUESTION},
            {"role": "assistant", "content": first},
            {"role": "user", "content": "And in Porto?"},
        ]
        second = ask(llm, "manual", transcript)
    assert sent_contents(upstream, 2) == [QUESTION, first, "And in Porto?"]
    assert stored(client, "manual") == [
        ("user", QUESTION), ("assistant", first), ("user", "And in Porto?"), ("assistant", second),
    ]  # fmt: skip


def test_a_program_resending_an_unanswered_transcript_later_stores_nothing_twice(
    service: Service, client: httpx.Client, upstream: Upstream
) -> None:
    upstream.failures = 3
    with sdk(service, max_retries=2) as llm:
        with pytest.raises(openai.InternalServerError):
            ask(llm, "later", [{"role": "user", "content": QUESTION}])
        assert stored(client, "later") == [("user", QUESTION)]
        ask(llm, "later", [{"role": "user", "content": QUESTION}])
    assert sent_contents(upstream, 3).count(QUESTION) == 1
    assert [role for role, _ in stored(client, "later")] == ["user", "assistant"]


def test_a_retry_of_an_answered_turn_is_answered_again_from_the_store(
    service: Service, client: httpx.Client, upstream: Upstream
) -> None:
    """The SDK retries when a response is lost after the reply was stored: its retry count
    says so, and the stored answer is sent again without asking the model."""
    with sdk(service, max_retries=0) as llm:
        first = ask(llm, "lost", [{"role": "user", "content": QUESTION}])
        again = ask(
            llm, "lost", [{"role": "user", "content": QUESTION}],
            headers={"x-stainless-retry-count": "1"},
        )  # fmt: skip
    assert again == first
    assert len(upstream.requests) == 1
    assert len(stored(client, "lost")) == 2


def test_asking_the_same_thing_again_after_an_answer_is_a_new_turn(
    service: Service, client: httpx.Client, upstream: Upstream
) -> None:
    with sdk(service, max_retries=0) as llm:
        ask(llm, "twice", [{"role": "user", "content": "Tell me a joke"}])
        ask(llm, "twice", [{"role": "user", "content": "Tell me a joke"}])
    assert [role for role, _ in stored(client, "twice")] == ["user", "assistant"] * 2
    assert len(upstream.requests) == 2


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_an_idempotency_key_makes_a_proxied_turn_happen_once(
    service: Service, client: httpx.Client, upstream: Upstream, stream: bool
) -> None:
    key = {"Idempotency-Key": "order-7-question"}
    hi = [{"role": "user", "content": "Hi"}]
    with sdk(service, max_retries=0) as llm:
        first = ask(llm, "keyed", hi, headers=key, stream=stream)
        again = ask(llm, "keyed", hi, headers=key, stream=stream)  # replayed from the store
        other = ask(llm, "keyed", hi, stream=stream)  # no key: a new turn
    assert again == first != other
    assert len(upstream.requests) == 2
    assert len(stored(client, "keyed")) == 4


@pytest.mark.parametrize("path", ["", "/batch"])
def test_an_idempotency_key_makes_an_append_happen_once(client: httpx.Client, path: str) -> None:
    client.post("/v1/sessions", json={"key": "appends"})
    one = {"role": "user", "content": "Noted"}
    body: Any = one if not path else {"messages": [one, {"role": "assistant", "content": "Ok"}]}
    key = {"Idempotency-Key": "k-1"}
    first = client.post(f"/v1/sessions/appends/messages{path}", json=body, headers=key)
    again = client.post(f"/v1/sessions/appends/messages{path}", json=body, headers=key)
    assert first.status_code == again.status_code == 201
    assert first.json() == again.json()
    count = client.get("/v1/sessions/appends").json()["message_count"]
    assert count == (1 if not path else 2)


def test_chat_retried_by_key_or_by_content_stores_the_turn_once(
    service: Service, client: httpx.Client, upstream: Upstream
) -> None:
    client.post("/v1/sessions", json={"key": "chat"})
    upstream.failures = 1
    assert client.post("/v1/sessions/chat/chat", json={"content": "Hi"}).status_code == 502
    retried = client.post("/v1/sessions/chat/chat", json={"content": "Hi"})
    assert retried.status_code == 200 and retried.json()["replayed"] is False
    key = {"Idempotency-Key": "second"}
    second = client.post("/v1/sessions/chat/chat", json={"content": "Hi"}, headers=key).json()
    again = client.post("/v1/sessions/chat/chat", json={"content": "Hi"}, headers=key).json()
    assert again["replayed"] is True and again["reply"] == second["reply"]
    assert [role for role, _ in stored(client, "chat")] == ["user", "assistant"] * 2


def test_an_idempotency_key_too_long_is_a_clear_422(client: httpx.Client) -> None:
    client.post("/v1/sessions", json={"key": "long"})
    response = client.post(
        "/v1/sessions/long/messages", json={"role": "user", "content": "x"},
        headers={"Idempotency-Key": "k" * 300},
    )  # fmt: skip
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "idempotency-key"
    assert client.get("/v1/sessions/long").json()["message_count"] == 0


def test_a_streamed_chat_retry_of_an_answered_turn_streams_the_stored_reply(
    client: httpx.Client, upstream: Upstream
) -> None:
    body = {"content": "Hi", "create": True, "stream": True}
    key = {"Idempotency-Key": "streamed-turn"}
    client.post("/v1/sessions/replayed/chat", json=body, headers=key)
    again = client.post("/v1/sessions/replayed/chat", json=body, headers=key)
    blocks = [block.split("\n") for block in again.text.strip().split("\n\n")]
    events = [(lines[0].removeprefix("event: "), lines[1]) for lines in blocks]
    deltas = "".join(json.loads(data.removeprefix("data: "))["content"]
                     for name, data in events if name == "delta")  # fmt: skip
    done = json.loads(events[-1][1].removeprefix("data: "))
    assert events[-1][0] == "done" and done["replayed"] is True
    assert deltas == done["reply"]["content"] == "reply 1 to: Hi"
    assert len(upstream.requests) == 1
