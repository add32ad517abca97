"""Anthropic's Messages API (`POST /v1/messages`) driven by the official `anthropic` client against
the service on loopback with API keys on, on SQLite and PostgreSQL, in front of a recording
Anthropic upstream (`anthropic_upstream.py`): memory through the header and through
`metadata.session_id`, streaming, prompt-cache marks as the upstream received them, usage with
cache reads and writes in the trace, retries storing each turn once, errors in Anthropic's
shape, and what cannot be stored refused before anything is."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

from .anthropic_upstream import AnthropicUpstream
from .conftest import TLS, Service, service_settings, start_service
from .upstream import Upstream

MODEL = "claude-test"
ANTHROPIC_KEY = "anthropic-secret"


@pytest.fixture(params=["sqlite", "postgres"])
def service(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    upstream_server: tuple[Upstream, str],
    anthropic_server: tuple[AnthropicUpstream, str],
) -> Iterator[Service]:
    overrides: dict[str, Any] = {}
    if request.param == "postgres":
        overrides["database_url"] = request.getfixturevalue("postgres_url")
    yield from start_service(
        anthropic_settings(tmp_path, upstream_server, anthropic_server, **overrides)
    )


def anthropic_settings(
    tmp_path: Path,
    upstream_server: tuple[Upstream, str],
    anthropic_server: tuple[AnthropicUpstream, str],
    **overrides: Any,
) -> Any:
    """The service's settings with the recording Anthropic upstream, retried never (the
    client's retries are under test) and waited for long enough for a held model."""
    return service_settings(
        tmp_path, upstream_server[1], **{
            "anthropic_base_url": anthropic_server[1], "anthropic_api_key": ANTHROPIC_KEY,
            "llm_max_retries": 0, "llm_timeout": "10s",
        } | overrides,
    )  # fmt: skip


def claude_for(service: Service, who: str = "a", **options: Any) -> anthropic.Anthropic:
    """The official client, with `who`'s turnkeeper key as its API key (sent as `x-api-key`)."""
    options = {"max_retries": 0, "timeout": 10} | options
    return anthropic.Anthropic(base_url=service.url, api_key=service.keys[who], **options)


@pytest.fixture
def claude(service: Service) -> Iterator[anthropic.Anthropic]:
    with claude_for(service) as client:
        yield client


def stored(client: httpx.Client, session: str) -> list[tuple[str, str]]:
    items = client.get(f"/v1/sessions/{session}/messages").json()["items"]
    return [(m["role"], m["content"]) for m in items]


def remembering(session: str) -> dict[str, str]:
    return {"X-Turnkeeper-Session": session}


def test_two_turns_are_remembered_through_the_header(
    claude: anthropic.Anthropic, client: httpx.Client, claude_upstream: AnthropicUpstream
) -> None:
    first = claude.messages.create(
        model=MODEL, max_tokens=100, system="You are terse.",
        messages=[{"role": "user", "content": "My name is Ada."}],
        extra_headers=remembering("ada"),
    )  # fmt: skip
    assert first.content[0].type == "text" and first.role == "assistant"
    second = claude.messages.create(
        model=MODEL, max_tokens=100, system="You are terse.",
        messages=[{"role": "user", "content": "What is my name?"}],
        extra_headers=remembering("ada"),
    )  # fmt: skip
    # the upstream saw the first turn and its reply, rendered by to_anthropic
    sent = claude_upstream.requests[1]
    assert sent["system"] == "You are terse."
    assert sent["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "My name is Ada."}]},
        {"role": "assistant", "content": [{"type": "text", "text": first.content[0].text}]},
        {"role": "user", "content": [{"type": "text", "text": "What is my name?"}]},
    ]
    assert (sent["model"], sent["max_tokens"]) == (MODEL, 100)
    reply = second.content[0]
    assert reply.type == "text"
    assert stored(client, "ada") == [
        ("system", "You are terse."),  # stored once: the session was empty only the first time
        ("user", "My name is Ada."),
        ("assistant", first.content[0].text),
        ("user", "What is my name?"),
        ("assistant", reply.text),
    ]
    # the Anthropic key went to the Anthropic upstream, and nothing else did
    for headers in claude_upstream.headers:
        assert headers["x-api-key"] == ANTHROPIC_KEY
        assert headers["anthropic-version"] == "2023-06-01"
        assert "authorization" not in headers and "x-turnkeeper-session" not in headers


