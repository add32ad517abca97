"""`TurnkeeperSession` is an OpenAI Agents SDK `Session`: items come back exactly, it answers
every call as the SDK's own `SQLiteSession` does, and `Runner.run` keeps memory across runs."""

from __future__ import annotations

import copy
import importlib
import json
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, OpenAIChatCompletionsModel, Runner, SQLiteSession, set_tracing_disabled
from agents.memory import Session, SessionSettings
from openai import AsyncOpenAI
from prometheus_client import REGISTRY

import turnkeeper
from tests.conftest import Clock, run_async
from tests.server.live import LiveServer
from tests.server.upstream import Upstream, make_app
from turnkeeper.adapters import MissingExtra, TurnkeeperSession
from turnkeeper.errors import InvalidInput
from turnkeeper.service import Turnkeeper
from turnkeeper.service.aio import AsyncTurnkeeper, Workers
from turnkeeper.types import Role

ITEMS: list[Any] = [
    {"role": "system", "content": "Be brief."},
    {"role": "developer", "content": "Prefer metric units."},
    {"role": "user", "content": "Größe von 🚀?"},
    {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "What is in this picture?"},
            {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "auto"},
        ],
    },
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Need the weather tool."}],
        "encrypted_content": "gAAAA…",
    },
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city": "Oslo"}',
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "call_1", "output": '{"temp_c": -3}'},
    {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": "Oslo weather"},
    },
    {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "It is -3 °C in Oslo.", "annotations": []}],
    },
    {"type": "item_reference", "id": "msg_0"},
]


def run(coroutine: Any) -> Any:
    return run_async(coroutine)


def test_every_item_type_comes_back_exactly(tk: Turnkeeper) -> None:
    session = TurnkeeperSession("agent-1", tk)
    run(session.add_items(copy.deepcopy(ITEMS)))
    items = run(session.get_items())
    assert [json.dumps(item) for item in items] == [json.dumps(item) for item in ITEMS]


def test_the_audit_trail_reads_as_a_conversation(tk: Turnkeeper) -> None:
    run(TurnkeeperSession("agent-1", tk).add_items(copy.deepcopy(ITEMS)))
    history = tk.history("agent-1")
    assert [(m.role, m.internal) for m in history] == [
        (Role.SYSTEM, False), (Role.SYSTEM, False), (Role.USER, False), (Role.USER, False),
        (Role.ASSISTANT, True), (Role.ASSISTANT, False), (Role.TOOL, False),
        (Role.ASSISTANT, True), (Role.ASSISTANT, False), (Role.ASSISTANT, True),
    ]  # fmt: skip
    assert history[3].content == "What is in this picture?\n[input_image]"
    assert history[4].content == "[Need the weather tool.]"
    assert history[5].tool_calls == (
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}},
    )  # fmt: skip
    assert (history[6].tool_call_id, history[6].content) == ("call_1", '{"temp_c": -3}')
    assert history[8].content == "It is -3 °C in Oslo."


def test_a_large_add_comes_back_exactly_counted_and_searchable(tk: Turnkeeper) -> None:
    items = [copy.deepcopy(ITEMS[n % len(ITEMS)]) for n in range(1_203)]
    session = TurnkeeperSession("bulk", tk)
    run(session.add_items(items))
    assert [json.dumps(item) for item in run(session.get_items())] == [
        json.dumps(item) for item in items
    ]
    history = tk.history("bulk")
    assert [m.seq for m in history] == list(range(1, 1_204))
    assert len({m.id for m in history}) == 1_203
    for message in history[: len(ITEMS)]:
        expected = tk.counter.count_message(
            message.role.value,
            message.content,
            tool_calls=message.tool_calls,
            tool_call_id=message.tool_call_id,
        )
        assert message.tokens == expected
    assert len(tk.search("Oslo", session="bulk", limit=100)) == 100


