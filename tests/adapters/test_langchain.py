"""`TurnkeeperChatMessageHistory` is a LangChain chat history: every message type comes back
equal (kwargs, metadata, tool calls, ids), sync and async, and `RunnableWithMessageHistory`
remembers conversations in turnkeeper."""

from __future__ import annotations

import importlib
import sys
from datetime import timedelta
from typing import Any

import pytest
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.prompt_values import PromptValue
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

from tests.conftest import Clock, run_async
from turnkeeper.adapters import MissingExtra, TurnkeeperChatMessageHistory
from turnkeeper.errors import SessionHeld
from turnkeeper.service import Turnkeeper
from turnkeeper.types import Role

MESSAGES: list[BaseMessage] = [
    SystemMessage(content="Be brief.", id="s-1", additional_kwargs={"cache": "ephemeral"}),
    HumanMessage(content="Größe von 🚀?", name="ada", id="h-1", response_metadata={"x": 1}),
    HumanMessage(
        content=[
            {"type": "text", "text": "And this?"},
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
        ]
    ),
    AIMessage(
        content="",
        id="a-1",
        tool_calls=[{"name": "weather", "args": {"city": "Oslo"}, "id": "call_1"}],
        additional_kwargs={"refusal": None},
        response_metadata={"model_name": "gpt-4o-mini", "finish_reason": "tool_calls"},
        usage_metadata={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
    ),
    ToolMessage(content='{"temp_c": -3}', tool_call_id="call_1", name="weather", artifact=[1]),
    FunctionMessage(content="-3", name="legacy_weather"),
    ChatMessage(content="Looks right.", role="critic"),
    AIMessage(content="It is -3 °C in Oslo.", name="bot"),
]


def test_every_message_type_comes_back_equal(tk: Turnkeeper) -> None:
    history = TurnkeeperChatMessageHistory("chat-1", tk)
    history.add_messages(MESSAGES)
    assert history.messages == MESSAGES
    assert [type(m) for m in history.messages] == [type(m) for m in MESSAGES]


def test_the_audit_trail_reads_as_a_conversation(tk: Turnkeeper) -> None:
    TurnkeeperChatMessageHistory("chat-1", tk).add_messages(MESSAGES)
    stored = tk.history("chat-1")
    assert [(m.role, m.author) for m in stored] == [
        (Role.SYSTEM, None), (Role.USER, "ada"), (Role.USER, None), (Role.ASSISTANT, None),
        (Role.TOOL, None), (Role.TOOL, None), (Role.USER, "critic"), (Role.ASSISTANT, "bot"),
    ]  # fmt: skip
    assert stored[2].content == "And this?\n[image_url]"
    assert stored[3].tool_calls == (
        {"id": "call_1", "type": "function",
         "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}},
    )  # fmt: skip
    assert (stored[4].tool_call_id, stored[5].tool_call_id) == ("call_1", "legacy_weather")


def test_the_async_variants_do_the_same(tk: Turnkeeper) -> None:
    history = TurnkeeperChatMessageHistory("chat-1", tk)

    async def script() -> tuple[list[BaseMessage], list[BaseMessage]]:
        await history.aadd_messages(MESSAGES[:2])
        await history.aadd_messages(MESSAGES[2:])
        stored = await history.aget_messages()
        await history.aclear()
        return stored, await history.aget_messages()

    assert run_async(script()) == (MESSAGES, [])


def test_clear_empties_the_session_and_it_is_a_chat_history(tk: Turnkeeper) -> None:
    history = TurnkeeperChatMessageHistory("chat-1", tk, project="bots", kind="langchain")
    assert isinstance(history, BaseChatMessageHistory)
    history.clear()  # nothing stored yet: nothing to do
    history.add_user_message("hi")
    history.add_ai_message("hello")
    assert tk.get_session("chat-1", project="bots").kind == "langchain"
    history.clear()
    assert history.messages == [] and tk.get_session("chat-1", project="bots").message_count == 0


def test_clear_leaves_a_session_under_a_legal_hold_whole(tk: Turnkeeper) -> None:
    history = TurnkeeperChatMessageHistory("chat-held", tk, project="bots")
    history.add_user_message("keep me")
    tk.set_legal_hold(project="bots", held=True)
    with pytest.raises(SessionHeld):
        history.clear()
    assert [m.content for m in history.messages] == ["keep me"]


def test_messages_other_writers_appended_come_back_as_langchain_messages(tk: Turnkeeper) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
    session, _ = tk.get_or_create_session("shared")
    tk.append(session, "system", "sys")
    tk.append(session, "user", "hello", author="ada")
    tk.append(session, "assistant", "", tool_calls=[call])
    tk.append(session, "tool", "42", tool_call_id="c1")
    assert TurnkeeperChatMessageHistory("shared", tk).messages == [
        SystemMessage(content="sys"),
        HumanMessage(content="hello", name="ada"),
        AIMessage(content="", tool_calls=[{"name": "f", "args": {"a": 1}, "id": "c1"}]),
        ToolMessage(content="42", tool_call_id="c1"),
    ]


def test_an_expired_session_reads_as_empty(tk: Turnkeeper, clock: Clock) -> None:
    history = TurnkeeperChatMessageHistory("chat-1", tk, ttl=timedelta(hours=1))
    history.add_user_message("old")
    clock.advance(timedelta(hours=2))
    assert history.messages == []
    history.add_user_message("new")
    assert history.messages == [HumanMessage(content="new")]


@pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")  # still shipped
def test_runnable_with_message_history_remembers_each_session(tk: Turnkeeper) -> None:
    seen: list[list[BaseMessage]] = []

    def model(prompt: PromptValue) -> AIMessage:
        messages = prompt.to_messages()
        seen.append(messages)
        return AIMessage(content=f"answer {len(seen)} to: {messages[-1].content}")

    prompt = ChatPromptTemplate.from_messages(
        [("system", "Answer briefly."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    chain = RunnableWithMessageHistory(
        prompt | RunnableLambda(model),
        lambda session_id: TurnkeeperChatMessageHistory(session_id, tk),
        input_messages_key="question",
        history_messages_key="history",
    )

    def ask(session: str, question: str) -> Any:
        return chain.invoke({"question": question}, {"configurable": {"session_id": session}})

    ask("s1", "My name is Ada.")
    ask("s2", "Unrelated.")
    reply = run_async(
        chain.ainvoke({"question": "My name?"}, {"configurable": {"session_id": "s1"}})
    )
    assert [m.content for m in seen[-1]] == [
        "Answer briefly.", "My name is Ada.", "answer 1 to: My name is Ada.", "My name?",
    ]  # fmt: skip
    assert reply.content == "answer 3 to: My name?"
    assert [m.content for m in tk.history("s1")][-1] == "answer 3 to: My name?"
    assert tk.get_session("s2").message_count == 2


def test_without_langchain_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain_core.chat_history", None)
    monkeypatch.delitem(sys.modules, "turnkeeper.adapters.langchain")
    with pytest.raises(MissingExtra, match=r"pip install 'turnkeeper\[langchain\]'"):
        importlib.import_module("turnkeeper.adapters.langchain")
