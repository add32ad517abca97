"""OpenAI's Responses API driven by the official `openai` client against the service on
loopback with API keys on, on SQLite and PostgreSQL, answered by the recording upstream over
chat completions: memory through `conversation`, `previous_response_id` and the session header,
instructions, function tools both ways, retrieval, `store: false`, retries, refusals, streaming;
and the openai-agents SDK, unchanged, with its default model (the Responses model, through an
`OpenAIProvider` whose client points at the service) remembering across runs through an
`OpenAIConversationsSession`, a `conversation_id` or a `previous_response_id`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from agents import (
    Agent,
    OpenAIConversationsSession,
    OpenAIProvider,
    RunConfig,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from tests.conftest import run_async

from .conftest import Service, service_settings, start_service
from .upstream import Upstream

MODEL = "test-model"
WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    "strict": False,
}


@pytest.fixture(params=["sqlite", "postgres"])
def service(
    request: pytest.FixtureRequest, tmp_path: Path, upstream_server: tuple[Upstream, str]
) -> Iterator[Service]:
    """The service on each backend, never retrying the upstream itself (so an upstream failure
    reaches the client, and the client's own retries are what is tested)."""
    overrides: dict[str, Any] = {"llm_max_retries": 0}
    if request.param == "postgres":
        overrides["database_url"] = request.getfixturevalue("postgres_url")
    yield from start_service(service_settings(tmp_path, upstream_server[1], **overrides))


@pytest.fixture(autouse=True)
def no_tool_calls_left(upstream: Upstream) -> Iterator[None]:
    yield
    upstream.next_tool_calls = None


def sent(upstream: Upstream, index: int = -1) -> list[tuple[str, str]]:
    """(role, content) of each message the upstream was sent in request `index`."""
    return [(m["role"], m.get("content") or "") for m in upstream.requests[index]["messages"]]


def stored(client: httpx.Client, session: str) -> list[tuple[str, str]]:
    items = client.get(f"/v1/sessions/{session}/messages").json()["items"]
    return [(m["role"], m["content"]) for m in items]


def test_two_turns_remember_through_a_conversation(
    llm: openai.OpenAI, client: httpx.Client, upstream: Upstream
) -> None:
    conversation = llm.conversations.create()
    first = llm.responses.create(model=MODEL, input="My name is Ada.", conversation=conversation.id)
    second = llm.responses.create(
        model=MODEL, input="What is my name?", conversation={"id": conversation.id}
    )
    assert first.output_text == "reply 1 to: My name is Ada."
    assert sent(upstream) == [
        ("user", "My name is Ada."), ("assistant", first.output_text),
        ("user", "What is my name?"),
    ]  # fmt: skip
    assert second.conversation is not None and second.conversation.id == conversation.id
    assert stored(client, conversation.id) == [
        ("user", "My name is Ada."), ("assistant", first.output_text),
        ("user", "What is my name?"), ("assistant", second.output_text),
    ]  # fmt: skip
    # the output items are the conversation's items, under the same ids
    items = llm.conversations.items.list(conversation.id, order="asc").data
    assert items[1].id == first.output[0].id and items[3].id == second.output[0].id
    assert (second.status, second.model, second.object) == ("completed", MODEL, "response")
    assert second.usage is not None and second.usage.total_tokens > 0


def test_two_turns_remember_through_the_previous_response(
    llm: openai.OpenAI, client: httpx.Client, upstream: Upstream
) -> None:
    first = llm.responses.create(model=MODEL, input="My name is Ada.", instructions="Be brief.")
    second = llm.responses.create(
        model=MODEL, input="What is my name?", previous_response_id=first.id
    )
    assert sent(upstream, 0) == [("system", "Be brief."), ("user", "My name is Ada.")]
    # instructions hold for their response only, and are never stored
    assert sent(upstream) == [
        ("user", "My name is Ada."), ("assistant", first.output_text),
        ("user", "What is my name?"),
    ]  # fmt: skip
    assert first.conversation is not None and second.conversation is not None
    assert second.conversation.id == first.conversation.id
    assert second.previous_response_id == first.id
    assert [role for role, _ in stored(client, first.conversation.id)] == [
        "user", "assistant", "user", "assistant",
    ]  # fmt: skip
    # the first reply's trace shows the instructions as sent
    trace = client.get(f"/v1/sessions/{first.conversation.id}/messages/2/trace").json()
    first_entry = trace["window"][0]
    assert (first_entry["kind"], first_entry["content"]) == (
        "instructions", "Be brief.",
    )  # fmt: skip


def test_two_turns_remember_through_the_session_header(
    llm: openai.OpenAI, client: httpx.Client, upstream: Upstream
) -> None:
    header = {"X-Turnkeeper-Session": "support-7"}
    first = llm.responses.create(model=MODEL, input="My name is Ada.", extra_headers=header)
    llm.responses.create(model=MODEL, input="What is my name?", extra_headers=header)
    assert sent(upstream)[:2] == [("user", "My name is Ada."), ("assistant", first.output_text)]
    assert [role for role, _ in stored(client, "support-7")] == [
        "user", "assistant", "user", "assistant",
    ]  # fmt: skip


def test_a_response_without_memory_is_a_session_of_its_own(
    llm: openai.OpenAI, client: httpx.Client, upstream: Upstream
) -> None:
    first = llm.responses.create(model=MODEL, input="Hello.")
    again = llm.responses.create(model=MODEL, input="Hello.")  # the same, and no retry
    assert first.conversation is not None and again.conversation is not None
    assert first.conversation.id != again.conversation.id
    assert sent(upstream) == [("user", "Hello.")]  # nothing of the first reached the second
    assert llm.responses.retrieve(first.id).output_text == first.output_text


def test_a_stored_response_is_retrieved_by_its_id(llm: openai.OpenAI) -> None:
    made = llm.responses.create(model=MODEL, input="Four days in Lisbon.")
    got = llm.responses.retrieve(made.id)
    assert (got.id, got.output_text, got.status) == (made.id, made.output_text, "completed")
    assert [item.id for item in got.output] == [item.id for item in made.output]
    assert got.usage == made.usage and got.model == MODEL and got.created_at == made.created_at
    for missing in ("resp_nothing", made.id.rsplit("_", 1)[0] + "_99", "anything"):
        with pytest.raises(openai.NotFoundError) as caught:
            llm.responses.retrieve(missing)
        assert repr(missing) in caught.value.message


def test_function_tools_and_calls_translate_both_ways(
    llm: openai.OpenAI, upstream: Upstream
) -> None:
    upstream.next_tool_calls = [{"name": "get_weather", "arguments": '{"city": "Oslo"}'}]
    asked = llm.responses.create(
        model=MODEL, input="Weather in Oslo?", tools=[WEATHER_TOOL], tool_choice="auto"
    )
    assert upstream.requests[0]["tools"] == [
        {"type": "function", "function": {
            "name": "get_weather", "description": "The weather in a city.",
            "parameters": WEATHER_TOOL["parameters"], "strict": False}},
    ]  # fmt: skip
    assert upstream.requests[0]["tool_choice"] == "auto"
    (call,) = asked.output
    assert call.type == "function_call"
    assert (call.name, call.arguments, call.call_id) == (
        "get_weather",
        '{"city": "Oslo"}',
        "call_1_0",
    )
    answered = llm.responses.create(
        model=MODEL,
        previous_response_id=asked.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "-3 °C"}],
        tools=[WEATHER_TOOL],
    )
    messages = upstream.requests[1]["messages"]
    assert messages[1]["tool_calls"][0]["function"] == {
        "name": "get_weather", "arguments": '{"city": "Oslo"}',
    }  # fmt: skip
    assert (messages[2]["role"], messages[2]["tool_call_id"], messages[2]["content"]) == (
        "tool", "call_1_0", "-3 °C",
    )  # fmt: skip
    assert answered.output_text == "reply 2 to: -3 °C"