def test_memory_through_metadata_session_id_keeps_user_id_for_anthropic(
    claude: anthropic.Anthropic, client: httpx.Client, claude_upstream: AnthropicUpstream
) -> None:
    metadata: Any = {"session_id": "meta-1", "user_id": "customer-7"}
    for text in ("First question.", "Second question."):
        claude.messages.create(
            model=MODEL, max_tokens=50, metadata=metadata,
            messages=[{"role": "user", "content": text}],
        )  # fmt: skip
    assert [len(r["messages"]) for r in claude_upstream.requests] == [1, 3]
    assert all(r["metadata"] == {"user_id": "customer-7"} for r in claude_upstream.requests)
    assert [role for role, _ in stored(client, "meta-1")] == ["user", "assistant"] * 2


def test_a_client_sending_its_whole_transcript_stores_only_the_new_turn(
    claude: anthropic.Anthropic, client: httpx.Client, claude_upstream: AnthropicUpstream
) -> None:
    first = claude.messages.create(
        model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "One"}],
        extra_headers=remembering("whole"),
    )  # fmt: skip
    claude.messages.create(
        model=MODEL, max_tokens=50,
        messages=[
            {"role": "user", "content": "One"},
            {"role": "assistant", "content": first.content},  # type: ignore[typeddict-item]
            {"role": "user", "content": [{"type": "text", "text": "Two"}]},
        ],
        extra_headers=remembering("whole"),
    )  # fmt: skip
    assert [text for _, text in stored(client, "whole")][::2] == ["One", "Two"]
    assert len(claude_upstream.requests[1]["messages"]) == 3


def test_a_streamed_turn_is_relayed_as_anthropics_events_and_stored(
    claude: anthropic.Anthropic, client: httpx.Client, claude_upstream: AnthropicUpstream
) -> None:
    with claude.messages.stream(
        model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "Tell me a story."}],
        extra_headers=remembering("story"),
    ) as stream:  # fmt: skip
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "reply 1 to: Tell me a story." == final.content[0].text  # type: ignore[union-attr]
    assert final.stop_reason == "end_turn" and final.usage.output_tokens == len(text.split())
    assert claude_upstream.requests[0]["stream"] is True
    assert stored(client, "story") == [("user", "Tell me a story."), ("assistant", text)]
    items = client.get("/v1/sessions/story/messages").json()["items"]
    trace = client.get(f"/v1/sessions/story/messages/{items[1]['seq']}/trace").json()
    assert trace["stream"] is True and trace["source"] == "anthropic"
    assert trace["usage"]["output_tokens"] == len(text.split())


def test_the_event_stream_is_framed_as_anthropics(
    service: Service, claude_upstream: AnthropicUpstream
) -> None:
    body = {"model": MODEL, "max_tokens": 50, "stream": True,
            "messages": [{"role": "user", "content": "Hi there"}]}  # fmt: skip
    headers = {"x-api-key": service.keys["a"], **remembering("framed")}
    response = httpx.post(f"{service.url}/v1/messages", json=body, headers=headers, verify=TLS)
    assert response.status_code == 200 and response.headers["content-type"].startswith(
        "text/event-stream"
    )
    events = [
        (lines[0].removeprefix("event: "), json.loads(lines[1].removeprefix("data: ")))
        for lines in (block.split("\n") for block in response.text.strip().split("\n\n"))
    ]
    names = [name for name, _ in events]
    assert names[:3] == ["message_start", "ping", "content_block_start"]
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(names[3:-3]) == {"content_block_delta"}
    assert all(data["type"] == name for name, data in events)


def test_tool_use_and_its_result_round_trip_as_blocks(
    claude: anthropic.Anthropic, client: httpx.Client, claude_upstream: AnthropicUpstream
) -> None:
    tools: Any = [{"name": "weather", "description": "Weather in a city",
                   "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]  # fmt: skip
    claude_upstream.tool_use = {"name": "weather", "input": {"city": "Paris"}}
    asked = claude.messages.create(
        model=MODEL, max_tokens=50, tools=tools, extra_headers=remembering("tools"),
        messages=[{"role": "user", "content": "Weather in Paris?"}],
    )  # fmt: skip
    use = asked.content[1]
    assert asked.stop_reason == "tool_use" and use.type == "tool_use"
    claude_upstream.tool_use = None
    claude.messages.create(
        model=MODEL, max_tokens=50, tools=tools, extra_headers=remembering("tools"),
        messages=[{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": use.id, "content": "18C and sunny"},
        ]}],
    )  # fmt: skip
    sent = claude_upstream.requests[1]["messages"]
    assert sent[1]["content"][1] == {
        "type": "tool_use", "id": use.id, "name": "weather", "input": {"city": "Paris"},
    }  # fmt: skip
    assert sent[2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": use.id, "content": "18C and sunny"},
    ]}  # fmt: skip
    items = client.get("/v1/sessions/tools/messages").json()["items"]
    assert [m["role"] for m in items] == ["user", "assistant", "tool", "assistant"]
    assert items[1]["tool_calls"][0]["function"] == {
        "name": "weather", "arguments": '{"city": "Paris"}',
    }  # fmt: skip
    assert items[2]["tool_call_id"] == use.id


