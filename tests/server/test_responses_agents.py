"""The openai-agents SDK, unchanged, against turnkeeper: `Runner.run` with the SDK's default
model (its Responses model, through an `OpenAIProvider` whose client points at the service)
remembers across runs through an `OpenAIConversationsSession`, a `conversation_id` or a
`previous_response_id`, calls function tools, and streams; on SQLite and PostgreSQL, against the
recording upstream."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
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


@pytest.fixture(params=["sqlite", "postgres"])
def service(
    request: pytest.FixtureRequest, tmp_path: Path, upstream_server: tuple[Upstream, str]
) -> Iterator[Service]:
    overrides: dict[str, Any] = {}
    if request.param == "postgres":
        overrides["database_url"] = request.getfixturevalue("postgres_url")
    yield from start_service(service_settings(tmp_path, upstream_server[1], **overrides))


@pytest.fixture(autouse=True)
def no_tracing_export(upstream: Upstream) -> Iterator[None]:
    """The SDK would send its traces to OpenAI: nothing leaves the machine here."""
    set_tracing_disabled(True)
    yield
    upstream.next_tool_calls = None


def contents(upstream: Upstream, index: int = -1) -> list[tuple[str, str]]:
    return [(m["role"], m.get("content") or "") for m in upstream.requests[index]["messages"]]


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
    assert contents(upstream) == [
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
    assert [text for _, text in contents(upstream)] == [
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
    assert [role for role, _ in contents(upstream)] == [
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
    assert ("user", "My name is Ada.") in contents(upstream)