def test_options_translate_to_chat_completion_fields(
    llm: openai.OpenAI, upstream: Upstream
) -> None:
    llm.responses.create(
        model=MODEL, input="Hi.", temperature=0.5, top_p=0.9, max_output_tokens=64,
        text={"format": {"type": "json_schema", "name": "answer", "strict": True,
                         "schema": {"type": "object"}}, "verbosity": "low"},
        reasoning={"effort": "low"}, tool_choice={"type": "function", "name": "get_weather"},
        tools=[WEATHER_TOOL], parallel_tool_calls=False, metadata={"ticket": "42"}, user="u-1",
        include=[], truncation="auto",
    )  # fmt: skip
    body = upstream.requests[0]
    assert {key: body[key] for key in body if key not in ("messages", "tools")} == {
        "model": MODEL, "temperature": 0.5, "top_p": 0.9, "max_tokens": 64, "user": "u-1",
        "response_format": {"type": "json_schema", "json_schema": {
            "name": "answer", "schema": {"type": "object"}, "strict": True}},
        "verbosity": "low", "reasoning_effort": "low", "parallel_tool_calls": False,
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "stream": False,
        # the session the turn is stored in routes it to the provider's prompt cache
        # (tests/server/test_prompt_cache.py)
        "prompt_cache_key": body["prompt_cache_key"],
    }  # fmt: skip