def test_a_streamed_tool_use_is_gathered_and_stored(
    claude: anthropic.Anthropic, client: httpx.Client, claude_upstream: AnthropicUpstream
) -> None:
    claude_upstream.tool_use = {"name": "weather", "input": {"city": "Oslo", "days": 3}}
    with claude.messages.stream(
        model=MODEL, max_tokens=50, extra_headers=remembering("streamed-tool"),
        tools=[{"name": "weather", "input_schema": {"type": "object"}}],
        messages=[{"role": "user", "content": "Oslo?"}],
    ) as stream:  # fmt: skip
        final = stream.get_final_message()
    assert final.content[1].input == {"city": "Oslo", "days": 3}  # type: ignore[union-attr]
    items = client.get("/v1/sessions/streamed-tool/messages").json()["items"]
    arguments = items[1]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(arguments) == {"city": "Oslo", "days": 3}


# -- prompt caching and usage --------------------------------------------------------------------

LONG_SYSTEM = "You answer questions about our return policy. " * 300  # well over 1,024 tokens


def marked(request: dict[str, Any]) -> list[str]:
    """Where the upstream request carries `cache_control`: `system[i]` or `messages[i][j]`."""
    system = request["system"] if isinstance(request["system"], list) else []
    found = [f"system[{i}]" for i, block in enumerate(system) if "cache_control" in block]
    for i, turn in enumerate(request["messages"]):
        found += [
            f"messages[{i}][{j}]" for j, b in enumerate(turn["content"]) if "cache_control" in b
        ]
    return found


def test_cache_control_marks_the_stable_prefix_as_the_upstream_receives_it(
    claude: anthropic.Anthropic, claude_upstream: AnthropicUpstream
) -> None:
    for text in ("What is the return window?", "And for sale items?"):
        claude.messages.create(
            model=MODEL, max_tokens=50, system=LONG_SYSTEM, cache_control={"type": "ephemeral"},
            messages=[{"role": "user", "content": text}], extra_headers=remembering("cached"),
        )  # fmt: skip
    first, second = claude_upstream.requests
    assert "cache_control" not in first and "cache_control" not in second  # placed, not passed
    assert first["system"] == [
        {"type": "text", "text": LONG_SYSTEM, "cache_control": {"type": "ephemeral"}}
    ]
    assert marked(first) == ["system[0]", "messages[0][0]"]
    assert marked(second) == ["system[0]", "messages[2][0]"]  # the mark moved to the new end
    # the second request's prefix up to the first one's end is the first request, unmarked
    assert second["messages"][0]["content"][0]["text"] == "What is the return window?"


def test_a_mark_on_a_block_asks_for_caching_with_its_ttl_and_tools_marks_count(
    claude: anthropic.Anthropic, claude_upstream: AnthropicUpstream
) -> None:
    hour: Any = {"type": "ephemeral", "ttl": "1h"}
    tools: Any = [
        {"name": f"tool{n}", "input_schema": {"type": "object"}, "cache_control": hour}
        for n in range(3)
    ]
    claude.messages.create(
        model=MODEL, max_tokens=50, tools=tools, extra_headers=remembering("ttl"),
        system=[{"type": "text", "text": LONG_SYSTEM, "cache_control": hour}],
        messages=[{"role": "user", "content": "Hello"}],
    )  # fmt: skip
    sent = claude_upstream.requests[0]
    assert sent["tools"] == tools  # forwarded as given: three of the four marks
    assert marked(sent) == ["messages[0][0]"]  # one left: the whole window
    assert sent["messages"][0]["content"][0]["cache_control"] == hour


def test_no_caching_asked_sends_no_marks(
    claude: anthropic.Anthropic, claude_upstream: AnthropicUpstream
) -> None:
    claude.messages.create(
        model=MODEL, max_tokens=50, system=LONG_SYSTEM, extra_headers=remembering("plain"),
        messages=[{"role": "user", "content": "Hello"}],
    )  # fmt: skip
    assert claude_upstream.requests[0]["system"] == LONG_SYSTEM


