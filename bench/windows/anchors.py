"""The anchors' own history policies, run with their real packages.

- LangChain: `langchain_core.messages.trim_messages(strategy="last")` over the whole history,
  as its documentation trims a chat history (`include_system=True`, `start_on="human"`,
  `end_on=("human", "tool")`, `allow_partial=False`), with `max_tokens` the budget and a
  `token_counter` that counts each message exactly as turnkeeper does.
- openai-agents: a `SQLiteSession` with `SessionSettings(limit=N)`: the newest N items, after
  the agent's instructions (the system message). N is a count of items, not tokens, so it is
  chosen as a user tuning it on their own logs would: the largest N under which no window of
  the data set exceeds the budget (`items_limit`).
- LlamaIndex: `Memory.from_defaults(token_limit=B)` (llama-index-core), the agent's system
  prompt before `memory.get()`. Its documented rule: when the chat history passes
  `chat_history_token_ratio` (0.7) of the limit, the oldest messages are flushed in chunks of
  `token_flush_size` (10% of its default 30,000 tokens, or 70% of a smaller limit), the history
  always starting at a user message. Its counts are the text's tokens (`tokenizer_fn`: the same
  o200k_base encoding), without the chat format's per-message overhead.

Each replay maps the package's answer back to the conversation's turns (checking that it is
the suffix it must be) and makes a window of them, so it is rendered and billed like the rest.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import turnkeeper
from turnkeeper.tokens import REPLY_PRIMING, TokenCounter
from windows.billing import Encode
from windows.conversations import Conversation, Turn
from windows.policies import Counted, window_of


@dataclass
class LangChainTrim:
    counter: TokenCounter
    label: str = 'LangChain `trim_messages(strategy="last")`'
    budgeted: bool = True

    def start(self, conversation: Conversation, budget: int) -> _LangChainReplay:
        return _LangChainReplay(self, budget, Counted(self.counter))


@dataclass
class _LangChainReplay:
    policy: LangChainTrim
    budget: int
    counted: Counted
    messages: list[Any] = field(default_factory=list)
    turns: dict[str, Turn] = field(default_factory=dict)

    def add(self, turn: Turn) -> None:
        from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

        key = str(turn.seq)
        self.turns[key] = turn
        if turn.role == "system":
            message: Any = SystemMessage(turn.content, id=key)
        elif turn.role == "user":
            message = HumanMessage(turn.content, id=key)
        elif turn.role == "tool":
            message = ToolMessage(turn.content, tool_call_id=turn.tool_call_id or "", id=key)
        else:
            calls = [
                {
                    "name": call["function"]["name"],
                    "args": json.loads(call["function"]["arguments"]),
                    "id": call["id"],
                    "type": "tool_call",
                }
                for call in turn.tool_calls or ()
            ]
            message = AIMessage(turn.content, tool_calls=calls, id=key)
        self.messages.append(message)

    def _count(self, messages: list[Any]) -> int:
        return REPLY_PRIMING + sum(self.counted.turn(self.turns[m.id]) for m in messages)

    def window(self) -> turnkeeper.ContextWindow:
        from langchain_core.messages import trim_messages

        kept = trim_messages(
            self.messages,
            max_tokens=self.budget,
            token_counter=self._count,
            strategy="last",
            include_system=True,
            start_on="human",
            end_on=("human", "tool"),
            allow_partial=False,
        )
        return window_of(
            [self.turns[message.id] for message in kept],
            self.counted,
            label=self.policy.label,
            budget=self.budget,
            stored=len(self.messages),
        )


def items_of(turn: Turn) -> list[dict[str, Any]]:
    """The Agents SDK's items for a turn (the Responses API's input items)."""
    if turn.role == "tool":
        call_id = turn.tool_call_id or ""
        return [{"type": "function_call_output", "call_id": call_id, "output": turn.content}]
    items: list[dict[str, Any]] = []
    if turn.content or not turn.tool_calls:
        items.append({"role": turn.role, "content": turn.content})
    for call in turn.tool_calls or ():
        function = call["function"]
        items.append(
            {
                "type": "function_call",
                "call_id": call["id"],
                "name": function["name"],
                "arguments": function["arguments"],
            }
        )
    return items


def part_of(turn: Turn, items: Sequence[dict[str, Any]]) -> Turn:
    """The turn that `items` (all or some of `turn`'s) stand for."""
    if len(items) == len(items_of(turn)):
        return turn
    text = "".join(item.get("content", "") for item in items if "role" in item)
    calls = tuple(
        {
            "id": item["call_id"],
            "type": "function",
            "function": {"name": item["name"], "arguments": item["arguments"]},
        }
        for item in items
        if item.get("type") == "function_call"
    )
    return Turn(turn.seq, turn.role, text, turn.sitting, tool_calls=calls or None)


def items_limit(conversations: Sequence[Conversation], budget: int, counter: TokenCounter) -> int:
    """The largest item limit under which every window of `conversations` fits `budget` (each
    item counted as a message of its own: a turn split in items costs at least as much)."""
    best = 10**9
    for conversation in conversations:
        system = 0
        costs: list[int] = []
        for turn in conversation.turns:
            if turn.role == "system":
                system = counter.count_message("system", turn.content)
                continue
            for item in items_of(turn):
                part = part_of(turn, [item]) if turn.role != "tool" else turn
                costs.append(
                    counter.count_message(
                        part.role,
                        part.content,
                        tool_calls=part.tool_calls,
                        tool_call_id=part.tool_call_id,
                    )
                )
            if not turn.asks_the_model:
                continue
            room = budget - REPLY_PRIMING - system
            for fits, cost in enumerate(reversed(costs)):
                if cost > room:
                    best = min(best, fits)  # this window would hold no more than `fits`
                    break
                room -= cost
    return max(best, 1)


@dataclass
class AgentsSessionLimit:
    counter: TokenCounter
    limits: dict[int, int]
    """The item limit N for each budget (`items_limit`)."""
    label: str = "openai-agents `SessionSettings(limit=N)`"
    budgeted: bool = True

    def start(self, conversation: Conversation, budget: int) -> _AgentsReplay:
        from agents import SQLiteSession
        from agents.memory import SessionSettings

        session = SQLiteSession(
            f"{conversation.key}-{budget}",
            session_settings=SessionSettings(limit=self.limits[budget]),
        )
        return _AgentsReplay(self, budget, Counted(self.counter), session)


@dataclass
class _AgentsReplay:
    policy: AgentsSessionLimit
    budget: int
    counted: Counted
    session: Any
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)
    system: Turn | None = None
    items: list[tuple[dict[str, Any], Turn]] = field(default_factory=list)

    def add(self, turn: Turn) -> None:
        if turn.role == "system":  # the agent's instructions, not an item of the session
            self.system = turn
            return
        new = items_of(turn)
        self.items.extend((item, turn) for item in new)
        self.loop.run_until_complete(self.session.add_items(new))

    def window(self) -> turnkeeper.ContextWindow:
        got = self.loop.run_until_complete(self.session.get_items())
        ours = self.items[len(self.items) - len(got) :]
        assert [item for item, _ in ours] == got, "the session's newest items, in order"
        entries: list[Turn | str] = [self.system] if self.system else []
        index = 0
        while index < len(ours):
            turn = ours[index][1]
            run = [item for item, owner in ours[index:] if owner is turn]
            entries.append(part_of(turn, run))
            index += len(run)
        return window_of(
            entries,
            self.counted,
            label=self.policy.label,
            budget=self.budget,
            stored=len(self.items),
        )

    def __del__(self) -> None:
        self.loop.close()