@pytest.mark.parametrize(
    ("bad", "field", "problem"),
    [
        ({"role": "user", "content": "nul \x00 here"}, "messages[700].content", "NUL"),
        ({"role": "user", "content": "a\ud800"}, "messages[700].content", "surrogate"),
        ({"role": "user", "content": "   "}, "messages[700].content", "empty"),
    ],
)
def test_an_invalid_item_in_a_large_add_stores_nothing_and_names_it(
    tk: Turnkeeper, bad: dict[str, Any], field: str, problem: str
) -> None:
    session = TurnkeeperSession("strict", tk)
    run(session.add_items([{"role": "user", "content": "kept"}]))
    items = [{"role": "user", "content": f"item {n}"} for n in range(1_000)]
    items[700] = bad
    with pytest.raises(InvalidInput) as raised:
        run(session.add_items(items))
    assert raised.value.field == field and problem in raised.value.problem
    assert [m.content for m in tk.history("strict")] == ["kept"]


async def _script(session: Session) -> list[Any]:
    """One sequence of calls covering every operation and edge; returns every result."""
    results: list[Any] = [await session.get_items(), await session.pop_item()]
    await session.add_items(copy.deepcopy(ITEMS[:4]))
    await session.add_items([])
    for limit in (None, 1, 3, 0, -1, 100):
        results.append(await session.get_items(limit))
    results.append(await session.pop_item())
    await session.add_items(copy.deepcopy(ITEMS[4:]))
    results.append(await session.get_items(2))
    for _ in range(3):
        results.append(await session.pop_item())
    results.append(await session.get_items())
    await session.clear_session()
    results += [await session.get_items(), await session.pop_item()]
    await session.add_items(copy.deepcopy(ITEMS[-2:]))
    results.append(await session.get_items())
    return [json.dumps(result) for result in results]


@pytest.mark.parametrize("face", ["sync", "async"])
def test_it_answers_every_call_as_the_sdks_sqlite_session_does(
    tk: Turnkeeper, tmp_path: Path, face: str
) -> None:
    """Over a `Turnkeeper` (a hop to asyncio's threads per call) or an `AsyncTurnkeeper` (a
    hop to its own workers per call): the same answers."""
    reference = SQLiteSession("agent-1", tmp_path / "sdk.db")
    try:
        expected = run(_script(reference))
    finally:
        reference.close()
    workers = Workers(2)
    on: Turnkeeper | AsyncTurnkeeper = tk if face == "sync" else AsyncTurnkeeper(tk, workers)
    try:
        assert run(_script(TurnkeeperSession("agent-1", on))) == expected
    finally:
        workers.shutdown()
    assert len(tk.history("agent-1")) == 2  # stored through the one core either way


def test_session_settings_limit_applies_when_no_limit_is_given(
    tk: Turnkeeper, tmp_path: Path
) -> None:
    settings = SessionSettings(limit=2)
    ours = TurnkeeperSession("agent-1", tk, session_settings=settings)
    reference = SQLiteSession("agent-1", tmp_path / "sdk.db", session_settings=settings)
    for session in (ours, reference):
        run(session.add_items(copy.deepcopy(ITEMS)))
    assert run(ours.get_items()) == run(reference.get_items()) == ITEMS[-2:]
    assert run(ours.get_items(3)) == ITEMS[-3:]
    reference.close()


def test_it_is_a_session_in_its_project_with_the_options_given(tk: Turnkeeper) -> None:
    session = TurnkeeperSession("agent-1", tk, project="bots", kind="agent", title="Weather")
    assert isinstance(session, Session)
    run(session.add_items([{"role": "user", "content": "hi"}]))
    stored = tk.get_session("agent-1", project="bots")
    assert (stored.kind, stored.title, stored.message_count) == ("agent", "Weather", 1)


def test_messages_other_writers_appended_are_offered_as_items(tk: Turnkeeper) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    session, _ = tk.get_or_create_session("shared")
    tk.append(session, "user", "hello")
    tk.append(session, "assistant", "", tool_calls=[call])
    tk.append(session, "tool", "42", tool_call_id="c1")
    assert run(TurnkeeperSession("shared", tk).get_items()) == [
        {"role": "user", "content": "hello"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "42"},
    ]


def test_an_expired_session_holds_no_items_and_a_new_one_takes_the_key(
    tk: Turnkeeper, clock: Clock
) -> None:
    session = TurnkeeperSession("agent-1", tk, ttl=timedelta(hours=1))
    run(session.add_items([{"role": "user", "content": "old"}]))
    clock.advance(timedelta(hours=2))
    assert run(session.get_items()) == [] and run(session.pop_item()) is None
    run(session.add_items([{"role": "user", "content": "new"}]))
    assert run(session.get_items()) == [{"role": "user", "content": "new"}]