def test_usage_with_cache_reads_and_writes_is_stored_and_shown_in_the_trace(
    claude: anthropic.Anthropic, client: httpx.Client, claude_upstream: AnthropicUpstream
) -> None:
    claude_upstream.cache_read, claude_upstream.cache_creation = 1200, 300
    answer = claude.messages.create(
        model=MODEL, max_tokens=50, extra_headers=remembering("usage"),
        messages=[{"role": "user", "content": "Hello"}],
    )  # fmt: skip
    assert answer.usage.cache_read_input_tokens == 1200  # passed through to the client
    items = client.get("/v1/sessions/usage/messages").json()["items"]
    total_input = answer.usage.input_tokens + 1200 + 300
    assert items[1]["usage"] == {
        "input_tokens": total_input,
        "output_tokens": answer.usage.output_tokens,
        "cache_read_input_tokens": 1200,
        "cache_creation_input_tokens": 300,
    }
    trace = client.get(f"/v1/sessions/usage/messages/{items[1]['seq']}/trace").json()
    assert trace["usage"] == {
        "input_tokens": total_input,
        "output_tokens": answer.usage.output_tokens,
        "cache_read_input_tokens": 1200,
        "cache_creation_input_tokens": 300,
    }
    stats = client.get("/v1/sessions/usage/stats").json()
    assert stats["usage_input_tokens"] == total_input


# -- exactly once --------------------------------------------------------------------------------


def test_an_idempotency_key_retry_is_answered_from_the_stored_reply(
    claude: anthropic.Anthropic, client: httpx.Client, claude_upstream: AnthropicUpstream
) -> None:
    def ask() -> anthropic.types.Message:
        return claude.messages.create(
            model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "Once?"}],
            extra_headers={**remembering("idem"), "Idempotency-Key": "order-9"},
        )  # fmt: skip

    first, again = ask(), ask()
    assert again.content[0].text == first.content[0].text  # type: ignore[union-attr]
    assert len(claude_upstream.requests) == 1
    assert stored(client, "idem") == [("user", "Once?"), ("assistant", first.content[0].text)]  # type: ignore[union-attr]
    with claude.messages.stream(
        model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "Once?"}],
        extra_headers={**remembering("idem"), "Idempotency-Key": "order-9"},
    ) as stream:  # fmt: skip
        assert "".join(stream.text_stream) == first.content[0].text  # type: ignore[union-attr]
    assert len(claude_upstream.requests) == 1


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_sdks_retry_after_its_own_timeout_stores_once_and_asks_once(
    service: Service, client: httpx.Client, claude_upstream: AnthropicUpstream, stream: bool
) -> None:
    """The SDK gives up after `timeout` and sends the request again (`x-stainless-retry-count:
    1`) while the service still waits for the model: the retry waits for that answer."""
    retried = threading.Event()

    def seen(request: Any) -> None:  # the SDK's own HTTP client's request
        if request.headers.get("x-stainless-retry-count") == "1":
            retried.set()

    gate = threading.Event()
    claude_upstream.gate = gate
    http = anthropic.DefaultHttpxClient(event_hooks={"request": [seen]})
    sdk = claude_for(service, max_retries=1, timeout=2, http_client=http)

    def ask() -> str:
        question: Any = [{"role": "user", "content": "Slow question"}]
        if stream:
            with sdk.messages.stream(
                model=MODEL, max_tokens=50, messages=question, extra_headers=remembering("sdk")
            ) as streamed:
                return "".join(streamed.text_stream)
        answer = sdk.messages.create(
            model=MODEL, max_tokens=50, messages=question, extra_headers=remembering("sdk")
        )
        return answer.content[0].text  # type: ignore[union-attr]

    try:
        with sdk, ThreadPoolExecutor(1) as pool:
            text = pool.submit(ask)
            assert retried.wait(30), "the SDK never retried"
            threading.Event().wait(0.5)  # the retry reaches the service and waits there
            gate.set()
            answer = text.result(timeout=60)
    finally:
        gate.set()
    assert len(claude_upstream.requests) == 1
    assert stored(client, "sdk") == [("user", "Slow question"), ("assistant", answer)]


# -- errors, in Anthropic's shape -----------------------------------------------------------------


