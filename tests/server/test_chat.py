"""`POST /v1/sessions/{session}/chat`: the turn against the recording upstream model."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from .upstream import Upstream


@pytest.fixture
def session(client: httpx.Client) -> str:
    client.post("/v1/sessions", json={"key": "chat"})
    client.post("/v1/sessions/chat/messages", json={"role": "system", "content": "Be brief."})
    return "chat"


def history(client: httpx.Client, session: str) -> list[dict[str, Any]]:
    return list(client.get(f"/v1/sessions/{session}/messages").json()["items"])


def events(response: httpx.Response) -> list[tuple[str, Any]]:
    """(event, data) pairs of a server-sent event stream."""
    parsed = []
    for block in response.text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        parsed.append((lines.get("event", "message"), json.loads(lines["data"])))
    return parsed


def test_the_second_turn_sends_the_first_to_the_model(
    client: httpx.Client, session: str, upstream: Upstream
) -> None:
    client.post(f"/v1/sessions/{session}/chat", json={"content": "My name is Ana."})
    client.post(f"/v1/sessions/{session}/chat", json={"content": "What is my name?"})
    second = upstream.requests[1]["messages"]
    assert [(m["role"], m["content"]) for m in second] == [
        ("system", "Be brief."),
        ("user", "My name is Ana."),
        ("assistant", "reply 1 to: My name is Ana."),
        ("user", "What is my name?"),
    ]


def test_the_new_message_reaches_the_model_exactly_once(
    client: httpx.Client, session: str, upstream: Upstream
) -> None:
    client.post(f"/v1/sessions/{session}/chat", json={"content": "only once", "id": "t-1"})
    sent = [m["content"] for m in upstream.requests[0]["messages"]]
    assert sent.count("only once") == 1


def test_stores_the_turn_and_the_reply_with_its_usage(
    client: httpx.Client, session: str, upstream: Upstream
) -> None:
    answer = client.post(f"/v1/sessions/{session}/chat", json={"content": "Hello"}).json()
    assert answer["reply"]["content"] == "reply 1 to: Hello"
    assert answer["reply"]["usage"]["output_tokens"] == 4
    assert answer["context"]["messages_in_store"] == 2
    assert [m["role"] for m in history(client, session)] == ["system", "user", "assistant"]
    assert answer["session"]["usage_output_tokens"] == 4


def test_calls_the_configured_model_with_the_configured_key(
    client: httpx.Client, session: str, upstream: Upstream
) -> None:
    client.post(f"/v1/sessions/{session}/chat", json={"content": "Hi", "temperature": 0.2})
    assert upstream.requests[0]["model"] == "test-model"
    assert upstream.requests[0]["temperature"] == 0.2
    assert upstream.headers[0]["authorization"] == "Bearer upstream-secret"


def test_creates_the_session_by_key_when_asked(client: httpx.Client, upstream: Upstream) -> None:
    assert client.post("/v1/sessions/fresh/chat", json={"content": "Hi"}).status_code == 404
    answer = client.post("/v1/sessions/fresh/chat", json={"content": "Hi", "create": True})
    assert answer.status_code == 200
    assert answer.json()["created"] is True
    assert answer.json()["session"]["key"] == "fresh"


def test_a_failing_model_is_a_502_and_the_message_is_kept(
    client: httpx.Client, session: str, upstream: Upstream
) -> None:
    upstream.mode = "error"
    failed = client.post(f"/v1/sessions/{session}/chat", json={"content": "Hi", "id": "turn-1"})
    assert failed.status_code == 502
    assert failed.headers["content-type"] == "application/problem+json"
    assert "model overloaded" in failed.json()["detail"]
    assert [m["content"] for m in history(client, session)] == ["Be brief.", "Hi"]
    upstream.mode = "ok"
    retried = client.post(f"/v1/sessions/{session}/chat", json={"content": "Hi", "id": "turn-1"})
    assert retried.status_code == 200
    assert [m["role"] for m in history(client, session)] == ["system", "user", "assistant"]
    assert [m["content"] for m in upstream.requests[1]["messages"]].count("Hi") == 1


def test_a_model_reply_that_cannot_be_stored_is_a_502_not_the_clients_fault(
    client: httpx.Client, session: str, upstream: Upstream
) -> None:
    upstream.mode = "huge"
    failed = client.post(f"/v1/sessions/{session}/chat", json={"content": "Hi", "id": "turn-1"})
    assert failed.status_code == 502
    assert "the upstream model's reply cannot be stored" in failed.json()["detail"]
    assert [m["content"] for m in history(client, session)] == ["Be brief.", "Hi"]


def test_a_model_that_does_not_answer_in_time_is_a_504(
    client: httpx.Client, session: str, upstream: Upstream
) -> None:
    upstream.mode, upstream.delay = "slow", 3
    response = client.post(f"/v1/sessions/{session}/chat", json={"content": "Hi"})
    assert response.status_code == 504
    assert [m["content"] for m in history(client, session)] == ["Be brief.", "Hi"]


def test_retrying_an_answered_turn_replays_the_stored_reply(
    client: httpx.Client, session: str, upstream: Upstream
) -> None:
    first = client.post(f"/v1/sessions/{session}/chat", json={"content": "Hi", "id": "t-9"}).json()
    again = client.post(f"/v1/sessions/{session}/chat", json={"content": "Hi", "id": "t-9"}).json()
    assert again["replayed"] is True and again["context"] is None
    assert again["reply"] == first["reply"]
    assert len(upstream.requests) == 1
    assert len(history(client, session)) == 3


def test_the_budget_options_shape_the_window_sent(
    client: httpx.Client, session: str, upstream: Upstream
) -> None:
    for n in range(6):
        client.post(
            f"/v1/sessions/{session}/messages", json={"role": "user", "content": f"old {n} " * 30}
        )
    answer = client.post(
        f"/v1/sessions/{session}/chat",
        json={"content": "Now?", "strategy": "sliding_window", "budget_tokens": 120},
    ).json()
    assert answer["context"]["truncated"] is True
    assert upstream.requests[0]["messages"][-1]["content"] == "Now?"
    assert len(upstream.requests[0]["messages"]) < 8


def test_a_relevant_chat_turn_sends_the_recalled_turn_and_its_trace_names_it(
    client: httpx.Client, session: str, upstream: Upstream
) -> None:
    client.post(
        f"/v1/sessions/{session}/messages", json={"role": "user", "content": "My pin is 5093."}
    )
    for n in range(8):
        client.post(
            f"/v1/sessions/{session}/messages", json={"role": "user", "content": f"old {n} " * 30}
        )
    answer = client.post(
        f"/v1/sessions/{session}/chat",
        json={"content": "What was my pin?", "strategy": "relevant", "budget_tokens": 200},
    )
    assert answer.status_code == 200, answer.text
    sent = [message["content"] for message in upstream.requests[0]["messages"]]
    assert "My pin is 5093." in sent and sent[-1] == "What was my pin?"
    assert answer.json()["context"]["strategy"] == "relevant"
    schema = client.get("/openapi.json").json()["components"]["schemas"]
    assert "relevant" in schema["StrategyName"]["enum"]


def test_max_tokens_is_the_window_budget_on_chat_and_max_output_tokens_the_replys_limit(
    client: httpx.Client, session: str, upstream: Upstream
) -> None:
    """`/chat` keeps `max_tokens` as the old name of `budget_tokens`: a window budget, never
    sent upstream as the reply's `max_tokens` (that is `max_output_tokens`)."""
    for n in range(6):
        client.post(
            f"/v1/sessions/{session}/messages", json={"role": "user", "content": f"old {n} " * 30}
        )
    old = client.post(
        f"/v1/sessions/{session}/chat",
        json={"content": "Now?", "strategy": "sliding_window", "max_tokens": 120,
              "max_output_tokens": 50},
    )  # fmt: skip
    assert old.status_code == 200, old.text
    assert old.json()["context"]["budget"] == 120 and old.json()["context"]["truncated"]
    assert upstream.requests[0]["max_tokens"] == 50
    both = client.post(
        f"/v1/sessions/{session}/chat",
        json={"content": "Again?", "budget_tokens": 300, "max_tokens": 120},
    )
    assert both.status_code == 422
    assert both.json()["errors"][0]["field"] == "budget_tokens"
    assert len(upstream.requests) == 1  # refused before anything was stored or sent
    schema = client.get("/openapi.json").json()["components"]["schemas"]["ChatRequest"]
    assert schema["properties"]["max_tokens"]["deprecated"] is True