def test_store_false_stores_nothing(
    llm: openai.OpenAI, client: httpx.Client, upstream: Upstream
) -> None:
    conversation = llm.conversations.create(items=[{"role": "user", "content": "I am Ada."}])
    answer = llm.responses.create(
        model=MODEL, input="Who am I?", conversation=conversation.id, store=False,
        instructions="Be brief.",
    )  # fmt: skip
    assert sent(upstream) == [("system", "Be brief."), ("user", "I am Ada."), ("user", "Who am I?")]
    assert answer.output_text == "reply 1 to: Who am I?" and answer.store is False
    lone = llm.responses.create(model=MODEL, input="Hello.", store=False)
    assert lone.output_text == "reply 2 to: Hello." and lone.conversation is None
    assert stored(client, conversation.id) == [("user", "I am Ada.")]
    assert [s["id"] for s in client.get("/v1/sessions").json()["items"]] == [conversation.id]
    with pytest.raises(openai.NotFoundError):
        llm.responses.retrieve(answer.id)


@pytest.mark.parametrize("memory", ["conversation", "previous", "header", "none"])
def test_the_sdks_own_retries_store_each_turn_once(
    service: Service, client: httpx.Client, upstream: Upstream, memory: str
) -> None:
    with openai.OpenAI(
        base_url=f"{service.url}/v1", api_key=service.keys["a"], max_retries=2, timeout=10
    ) as llm:
        first = llm.responses.create(model=MODEL, input="My name is Ada.")
        assert first.conversation is not None
        session = first.conversation.id
        where: dict[str, Any] = {
            "conversation": {"conversation": session},
            "previous": {"previous_response_id": first.id},
            "header": {"extra_headers": {"X-Turnkeeper-Session": session}},
            "none": {},
        }[memory]
        upstream.failures = 2
        again = llm.responses.create(model=MODEL, input="What is my name?", **where)
        assert llm.responses.retrieve(again.id).output_text == again.output_text
    assert len(upstream.requests) == 4  # one, then two failures and an answer
    assert again.conversation is not None
    turns = stored(client, again.conversation.id)
    assert turns[-2:] == [("user", "What is my name?"), ("assistant", again.output_text)]
    assert len(turns) == (2 if memory == "none" else 4)


def test_an_idempotency_key_makes_a_response_happen_once(
    llm: openai.OpenAI, client: httpx.Client, upstream: Upstream
) -> None:
    key = {"Idempotency-Key": "order-7"}
    one = llm.responses.create(model=MODEL, input="Book it.", extra_headers=key)
    two = llm.responses.create(model=MODEL, input="Book it.", extra_headers=key)
    assert (two.id, two.output_text) == (one.id, one.output_text)
    assert len(upstream.requests) == 1
    assert one.conversation is not None
    assert stored(client, one.conversation.id) == [
        ("user", "Book it."),
        ("assistant", one.output_text),
    ]