def test_another_projects_session_is_out_of_reach(
    service: Service,
    claude: anthropic.Anthropic,
    client: httpx.Client,
    claude_upstream: AnthropicUpstream,
) -> None:
    claude.messages.create(
        model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "secret plan"}],
        extra_headers=remembering("private"),
    )  # fmt: skip
    before = stored(client, "private")
    with claude_for(service, "b") as beta:
        beta.messages.create(
            model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "The plan?"}],
            extra_headers=remembering("private"),
        )  # fmt: skip
        sent = json.dumps(claude_upstream.requests[-1]["messages"])
        assert "secret plan" not in sent  # beta got a session "private" of its own
        with pytest.raises(anthropic.PermissionDeniedError) as caught:
            beta.messages.create(
                model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "The plan?"}],
                extra_headers=remembering("private"), extra_query={"project": "alpha"},
            )  # fmt: skip
    assert caught.value.body["error"]["type"] == "permission_error"  # type: ignore[index]
    assert stored(client, "private") == before
    assert len(claude_upstream.requests) == 2


def test_a_missing_or_wrong_key_is_an_authentication_error(service: Service) -> None:
    bad = anthropic.Anthropic(base_url=service.url, api_key="tk_nope_nope", max_retries=0)
    with bad, pytest.raises(anthropic.AuthenticationError) as caught:
        bad.messages.create(model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "x"}])
    body: Any = caught.value.body
    assert set(body) == {"type", "error", "request_id"} and body["type"] == "error"
    assert body["error"]["type"] == "authentication_error"
    assert "key" in body["error"]["message"]
    response = httpx.post(f"{service.url}/v1/messages", json={}, verify=TLS)
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "authentication_error"


def test_a_bearer_key_is_accepted_too(service: Service, claude_upstream: AnthropicUpstream) -> None:
    with anthropic.Anthropic(
        base_url=service.url, auth_token=service.keys["a"], api_key=None, max_retries=0
    ) as bearer:
        answer = bearer.messages.create(
            model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "Hi"}]
        )
    assert answer.content and len(claude_upstream.requests) == 1


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
         "messages[0].content[0].type"),
        ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools[0].type"),
        ({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Pre"}]},
         "messages[1]"),
        ({"messages": [{"role": "robot", "content": "Hi"}]}, "messages[0].role"),
        ({"system": [{"type": "document", "source": {}}]}, "system[0].type"),
        ({"messages": [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1",
             "content": [{"type": "image", "source": {}}]}]}]},
         "messages[0].content[0].content[0].type"),
        ({"thinking": {"type": "enabled", "budget_tokens": 1024},
          "tools": [{"name": "t", "input_schema": {"type": "object"}}]}, "thinking"),
        ({"messages": [{"role": "user", "content": "   "}]}, "messages[0].content"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"metadata": {"session_id": "bad key!"}}, "metadata.session_id"),
    ],
    ids=["image", "server tool", "prefill", "role", "system document", "image result",
         "thinking with tools", "blank", "max_tokens", "session key"],
)  # fmt: skip
def test_what_cannot_be_stored_is_a_400_naming_the_field_and_stores_nothing(
    claude: anthropic.Anthropic,
    client: httpx.Client,
    claude_upstream: AnthropicUpstream,
    change: dict[str, Any],
    field: str,
) -> None:
    body: Any = {"model": MODEL, "max_tokens": 50,
                 "messages": [{"role": "user", "content": "Hi"}]} | change  # fmt: skip
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(**body, extra_headers=remembering("refused"))
    error = caught.value.body["error"]  # type: ignore[index]
    assert error["type"] == "invalid_request_error" and field in error["message"]
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert client.get("/v1/sessions/refused").status_code == 404  # not even created
    assert claude_upstream.requests == []


def test_a_failing_upstream_keeps_the_turn_and_says_so_in_anthropics_shape(
    claude: anthropic.Anthropic, client: httpx.Client, claude_upstream: AnthropicUpstream
) -> None:
    claude_upstream.mode = "error"
    with pytest.raises(anthropic.InternalServerError) as caught:
        claude.messages.create(
            model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "Still there?"}],
            extra_headers=remembering("down"),
        )  # fmt: skip
    assert caught.value.status_code == 502
    assert caught.value.body["error"]["type"] == "api_error"  # type: ignore[index]
    assert "the model broke" in caught.value.body["error"]["message"]  # type: ignore[index]
    assert stored(client, "down") == [("user", "Still there?")]
    claude_upstream.mode = "ok"  # the same turn again: stored once, answered now
    claude.messages.create(
        model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "Still there?"}],
        extra_headers=remembering("down"),
    )  # fmt: skip
    assert [role for role, _ in stored(client, "down")] == ["user", "assistant"]