def test_a_session_archived_by_another_writer_is_followed_by_a_new_one(
    tk: Turnkeeper, clock: Clock
) -> None:
    session = TurnkeeperSession("agent-2", tk)
    run(session.add_items([{"role": "user", "content": "before"}]))
    first = tk.get_session("agent-2")
    tk.archive_session(first)  # e.g. from the CLI or the web UI
    run(session.add_items([{"role": "user", "content": "after"}]))
    second = tk.get_session("agent-2")
    assert second.id != first.id
    assert run(session.get_items()) == [{"role": "user", "content": "after"}]
    assert [m.content for m in tk.history(first)] == ["before"]


def test_it_notices_expiry_by_the_services_clock_between_calls(
    tk: Turnkeeper, clock: Clock
) -> None:
    session = TurnkeeperSession("agent-3", tk, ttl=timedelta(hours=1))
    run(session.add_items([{"role": "user", "content": "one"}]))
    assert len(run(session.get_items())) == 1  # the session is remembered from here on
    clock.advance(timedelta(minutes=59))
    assert len(run(session.get_items())) == 1
    clock.advance(timedelta(minutes=2))
    assert run(session.get_items()) == []


@pytest.fixture
def model_server() -> Iterator[tuple[Upstream, str]]:
    """The recording OpenAI-compatible model on loopback (shared with the HTTP tests)."""
    state = Upstream()
    with LiveServer(make_app(state)) as live:
        yield state, live.url


def test_runner_keeps_memory_across_runs(
    tk: Turnkeeper, model_server: tuple[Upstream, str]
) -> None:
    upstream, url = model_server
    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=f"{url}/v1", api_key="test-key")
    agent = Agent(
        name="Assistant",
        instructions="Answer briefly.",
        model=OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client),
    )

    async def two_runs() -> tuple[Any, Any]:  # one loop: the client's connections live in it
        first = await Runner.run(agent, "My name is Ada.", session=TurnkeeperSession("chat-1", tk))
        again = TurnkeeperSession("chat-1", tk)  # a fresh object: the memory is in turnkeeper
        return first, await Runner.run(agent, "What is my name?", session=again)

    first, second = run(two_runs())
    sent = [(m["role"], m["content"]) for m in upstream.requests[1]["messages"]]
    assert sent == [
        ("system", "Answer briefly."),
        ("user", "My name is Ada."),
        ("assistant", first.final_output),
        ("user", "What is my name?"),
    ]
    assert second.final_output == "reply 2 to: What is my name?"
    assert [m.role for m in tk.history("chat-1")] == [Role.USER, Role.ASSISTANT] * 2


def test_without_the_sdk_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "agents", None)
    monkeypatch.setitem(sys.modules, "agents.memory.session_settings", None)
    monkeypatch.delitem(sys.modules, "turnkeeper.adapters.openai_agents")
    with pytest.raises(MissingExtra, match=r"pip install 'turnkeeper\[openai-agents\]'"):
        importlib.import_module("turnkeeper.adapters.openai_agents")


def test_a_context_strategy_trims_what_the_agent_is_given_but_not_the_store(
    tk: Turnkeeper,
) -> None:
    items = [{"role": "user", "content": f"message {n}: " + "word " * 40} for n in range(20)]
    session = TurnkeeperSession("long", tk, strategy="sliding_window", budget_tokens=300)
    run(session.add_items(copy.deepcopy(items)))
    given = run(session.get_items())
    assert 1 < len(given) < len(items)
    assert given[-1] == items[-1] and items[-len(given) + 1 :] == given[1:]
    assert given[0]["role"] == "system"  # the strategy's marker of what was left out
    assert run(session.get_items(2)) == items[-2:]
    assert tk.get_session("long").message_count == 20


def test_pop_item_goes_through_the_service_on_its_clock_and_in_its_project(
    tk: Turnkeeper, clock: Clock
) -> None:
    tk.append(tk.create_session(key="agent-1"), "user", "another project's")
    session = TurnkeeperSession("agent-1", tk, project="bots")
    run(session.add_items([{"role": "user", "content": "one"}, {"role": "user", "content": "two"}]))
    clock.advance(timedelta(hours=3))
    assert run(session.pop_item()) == {"role": "user", "content": "two"}
    ours = tk.get_session("agent-1", project="bots")
    assert (ours.message_count, ours.updated_at) == (1, clock())
    assert tk.get_session("agent-1").message_count == 1  # the default project's is untouched


