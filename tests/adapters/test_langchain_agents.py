"""`TurnkeeperMiddleware` with the real `langchain.agents.create_agent` and a fake chat model (the
only stand-in: it records what it was sent and answers from a script)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from pydantic import Field

from turnkeeper.adapters import TurnkeeperChatMessageHistory, TurnkeeperMiddleware
from turnkeeper.errors import InvalidInput
from turnkeeper.service import Turnkeeper


class RecordingModel(GenericFakeChatModel):
    """Answers from `messages` in turn; `received` is what each call was sent."""

    received: list[list[BaseMessage]] = Field(default_factory=list)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.received.append(list(messages))
        return super()._generate(messages, *args, **kwargs)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> RecordingModel:  # type: ignore[override]
        return self


def model(*replies: AIMessage) -> RecordingModel:
    return RecordingModel(messages=iter(replies))


def said(messages: Sequence[BaseMessage]) -> list[tuple[str, Any]]:
    return [(m.type, m.content) for m in messages]


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"-3 °C in {city}"


def test_the_agent_remembers_across_invocations_in_turnkeeper(tk: Turnkeeper) -> None:
    fake = model(AIMessage("Hello Ada."), AIMessage("You are Ada."))
    agent = create_agent(
        fake, system_prompt="Be brief.", middleware=[TurnkeeperMiddleware(tk, key="ada")]
    )
    agent.invoke({"messages": [HumanMessage("Hi, I am Ada.")]})
    agent.invoke({"messages": [HumanMessage("Who am I?")]})  # a fresh state: no checkpointer
    assert said(fake.received[1]) == [
        ("system", "Be brief."),
        ("human", "Hi, I am Ada."),
        ("ai", "Hello Ada."),
        ("human", "Who am I?"),
    ]
    stored = tk.history(tk.get_session("ada"))
    assert [(m.role.value, m.content) for m in stored] == [
        ("user", "Hi, I am Ada."),
        ("assistant", "Hello Ada."),
        ("user", "Who am I?"),
        ("assistant", "You are Ada."),
    ]


def test_the_model_sees_the_window_of_the_strategy_and_the_store_keeps_all(
    tk: Turnkeeper,
) -> None:
    session = tk.create_session(key="long")
    for n in range(20):
        tk.append(session, "user" if n % 2 == 0 else "assistant", f"turn {n}: " + "word " * 40)
    fake = model(AIMessage("Short answer."))
    middleware = TurnkeeperMiddleware(tk, key="long", strategy="sliding_window", budget_tokens=300)
    create_agent(fake, middleware=[middleware]).invoke({"messages": [HumanMessage("Now?")]})
    (sent,) = fake.received
    assert 2 < len(sent) < 21
    assert isinstance(sent[0], SystemMessage)  # the strategy's marker of what was left out
    assert said(sent[-2:]) == [("ai", "turn 19: " + "word " * 40), ("human", "Now?")]
    assert tk.get_session("long").message_count == 22


def test_tool_calls_and_results_are_stored_once_in_order(tk: Turnkeeper) -> None:
    call = {"name": "weather", "args": {"city": "Oslo"}, "id": "call-1", "type": "tool_call"}
    fake = model(AIMessage("", tool_calls=[call]), AIMessage("It is -3 °C."))
    agent = create_agent(fake, tools=[weather], middleware=[TurnkeeperMiddleware(tk, key="w")])
    agent.invoke({"messages": [HumanMessage("Weather in Oslo?")]})
    assert isinstance(fake.received[1][-1], ToolMessage)  # the second call saw the result
    stored = tk.history(tk.get_session("w"))
    assert [m.role.value for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[1].tool_calls is not None and stored[1].tool_calls[0]["id"] == "call-1"
    assert (stored[2].tool_call_id, stored[2].content) == ("call-1", "-3 °C in Oslo")
    history = TurnkeeperChatMessageHistory("w", tk).messages
    assert isinstance(history[1], AIMessage) and history[1].tool_calls[0]["args"] == {
        "city": "Oslo"
    }


def test_without_a_key_the_langgraph_thread_names_the_session(tk: Turnkeeper) -> None:
    fake = model(AIMessage("one"), AIMessage("two"))
    agent = create_agent(fake, middleware=[TurnkeeperMiddleware(tk)])
    for thread in ("thread-a", "thread-b"):
        agent.invoke(
            {"messages": [HumanMessage(f"in {thread}")]}, {"configurable": {"thread_id": thread}}
        )
    assert [m.content for m in tk.history(tk.get_session("thread-b"))] == ["in thread-b", "two"]
    with pytest.raises(InvalidInput, match="thread_id"):
        agent.invoke({"messages": [HumanMessage("nowhere")]})


def test_the_async_agent_uses_the_same_memory(tk: Turnkeeper) -> None:
    fake = model(AIMessage("first"), AIMessage("second"))
    agent = create_agent(fake, middleware=[TurnkeeperMiddleware(tk, key="async")])
    run: Callable[[str], Any] = lambda text: asyncio.run(  # noqa: E731
        agent.ainvoke({"messages": [HumanMessage(text)]})
    )
    run("a")
    run("b")
    assert said(fake.received[1]) == [("human", "a"), ("ai", "first"), ("human", "b")]
    assert tk.get_session("async").message_count == 4


def test_the_history_adapter_takes_a_strategy_and_budget(tk: Turnkeeper) -> None:
    full = TurnkeeperChatMessageHistory("h", tk)
    full.add_messages([HumanMessage(f"message {n}: " + "word " * 40) for n in range(20)])
    trimmed = TurnkeeperChatMessageHistory("h", tk, strategy="sliding_window", budget_tokens=300)
    kept = trimmed.messages
    assert 1 < len(kept) < 20 and isinstance(kept[0], SystemMessage)
    assert kept[1:] == full.messages[-(len(kept) - 1) :]
    assert len(full.messages) == 20


def test_with_a_checkpointer_the_whole_state_is_not_stored_again(tk: Turnkeeper) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    fake = model(AIMessage("one"), AIMessage("two"), AIMessage("three"))
    agent = create_agent(fake, middleware=[TurnkeeperMiddleware(tk)], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "saved"}}
    for text in ("a", "b", "c"):
        agent.invoke({"messages": [HumanMessage(text)]}, config)  # type: ignore[arg-type]
    stored = [m.content for m in tk.history(tk.get_session("saved"))]
    assert stored == ["a", "one", "b", "two", "c", "three"]
    assert said(fake.received[2]) == [
        ("human", "a"), ("ai", "one"), ("human", "b"), ("ai", "two"), ("human", "c"),
    ]  # fmt: skip