def test_an_upstream_refusal_tells_the_client_not_to_retry_it(
    service: Service, claude_upstream: AnthropicUpstream
) -> None:
    claude_upstream.mode = "refuse"  # a 400: the same request gets the same answer
    with (
        claude_for(service, max_retries=2) as retrying,
        pytest.raises(anthropic.InternalServerError) as caught,
    ):
        retrying.messages.create(
            model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "Too long?"}],
            extra_headers=remembering("refused-upstream"),
        )  # fmt: skip
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert "max_tokens" in caught.value.body["error"]["message"]  # type: ignore[index]
    assert len(claude_upstream.requests) == 1  # the SDK did not send it again


def test_a_stream_broken_off_ends_with_an_error_event_and_stores_no_reply(
    claude: anthropic.Anthropic, client: httpx.Client, claude_upstream: AnthropicUpstream
) -> None:
    claude_upstream.mode = "break"
    broken = claude.messages.stream(
        model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "One two three"}],
        extra_headers=remembering("broken"),
    )  # fmt: skip
    with pytest.raises(anthropic.APIStatusError) as caught, broken as stream:
        "".join(stream.text_stream)
    assert caught.value.body["error"] == {  # type: ignore[index]
        "type": "api_error",
        "message": "the model endpoint could not be reached or failed mid-answer",
    }
    assert stored(client, "broken") == [("user", "One two three")]


def test_a_timed_out_upstream_is_a_timeout_error(
    tmp_path: Path,
    upstream_server: tuple[Upstream, str],
    anthropic_server: tuple[AnthropicUpstream, str],
    claude_upstream: AnthropicUpstream,
) -> None:
    claude_upstream.mode, claude_upstream.delay = "slow", 3.0  # past llm_timeout (1 s)
    settings = anthropic_settings(tmp_path, upstream_server, anthropic_server, llm_timeout="1s")
    for running in start_service(settings):
        response = httpx.post(
            f"{running.url}/v1/messages", verify=TLS, timeout=30,
            headers={"x-api-key": running.keys["a"], **remembering("slow")},
            json={"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "Hm"}]},
        )  # fmt: skip
        assert response.status_code == 504
        assert response.json()["error"]["type"] == "timeout_error"
        with running.client("a") as client:
            assert stored(client, "slow") == [("user", "Hm")]


def test_without_a_session_the_request_passes_through_and_nothing_is_stored(
    service: Service,
    claude: anthropic.Anthropic,
    client: httpx.Client,
    claude_upstream: AnthropicUpstream,
) -> None:
    messages: Any = [{"role": "user", "content": [{"type": "image", "source": {"type": "url",
                     "url": "https://example.invalid/cat.png"}}, {"type": "text", "text": "Cat?"}]}]  # fmt: skip
    claude.messages.create(model=MODEL, max_tokens=5, messages=messages, stop_sequences=["END"])
    assert claude_upstream.requests == [
        {
            "model": MODEL,
            "max_tokens": 5,
            "messages": messages,
            "stop_sequences": ["END"],
            "stream": False,
        }
    ]
    assert client.get("/v1/sessions").json()["items"] == []


def test_a_body_over_the_limit_is_an_anthropic_413(service: Service) -> None:
    huge = {"model": MODEL, "max_tokens": 5,
            "messages": [{"role": "user", "content": "x" * 2_000_000}]}  # fmt: skip
    response = httpx.post(
        f"{service.url}/v1/messages", json=huge, verify=TLS, timeout=30,
        headers={"x-api-key": service.keys["a"], **remembering("huge")},
    )  # fmt: skip
    assert response.status_code == 413
    assert response.json()["type"] == "error"
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_without_an_anthropic_upstream_the_error_names_the_setting(
    tmp_path: Path, upstream_server: tuple[Upstream, str]
) -> None:
    for running in start_service(service_settings(tmp_path, upstream_server[1])):
        with (
            claude_for(running, max_retries=2) as claude,
            pytest.raises(anthropic.APIStatusError) as caught,
        ):
            claude.messages.create(
                    model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "x"}],
                    extra_headers=remembering("nowhere"),
                )  # fmt: skip
        assert caught.value.status_code == 501
        assert "ANTHROPIC_API_KEY" in caught.value.body["error"]["message"]  # type: ignore[index]
        assert caught.value.response.headers["x-should-retry"] == "false"