def test_an_agent_loop_reads_what_it_appended_and_whatever_else_was_written(
    tk: Turnkeeper,
) -> None:
    """`get_items` after `add_items` (served from the store cache's pages, carried over the
    append) shows this object's appends and every other writer's change, as a fresh read."""
    ours = TurnkeeperSession("loop", tk)
    other = TurnkeeperSession("loop", tk)
    sdk_like: list[Any] = []

    async def turn(*items: Any) -> list[Any]:
        await ours.add_items(list(items))
        sdk_like.extend(items)
        return await ours.get_items()

    assert run(ours.get_items()) == []
    assert run(turn(ITEMS[2])) == sdk_like
    assert run(turn(ITEMS[5], ITEMS[6])) == sdk_like
    assert run(ours.get_items(limit=2)) == sdk_like[-2:]
    # As `Runner.run` does: the input added, then the output, then the next read.
    run(ours.add_items([ITEMS[3]]))
    sdk_like.append(ITEMS[3])
    assert run(turn(ITEMS[4])) == sdk_like
    # Another writer appends between this one's two appends: read afresh.
    run(ours.add_items([ITEMS[0]]))
    tk.append("loop", "user", "in between")
    sdk_like += [ITEMS[0], {"role": "user", "content": "in between"}]
    assert run(turn(ITEMS[1])) == sdk_like
    for _ in range(3):
        run(other.pop_item())
        sdk_like.pop()
    # Another writer removes the message just appended: no append to add to what was read.
    run(ours.add_items([ITEMS[9]]))
    run(other.pop_item())
    assert run(ours.get_items()) == sdk_like
    # Another writer appends right after this one's append (two versions on): read afresh.
    run(ours.add_items([ITEMS[7]]))
    tk.append("loop", "user", "from elsewhere")
    sdk_like += [ITEMS[7], {"role": "user", "content": "from elsewhere"}]
    assert run(ours.get_items()) == sdk_like
    run(other.pop_item())
    sdk_like.pop()
    assert run(turn(ITEMS[1])) == sdk_like
    assert run(ours.get_items()) == run(TurnkeeperSession("loop", tk).get_items())
    run(ours.clear_session())
    assert run(turn(ITEMS[3])) == [ITEMS[3]]


def test_a_session_deleted_between_two_adds_after_a_read_is_made_afresh(tk: Turnkeeper) -> None:
    """A session deleted between two adds after a read is made again by the second add."""
    ours = TurnkeeperSession("gone", tk)
    run(ours.add_items([ITEMS[2]]))
    assert run(ours.get_items()) == [ITEMS[2]]
    run(ours.add_items([ITEMS[8]]))
    tk.delete_session(tk.get_session("gone"))
    run(ours.add_items([ITEMS[0]]))
    assert run(ours.get_items()) == [ITEMS[0]]


def test_an_agent_loop_reads_no_messages_after_its_appends_with_the_defaults(
    tmp_path: Path,
) -> None:
    """Through `turnkeeper.open` as a user opens it: each turn's `get_items()` after the
    turn's two `add_items` is served from the store cache's page of the whole history, carried
    over the appends (the adapter keeps no history of its own), and holds what was appended."""

    def misses() -> float:
        return REGISTRY.get_sample_value("turnkeeper_cache_misses_total") or 0.0

    with turnkeeper.open(f"sqlite:///{tmp_path / 'loop.db'}") as tk:
        ours = TurnkeeperSession("loop", tk)
        run(ours.add_items([ITEMS[0]]))
        assert run(ours.get_items()) == [ITEMS[0]]  # read once, then carried
        expected = [ITEMS[0]]
        for turn in range(5):
            user = {"role": "user", "content": f"question {turn}"}
            reply = {"role": "assistant", "content": f"answer {turn}"}
            run(ours.add_items([user]))
            run(ours.add_items([reply]))
            expected += [user, reply]
            before = misses()
            assert run(ours.get_items()) == expected
            assert misses() == before
