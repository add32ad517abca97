"""Turn traces over HTTP: every reply produced through `/chat` or the proxy has a trace of
exactly what the model saw, in the `/chat` answer and at
`GET /v1/sessions/{s}/messages/{seq}/trace`, with the diff against the previous turn."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai

from .conftest import Service
from .upstream import Upstream


def sent(window: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(entry["role"], entry["content"]) for entry in window]


def test_the_chat_answer_carries_the_trace_of_the_window_sent(
    client: httpx.Client, upstream: Upstream
) -> None:
    client.post("/v1/sessions", json={"key": "traced"})
    client.post("/v1/sessions/traced/messages", json={"role": "system", "content": "Be brief."})
    client.post("/v1/sessions/traced/chat", json={"content": "First"})
    response = client.post("/v1/sessions/traced/chat", json={"content": "Second"})
    trace = response.json()["trace"]
    assert sent(trace["window"]) == sent(upstream.requests[1]["messages"])
    assert trace["seq"] == 5 and trace["turn_seq"] == 4 and trace["source"] == "chat"
    assert trace["kept_seqs"] == [1, 2, 3, 4] and trace["dropped_seqs"] == []
    assert trace["model"] == "test-model" and trace["encoding"]
    assert trace["request_id"] == response.headers["x-request-id"]
    assert trace["usage"]["output_tokens"] == 4
    assert trace["tokens_sent"] == response.json()["context"]["tokens_used"]


def test_get_trace_shows_the_window_and_what_changed_since_the_previous_turn(
    client: httpx.Client, upstream: Upstream
) -> None:
    client.post("/v1/sessions", json={"key": "diffed"})
    for n in range(3):
        client.post(
            "/v1/sessions/diffed/chat",
            json={"content": f"turn {n} " + "padding " * 40, "strategy": "sliding_window",
                  "budget_tokens": 200},
        )  # fmt: skip
    trace = client.get("/v1/sessions/diffed/messages/6/trace").json()
    assert trace["previous_seq"] == 4
    entered = [e["seq"] for e in trace["entered"] if e["seq"]]
    assert entered and entered[-1] == 5 and set(entered) <= set(trace["kept_seqs"])
    left = [e["seq"] for e in trace["left"] if e["seq"]]
    assert left and not set(left) & set(trace["kept_seqs"])
    assert sent(trace["window"]) == sent(upstream.requests[2]["messages"])


def test_a_message_without_a_trace_is_a_404_problem(client: httpx.Client) -> None:
    client.post("/v1/sessions", json={"key": "plain"})
    client.post("/v1/sessions/plain/messages", json={"role": "user", "content": "Hi"})
    response = client.get("/v1/sessions/plain/messages/1/trace")
    assert response.status_code == 404
    assert "has no trace" in response.json()["detail"]
    assert client.get("/v1/sessions/plain/messages/0/trace").status_code == 422


def test_proxied_and_streamed_replies_have_traces(
    service: Service, client: httpx.Client, upstream: Upstream
) -> None:
    with openai.OpenAI(
        base_url=f"{service.url}/v1", api_key=service.keys["a"], max_retries=0
    ) as llm:
        llm.chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": "Hi"}],
            extra_headers={"X-Turnkeeper-Session": "proxied"},
        )  # fmt: skip
    trace = client.get("/v1/sessions/proxied/messages/2/trace").json()
    assert trace["source"] == "proxy" and trace["model"] == "gpt-test"
    assert trace["previous_seq"] is None and len(trace["entered"]) == 1
    streamed = client.post("/v1/sessions/proxied/chat", json={"content": "More", "stream": True})
    done = json.loads(streamed.text.strip().split("\n\n")[-1].split("data: ", 1)[1])
    assert done["trace"]["stream"] is True and done["trace"]["seq"] == 4
    assert client.get("/v1/sessions/proxied/messages/4/trace").json()["previous_seq"] == 2


def test_another_projects_trace_is_not_reachable(service: Service, upstream: Upstream) -> None:
    with service.client("a") as alpha, service.client("b") as beta:
        session = alpha.post("/v1/sessions/mine/chat", json={"content": "x", "create": True})
        path = f"/v1/sessions/{session.json()['session']['id']}/messages/2/trace"
        assert alpha.get(path).status_code == 200
        assert beta.get(path).status_code == 404
