"""The provider's prompt cache, over HTTP: every OpenAI-compatible call of a session is sent
with `prompt_cache_key` (the session, unless the client set its own); what the upstream says
its cache served or took is stored with each reply, summed in the session's and the project's
statistics, counted in `/metrics` and shown in the trace, with whether each turn's window kept
the previous turn's as its prefix. On SQLite and PostgreSQL, against the recording OpenAI and
Anthropic upstreams."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from .anthropic_upstream import AnthropicUpstream
from .conftest import Service, service_settings, start_service
from .upstream import Upstream

MODEL = "test-model"


@pytest.fixture(params=["sqlite", "postgres"])
def service(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    upstream_server: tuple[Upstream, str],
    anthropic_server: tuple[AnthropicUpstream, str],
) -> Iterator[Service]:
    """The service on each backend, with both recording upstreams."""
    overrides: dict[str, Any] = {
        "anthropic_base_url": anthropic_server[1], "anthropic_api_key": "anthropic-secret",
        "llm_max_retries": 0, "llm_timeout": "10s",
    }  # fmt: skip
    if request.param == "postgres":
        overrides["database_url"] = request.getfixturevalue("postgres_url")
    yield from start_service(service_settings(tmp_path, upstream_server[1], **overrides))


def session_id(client: httpx.Client, key: str) -> str:
    return str(client.get(f"/v1/sessions/{key}").json()["id"])


def metric(service: Service, name: str) -> float:
    """The value of an unlabelled counter in `/metrics` (0 before it was first counted)."""
    text = httpx.get(f"{service.url}/metrics").text
    found = re.search(rf"^{name} ([0-9.e+]+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


# -- prompt_cache_key -----------------------------------------------------------------------------


def test_chat_sends_the_session_as_the_prompt_cache_key(
    client: httpx.Client, upstream: Upstream
) -> None:
    client.post("/v1/sessions", json={"key": "keyed"})
    client.post("/v1/sessions/keyed/chat", json={"content": "Hello"})
    client.post("/v1/sessions/keyed/chat", json={"content": "Again"})
    keys = [request["prompt_cache_key"] for request in upstream.requests]
    assert keys == [session_id(client, "keyed")] * 2


def test_the_proxy_sends_the_session_unless_the_client_set_its_own_key(
    llm: openai.OpenAI, client: httpx.Client, upstream: Upstream
) -> None:
    remember = {"X-Turnkeeper-Session": "proxied"}
    ask = [{"role": "user", "content": "Hi"}]
    llm.chat.completions.create(model=MODEL, messages=ask, extra_headers=remember)  # type: ignore[arg-type]
    llm.chat.completions.create(
        model=MODEL,
        messages=ask,
        extra_headers=remember,
        prompt_cache_key="tenant-7",  # type: ignore[arg-type]
    )
    llm.chat.completions.create(model=MODEL, messages=ask)  # type: ignore[arg-type]
    keys = [request.get("prompt_cache_key") for request in upstream.requests]
    # without a session the request passes through as the client sent it: no key is made up
    assert keys == [session_id(client, "proxied"), "tenant-7", None]


def test_the_responses_route_sends_the_session_unless_the_client_set_its_own_key(
    llm: openai.OpenAI, client: httpx.Client, upstream: Upstream
) -> None:
    header = {"X-Turnkeeper-Session": "answered"}
    llm.responses.create(model=MODEL, input="Hi", extra_headers=header)
    llm.responses.create(model=MODEL, input="Hi", extra_headers=header, prompt_cache_key="mine")
    keys = [request.get("prompt_cache_key") for request in upstream.requests]
    assert keys == [session_id(client, "answered"), "mine"]


def test_the_anthropic_route_sends_no_openai_cache_key(
    service: Service, client: httpx.Client, claude_upstream: AnthropicUpstream
) -> None:
    with anthropic.Anthropic(
        base_url=service.url, api_key=service.keys["a"], max_retries=0, timeout=10
    ) as claude:
        claude.messages.create(
            model="claude-test", max_tokens=20, extra_headers={"X-Turnkeeper-Session": "c"},
            messages=[{"role": "user", "content": "Hi"}],
        )  # fmt: skip
    assert "prompt_cache_key" not in claude_upstream.requests[-1]


# -- cache usage: stored, summed, counted, traced ------------------------------------------------


def test_openai_cached_tokens_are_stored_summed_counted_and_traced(
    service: Service, client: httpx.Client, upstream: Upstream
) -> None:
    upstream.cached_tokens = 7
    before = metric(service, "turnkeeper_upstream_cache_read_tokens_total")
    client.post("/v1/sessions", json={"key": "warm"})
    for text in ("First", "Second"):
        reply = client.post("/v1/sessions/warm/chat", json={"content": text}).json()
    assert reply["trace"]["usage"]["cache_read_input_tokens"] == 7
    trace = client.get(f"/v1/sessions/warm/messages/{reply['trace']['seq']}/trace").json()
    assert trace["usage"]["cache_read_input_tokens"] == 7
    assert (
        "cache_creation_input_tokens" not in trace["usage"]
        or not trace["usage"]["cache_creation_input_tokens"]
    )
    stats = client.get("/v1/sessions/warm/stats").json()
    assert (stats["usage_cache_read_tokens"], stats["usage_cache_creation_tokens"]) == (14, 0)
    (project,) = client.get("/v1/stats").json()
    assert (project["usage_cache_read_tokens"], project["usage_cache_creation_tokens"]) == (14, 0)
    assert metric(service, "turnkeeper_upstream_cache_read_tokens_total") - before == 14
    session = client.get("/v1/sessions/warm").json()
    assert (session["usage_cache_read_tokens"], session["usage_cache_creation_tokens"]) == (14, 0)
    replies = [m for m in client.get("/v1/sessions/warm/messages").json()["items"] if m["usage"]]
    assert [m["usage"]["cache_read_input_tokens"] for m in replies] == [7, 7]


def test_a_reply_appended_with_its_cache_usage_keeps_it(client: httpx.Client) -> None:
    client.post("/v1/sessions", json={"key": "own-calls"})
    usage = {
        "input_tokens": 1200, "output_tokens": 30,
        "cache_read_input_tokens": 1024, "cache_creation_input_tokens": 100,
    }  # fmt: skip
    stored = client.post(
        "/v1/sessions/own-calls/messages",
        json={"role": "assistant", "content": "Done.", "usage": usage},
    )
    assert stored.status_code == 201 and stored.json()["usage"] == usage
    session = client.get("/v1/sessions/own-calls").json()
    assert (session["usage_cache_read_tokens"], session["usage_cache_creation_tokens"]) == (
        1024,
        100,
    )
    refused = client.post(
        "/v1/sessions/own-calls/messages",
        json={"role": "assistant", "content": "x", "usage": {"cache_read_input_tokens": -1}},
    )
    assert refused.status_code == 422 and "cache_read_input_tokens" in refused.text
    assert client.get("/v1/sessions/own-calls").json()["message_count"] == 1


def test_the_responses_usage_says_what_the_cache_served(
    llm: openai.OpenAI, upstream: Upstream
) -> None:
    upstream.cached_tokens = 5
    answered = llm.responses.create(
        model=MODEL, input="Hi", extra_headers={"X-Turnkeeper-Session": "responses-cache"}
    )
    assert answered.usage is not None
    assert answered.usage.input_tokens_details.cached_tokens == 5


def test_anthropic_cache_reads_and_writes_are_stored_summed_counted_and_traced(
    service: Service, client: httpx.Client, claude_upstream: AnthropicUpstream
) -> None:
    claude_upstream.cache_read, claude_upstream.cache_creation = 1200, 300
    read_before = metric(service, "turnkeeper_upstream_cache_read_tokens_total")
    written_before = metric(service, "turnkeeper_upstream_cache_creation_tokens_total")
    with anthropic.Anthropic(
        base_url=service.url, api_key=service.keys["a"], max_retries=0, timeout=10
    ) as claude:
        for text in ("Hello", "Again"):
            claude.messages.create(
                model="claude-test", max_tokens=20,
                extra_headers={"X-Turnkeeper-Session": "claude-cache"},
                messages=[{"role": "user", "content": text}],
            )  # fmt: skip
    stats = client.get("/v1/sessions/claude-cache/stats").json()
    assert (stats["usage_cache_read_tokens"], stats["usage_cache_creation_tokens"]) == (2400, 600)
    (project,) = client.get("/v1/stats").json()
    assert (project["usage_cache_read_tokens"], project["usage_cache_creation_tokens"]) == (
        2400, 600,
    )  # fmt: skip
    trace = client.get("/v1/sessions/claude-cache/messages/4/trace").json()
    assert trace["usage"]["cache_read_input_tokens"] == 1200
    assert trace["usage"]["cache_creation_input_tokens"] == 300
    assert trace["prefix_matched"] is True and trace["prefix_broken_at"] is None
    assert metric(service, "turnkeeper_upstream_cache_read_tokens_total") - read_before == 2400
    written = metric(service, "turnkeeper_upstream_cache_creation_tokens_total") - written_before
    assert written == 600


# -- the prefix each turn kept ------------------------------------------------------------------


def first_difference(before: list[dict[str, Any]], now: list[dict[str, Any]]) -> int | None:
    for index, message in enumerate(before):
        if index >= len(now) or now[index] != message:
            return index
    return None


def test_the_trace_says_whether_the_previous_window_was_kept_as_the_prefix(
    client: httpx.Client, upstream: Upstream
) -> None:
    client.post("/v1/sessions", json={"key": "prefixed"})
    client.post("/v1/sessions/prefixed/messages", json={"role": "system", "content": "Be brief."})
    padding = "padding " * 40
    for n in range(2):  # a budget that holds everything: each turn only appends
        client.post("/v1/sessions/prefixed/chat", json={"content": f"turn {n} {padding}"})
    appended = client.get("/v1/sessions/prefixed/messages/5/trace").json()
    assert (appended["prefix_matched"], appended["prefix_broken_at"]) == (True, None)
    first = client.get("/v1/sessions/prefixed/messages/3/trace").json()
    assert (first["prefix_matched"], first["prefix_broken_at"]) == (None, None)
    # a budget that no longer holds them: older turns leave, a marker says so (history rewritten)
    client.post(
        "/v1/sessions/prefixed/chat",
        json={"content": f"turn 2 {padding}", "strategy": "sliding_window", "budget_tokens": 200},
    )
    rewritten = client.get("/v1/sessions/prefixed/messages/7/trace").json()
    assert rewritten["dropped_seqs"] and rewritten["prefix_matched"] is False
    expected = first_difference(upstream.requests[1]["messages"], upstream.requests[2]["messages"])
    assert rewritten["prefix_broken_at"] == expected == 1  # right after the system message
    assert rewritten["window"][1]["kind"] == "marker"


# -- a replayed turn answers with the usage the upstream gave it ----------------------------------


def test_a_retried_proxy_turn_reports_the_cache_usage_of_the_stored_reply(
    llm: openai.OpenAI, upstream: Upstream
) -> None:
    upstream.cached_tokens = 9
    headers = {"X-Turnkeeper-Session": "retried", "Idempotency-Key": "turn-1"}
    messages: Any = [{"role": "user", "content": "Once"}]
    first = llm.chat.completions.create(model=MODEL, messages=messages, extra_headers=headers)
    again = llm.chat.completions.create(model=MODEL, messages=messages, extra_headers=headers)
    assert len(upstream.requests) == 1  # the retry was answered from the stored reply
    assert first.usage is not None and again.usage is not None
    assert first.usage.prompt_tokens_details is not None
    assert again.usage.prompt_tokens_details is not None
    assert again.usage.prompt_tokens_details.cached_tokens == 9
    assert again.usage.prompt_tokens == first.usage.prompt_tokens


def test_a_retried_anthropic_turn_reports_the_cache_usage_of_the_stored_reply(
    service: Service, claude_upstream: AnthropicUpstream
) -> None:
    claude_upstream.cache_read, claude_upstream.cache_creation = 800, 200
    with anthropic.Anthropic(
        base_url=service.url, api_key=service.keys["a"], max_retries=0, timeout=10
    ) as claude:

        def ask() -> anthropic.types.Message:
            return claude.messages.create(
                model="claude-test", max_tokens=20, messages=[{"role": "user", "content": "Once"}],
                extra_headers={"X-Turnkeeper-Session": "retried-c", "Idempotency-Key": "turn-1"},
            )  # fmt: skip

        first, again = ask(), ask()
    assert len(claude_upstream.requests) == 1
    assert again.usage.cache_read_input_tokens == first.usage.cache_read_input_tokens == 800
    assert again.usage.cache_creation_input_tokens == 200
    assert again.usage.input_tokens == first.usage.input_tokens