BAD_REQUESTS: list[tuple[dict[str, Any], str]] = [
    ({"tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"tools": [{**WEATHER_TOOL, "defer_loading": True}]}, "tools[0].defer_loading"),
    ({"tool_choice": {"type": "web_search"}}, "tool_choice"),
    ({"input": [{"role": "user", "content": [
        {"type": "input_text", "text": "What is this?"},
        {"type": "input_image", "image_url": "https://example.com/a.png"}]}]},
     "input[0].content[1].type"),
    ({"input": [{"type": "reasoning", "summary": []}]}, "input[0].type"),
    ({"input": [{"role": "wizard", "content": "x"}]}, "input[0].role"),
    ({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]}, "input[0].call_id"),
    ({"input": "   "}, "input"),
    ({"input": []}, "input"),
    ({"background": True}, "background"),
    ({"prompt": {"id": "pmpt_1"}}, "prompt"),
    ({"reasoning": {"effort": "low", "summary": "auto"}}, "reasoning.summary"),
    ({"text": {"format": {"type": "grammar"}}}, "text.format.type"),
    ({"conversation": "conv_x", "previous_response_id": "resp_x_1"}, "previous_response_id"),
    ({"temperature": 9}, "temperature"),
    ({"modalities": ["audio"]}, "modalities"),
]  # fmt: skip


def test_what_cannot_be_translated_is_a_400_naming_the_field_and_stores_nothing(
    service: Service, client: httpx.Client, upstream: Upstream
) -> None:
    conversation = client.post("/v1/conversations", json={"items": [
        {"role": "user", "content": "kept"}]}).json()  # fmt: skip
    for extra, field in BAD_REQUESTS:
        for memory in ({}, {"conversation": conversation["id"]}):
            body = {"model": MODEL, "input": "Hi.", **memory, **extra}
            answer = client.post("/v1/responses", json=body)
            assert answer.status_code == 400, (field, answer.text)
            error = answer.json()["error"]
            assert (error["param"], error["type"]) == (field, "invalid_request_error"), error
            assert error["message"]
    assert upstream.requests == []
    assert stored(client, conversation["id"]) == [("user", "kept")]
    assert [s["id"] for s in client.get("/v1/sessions").json()["items"]] == [conversation["id"]]


def test_an_unknown_conversation_or_response_is_a_404_naming_it(
    llm: openai.OpenAI, upstream: Upstream
) -> None:
    for memory, name in (
        ({"conversation": "conv_missing"}, "conv_missing"),
        ({"previous_response_id": "resp_missing_1"}, "resp_missing_1"),
    ):
        with pytest.raises(openai.NotFoundError) as caught:
            llm.responses.create(model=MODEL, input="Hi.", **memory)  # type: ignore[arg-type]
        assert repr(name) in caught.value.message
    assert upstream.requests == []


def test_another_projects_conversation_and_responses_are_404s(
    service: Service, llm: openai.OpenAI, client: httpx.Client, upstream: Upstream
) -> None:
    mine = llm.responses.create(model=MODEL, input="My secret is 42.")
    assert mine.conversation is not None
    with openai.OpenAI(
        base_url=f"{service.url}/v1", api_key=service.keys["b"], max_retries=0
    ) as other:
        for call in (
            lambda: other.responses.retrieve(mine.id),
            lambda: other.responses.create(model=MODEL, input="And?", previous_response_id=mine.id),
            lambda: other.responses.create(
                model=MODEL,
                input="And?",
                conversation=mine.conversation.id,  # type: ignore[union-attr]
            ),
        ):
            with pytest.raises(openai.NotFoundError):
                call()
    assert len(upstream.requests) == 1
    assert stored(client, mine.conversation.id) == [
        ("user", "My secret is 42."), ("assistant", mine.output_text),
    ]  # fmt: skip


def test_the_openapi_schema_describes_the_response_routes(client: httpx.Client) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert set(paths["/v1/responses"]) == {"post"}
    assert set(paths["/v1/responses/{response_id}"]) == {"get"}
    created = paths["/v1/responses"]["post"]
    assert {"application/json", "text/event-stream"} <= set(created["responses"]["200"]["content"])
    assert (
        "400" in created["responses"]
        and "404" in paths["/v1/responses/{response_id}"]["get"]["responses"]
    )


# -- streaming --------------------------------------------------------------------------------

TEXT_EVENTS = [
    "response.created", "response.in_progress", "response.output_item.added",
    "response.content_part.added", "response.output_text.delta",
]  # fmt: skip
TEXT_END = [
    "response.output_text.done", "response.content_part.done", "response.output_item.done",
    "response.completed",
]  # fmt: skip


def test_a_streamed_response_sends_the_events_the_sdk_expects(
    llm: openai.OpenAI, client: httpx.Client, upstream: Upstream
) -> None:
    conversation = llm.conversations.create(items=[{"role": "user", "content": "I am Ada."}])
    events = list(
        llm.responses.create(
            model=MODEL, input="Say hello to me.", conversation=conversation.id, stream=True
        )
    )
    kinds = [event.type for event in events]
    deltas = kinds.count("response.output_text.delta")
    assert (
        deltas > 1
        and kinds == TEXT_EVENTS + ["response.output_text.delta"] * (deltas - 1) + TEXT_END
    )
    assert [event.sequence_number for event in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")  # type: ignore[union-attr]
    final = events[-1].response  # type: ignore[union-attr]
    assert text == final.output_text == "reply 1 to: Say hello to me."
    assert events[0].response.id == final.id and events[0].response.status == "in_progress"  # type: ignore[union-attr]
    item_ids = {getattr(e, "item_id", None) for e in events} - {None}
    assert item_ids == {final.output[0].id}
    assert (
        final.usage is not None and final.usage.output_tokens > 0
    )  # the usage chunk was asked for
    assert llm.responses.retrieve(final.id).output_text == text
    assert stored(client, conversation.id) == [
        ("user", "I am Ada."), ("user", "Say hello to me."), ("assistant", text),
    ]  # fmt: skip


def test_the_sdks_stream_helper_assembles_the_final_response(llm: openai.OpenAI) -> None:
    with llm.responses.stream(model=MODEL, input="Four days in Lisbon.") as stream:
        for _ in stream:
            pass
        final = stream.get_final_response()
    assert final.output_text == "reply 1 to: Four days in Lisbon."
    assert llm.responses.retrieve(final.id).output_text == final.output_text


def test_a_streamed_function_call_sends_its_arguments_and_is_stored(
    llm: openai.OpenAI, client: httpx.Client, upstream: Upstream
) -> None:
    upstream.next_tool_calls = [
        {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
        {"name": "get_weather", "arguments": '{"city": "Bergen"}'},
    ]
    events = list(
        llm.responses.create(model=MODEL, input="Weather?", tools=[WEATHER_TOOL], stream=True)
    )
    kinds = [event.type for event in events]
    assert kinds.count("response.output_item.added") == 2
    assert kinds.count("response.function_call_arguments.delta") == 4
    done = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert [e.arguments for e in done] == ['{"city": "Oslo"}', '{"city": "Bergen"}']  # type: ignore[union-attr]
    final = events[-1].response  # type: ignore[union-attr]
    assert [(item.type, item.arguments) for item in final.output] == [  # type: ignore[union-attr]
        ("function_call", '{"city": "Oslo"}'), ("function_call", '{"city": "Bergen"}'),
    ]  # fmt: skip
    added = [e.item.id for e in events if e.type == "response.output_item.added"]  # type: ignore[union-attr]
    assert added == [item.id for item in final.output]
    assert final.conversation is not None
    (reply,) = client.get(f"/v1/sessions/{final.conversation.id}/messages").json()["items"][1:]
    assert [call["id"] for call in reply["tool_calls"]] == ["call_1_0", "call_1_1"]


def test_a_stream_broken_off_by_the_model_ends_with_response_failed_and_stores_no_reply(
    llm: openai.OpenAI, client: httpx.Client, upstream: Upstream
) -> None:
    upstream.mode = "break"
    events = list(llm.responses.create(model=MODEL, input="Tell me a long story.", stream=True))
    assert events[-1].type == "response.failed"
    failed = events[-1].response  # type: ignore[union-attr]
    assert failed.status == "failed" and failed.error is not None and failed.error.message
    assert failed.conversation is not None
    assert stored(client, failed.conversation.id) == [("user", "Tell me a long story.")]
    with pytest.raises(openai.NotFoundError):
        llm.responses.retrieve(failed.id)


def test_a_streamed_retry_of_an_answered_response_streams_the_stored_one(
    llm: openai.OpenAI, client: httpx.Client, upstream: Upstream
) -> None:
    key = {"Idempotency-Key": "story-1"}

    def streamed() -> Any:
        events = list(
            llm.responses.create(model=MODEL, input="A story.", stream=True, extra_headers=key)
        )
        return events[-1].response  # type: ignore[union-attr]

    first, again = streamed(), streamed()
    assert len(upstream.requests) == 1
    assert (again.id, again.output_text) == (first.id, first.output_text)
    assert [item.id for item in again.output] == [item.id for item in first.output]
    assert stored(client, first.conversation.id) == [
        ("user", "A story."),
        ("assistant", first.output_text),
    ]


def test_a_streamed_response_that_stores_nothing(
    llm: openai.OpenAI, client: httpx.Client, upstream: Upstream
) -> None:
    events = list(llm.responses.create(model=MODEL, input="Hi.", store=False, stream=True))
    final = events[-1].response  # type: ignore[union-attr]
    assert events[-1].type == "response.completed" and final.output_text == "reply 1 to: Hi."
    assert {getattr(e, "item_id", final.output[0].id) for e in events} == {final.output[0].id}
    assert client.get("/v1/sessions").json()["items"] == []


@pytest.mark.parametrize("memory", ["conversation", "none"])
def test_the_sdks_own_retries_of_a_stream_store_the_turn_once(
    service: Service, client: httpx.Client, upstream: Upstream, memory: str
) -> None:
    conversation = client.post("/v1/conversations", json={}).json()["id"]
    where: dict[str, Any] = {"conversation": conversation} if memory == "conversation" else {}
    upstream.failures = 2
    with openai.OpenAI(
        base_url=f"{service.url}/v1", api_key=service.keys["a"], max_retries=2, timeout=10
    ) as llm:
        events = list(llm.responses.create(model=MODEL, input="Hello.", stream=True, **where))
    final = events[-1].response  # type: ignore[union-attr]
    assert len(upstream.requests) == 3
    assert stored(client, final.conversation.id) == [
        ("user", "Hello."),
        ("assistant", final.output_text),
    ]


# -- the openai-agents SDK, unchanged -----------------------------------------------------------


@pytest.fixture(autouse=True)
def no_tracing_export() -> None:
    """The SDK would send its traces to OpenAI: nothing leaves the machine here."""
    set_tracing_disabled(True)


def client_for(service: Service) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{service.url}/v1", api_key=service.keys["a"], max_retries=0)


def config(client: AsyncOpenAI) -> RunConfig:
    """The SDK's default model provider (Responses model), on turnkeeper."""
    return RunConfig(model_provider=OpenAIProvider(openai_client=client, use_responses=True))


AGENT = Agent(name="Assistant", instructions="Be brief.")  # the default model: no `model`


def test_runner_with_a_conversations_session_remembers_across_runs(
    service: Service, upstream: Upstream
) -> None:
    async def scenario() -> tuple[Any, Any, list[Any]]:
        client = client_for(service)
        session = OpenAIConversationsSession(openai_client=client)
        first = await Runner.run(
            AGENT, "My name is Ada.", session=session, run_config=config(client)
        )
        second = await Runner.run(
            AGENT, "What is my name?", session=session, run_config=config(client)
        )
        items = await session.get_items()
        await client.close()
        return first, second, items

    first, second, items = run_async(scenario())
    assert first.final_output == "reply 1 to: My name is Ada."
    assert sent(upstream) == [
        ("system", "Be brief."), ("user", "My name is Ada."), ("assistant", first.final_output),
        ("user", "What is my name?"),
    ]  # fmt: skip
    assert second.final_output == "reply 2 to: What is my name?"
    assert [(item["role"], item["content"][0]["text"]) for item in items] == [
        ("user", "My name is Ada."), ("assistant", first.final_output),
        ("user", "What is my name?"), ("assistant", second.final_output),
    ]  # fmt: skip
    # the SDK's default model settings reach the upstream as chat-completion fields
    assert upstream.requests[0]["reasoning_effort"] == "none"
    assert upstream.requests[0]["verbosity"] == "low"


def test_runner_remembers_through_a_conversation_id(
    service: Service, client: httpx.Client, upstream: Upstream
) -> None:
    conversation = client.post("/v1/conversations", json={}).json()["id"]

    async def scenario() -> Any:
        openai_client = client_for(service)
        run = config(openai_client)
        await Runner.run(AGENT, "My name is Ada.", conversation_id=conversation, run_config=run)
        second = await Runner.run(
            AGENT, "What is my name?", conversation_id=conversation, run_config=run
        )
        await openai_client.close()
        return second

    second = run_async(scenario())
    assert [text for _, text in sent(upstream)] == [
        "Be brief.", "My name is Ada.", "reply 1 to: My name is Ada.", "What is my name?",
    ]  # fmt: skip
    stored = client.get(f"/v1/sessions/{conversation}/messages").json()["items"]
    assert [m["content"] for m in stored] == [
        "My name is Ada.", "reply 1 to: My name is Ada.", "What is my name?", second.final_output,
    ]  # fmt: skip


def test_runner_remembers_through_the_previous_response_and_calls_tools(
    service: Service, upstream: Upstream
) -> None:
    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"-3 °C in {city}"

    agent = Agent(name="Forecaster", instructions="Use the tool.", tools=[get_weather])

    async def scenario() -> tuple[Any, Any]:
        openai_client = client_for(service)
        run = config(openai_client)
        upstream.next_tool_calls = [{"name": "get_weather", "arguments": '{"city": "Oslo"}'}]
        first = await Runner.run(agent, "Weather in Oslo?", run_config=run)
        second = await Runner.run(
            agent, "Thanks!", previous_response_id=first.last_response_id, run_config=run
        )
        await openai_client.close()
        return first, second

    first, second = run_async(scenario())
    assert first.final_output == "reply 2 to: -3 °C in Oslo"  # the tool ran, its output was sent
    assert upstream.requests[0]["tools"][0]["function"]["name"] == "get_weather"
    assert [role for role, _ in sent(upstream)] == [
        "system", "user", "assistant", "tool", "assistant", "user",
    ]  # fmt: skip
    assert second.final_output == "reply 3 to: Thanks!"


def test_a_streamed_run_with_a_conversations_session_remembers(
    service: Service, upstream: Upstream
) -> None:
    async def scenario() -> tuple[str, list[str]]:
        client = client_for(service)
        session = OpenAIConversationsSession(openai_client=client)
        await Runner.run(AGENT, "My name is Ada.", session=session, run_config=config(client))
        streamed = Runner.run_streamed(
            AGENT, "What is my name?", session=session, run_config=config(client)
        )
        kinds = [event.type async for event in streamed.stream_events()]
        await client.close()
        return str(streamed.final_output), kinds

    final, kinds = run_async(scenario())
    assert final == "reply 2 to: What is my name?"
    assert "raw_response_event" in kinds
    assert ("user", "My name is Ada.") in sent(upstream)


def test_runner_with_a_conversations_session_calls_several_tools_in_one_turn(
    service: Service, client: httpx.Client, upstream: Upstream
) -> None:
    """The output of a response with several calls names the later ones `<id>#<n>`; the SDK
    stores those items in the conversation and sends them back as input: both take them."""

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"-3 °C in {city}"

    agent = Agent(name="Forecaster", instructions="Use the tool.", tools=[get_weather])

    async def scenario() -> tuple[Any, list[Any]]:
        openai_client = client_for(service)
        session = OpenAIConversationsSession(openai_client=openai_client)
        upstream.next_tool_calls = [
            {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
            {"name": "get_weather", "arguments": '{"city": "Bergen"}'},
        ]
        result = await Runner.run(
            agent, "Oslo and Bergen?", session=session, run_config=config(openai_client)
        )
        items = await session.get_items()
        await openai_client.close()
        return result, items

    result, items = run_async(scenario())
    assert result.final_output.startswith("reply 2 to: ")
    assert [item["type"] for item in items] == [
        "message", "function_call", "function_call", "function_call_output",
        "function_call_output", "message",
    ]  # fmt: skip
    assert [item["call_id"] for item in items[1:3]] == ["call_1_0", "call_1_1"]
    assert len({item["id"] for item in items}) == len(items)
    assert ("tool", "-3 °C in Bergen") in sent(upstream)