def test_streams_the_reply_as_server_sent_events(
    client: httpx.Client, session: str, upstream: Upstream
) -> None:
    response = client.post(
        f"/v1/sessions/{session}/chat", json={"content": "Stream it", "stream": True}
    )
    assert response.headers["content-type"].startswith("text/event-stream")
    stream = events(response)
    names = [name for name, _ in stream]
    assert names[0] == "turn" and names[-1] == "done" and "delta" in names
    text = "".join(data["content"] for name, data in stream if name == "delta")
    done = stream[-1][1]
    assert text == done["reply"]["content"] == "reply 1 to: Stream it"
    assert done["reply"]["usage"] is not None
    assert upstream.requests[0]["stream"] is True
    assert [m["role"] for m in history(client, session)] == ["system", "user", "assistant"]


def test_a_stream_that_breaks_ends_with_an_error_event_and_keeps_the_message(
    client: httpx.Client, session: str, upstream: Upstream
) -> None:
    upstream.mode = "break"
    response = client.post(
        f"/v1/sessions/{session}/chat", json={"content": "Go on", "stream": True}
    )
    name, problem = events(response)[-1]
    assert name == "error" and problem["status"] == 502
    assert [m["role"] for m in history(client, session)] == ["system", "user"]


def test_a_stream_the_model_refuses_is_a_plain_502(
    client: httpx.Client, session: str, upstream: Upstream
) -> None:
    upstream.mode = "refuse"
    response = client.post(f"/v1/sessions/{session}/chat", json={"content": "Hi", "stream": True})
    assert response.status_code == 502
    assert response.json()["upstream_status"] == 404