@dataclass
class LlamaIndexMemory:
    counter: TokenCounter
    encode: Encode
    label: str = "LlamaIndex `Memory` (token FIFO)"
    budgeted: bool = True

    def start(self, conversation: Conversation, budget: int) -> _LlamaReplay:
        from llama_index.core.memory import Memory

        memory = Memory.from_defaults(
            session_id=f"{conversation.key}-{budget}",
            token_limit=budget,
            tokenizer_fn=_remembered(self.encode),
        )
        return _LlamaReplay(self, budget, Counted(self.counter), memory)


@functools.cache
def _remembered(encode: Encode) -> Encode:
    """`encode`, remembering each text's tokens (LlamaIndex counts the whole history on every
    message it is given; the counts are the same, only sooner)."""
    return functools.lru_cache(maxsize=None)(encode)


@dataclass
class _LlamaReplay:
    policy: LlamaIndexMemory
    budget: int
    counted: Counted
    memory: Any
    system: Turn | None = None
    turns: list[Turn] = field(default_factory=list)

    def add(self, turn: Turn) -> None:
        from llama_index.core.llms import ChatMessage

        if turn.role == "system":  # the agent's system prompt, not part of the memory
            self.system = turn
            return
        extra: dict[str, Any] = {}
        if turn.tool_calls:
            extra["tool_calls"] = [dict(call) for call in turn.tool_calls]
        if turn.tool_call_id:
            extra["tool_call_id"] = turn.tool_call_id
        self.memory.put(ChatMessage(role=turn.role, content=turn.content, additional_kwargs=extra))
        self.turns.append(turn)

    def window(self) -> turnkeeper.ContextWindow:
        got = self.memory.get()
        ours = self.turns[len(self.turns) - len(got) :]
        assert [m.content or "" for m in got] == [t.content for t in ours], "the newest turns"
        entries: list[Turn | str] = [self.system] if self.system else []
        entries.extend(ours)
        return window_of(
            entries,
            self.counted,
            label=self.policy.label,
            budget=self.budget,
            stored=len(self.turns),
        )
