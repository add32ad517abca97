"""A built window in the wire shapes of the two common chat APIs.

The window is provider-neutral (OpenAI's role vocabulary plus attribution); these functions are
the only place that knows each API's rules, so the strategies never have to.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from turnkeeper.types import ContextMessage, ContextWindow, Role

_NAME_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")
_NAME_MAX = 64


def openai_name(author: str) -> str:
    """`author` made acceptable as OpenAI's `name` (`^[a-zA-Z0-9_-]{1,64}$`)."""
    return _NAME_UNSAFE.sub("_", author)[:_NAME_MAX]


def wire_name(role: Role | str, author: str | None) -> str | None:
    """The `name` OpenAI gets for a message (tool results take none). Token counts use it too,
    so a window is counted exactly as it is sent."""
    if not author or Role(role) is Role.TOOL:
        return None
    return openai_name(author)


def to_openai(window: ContextWindow) -> list[dict[str, Any]]:
    """The window as OpenAI chat `messages`.

    `name` carries the author (sanitized) on system, user and assistant messages (tool results
    take no name); assistant messages carry their `tool_calls` as stored, tool results their
    `tool_call_id`.
    """
    return openai_messages(window.messages)


def openai_messages(entries: Iterable[ContextMessage]) -> list[dict[str, Any]]:
    """Window entries (or entries made for a request that stores nothing) as OpenAI chat
    `messages`, as `to_openai` renders a window's."""
    return [_openai_message(message) for message in entries]


def _openai_message(message: ContextMessage) -> dict[str, Any]:
    entry: dict[str, Any] = {"role": message.role.value, "content": message.content}
    name = wire_name(message.role, message.author)
    if name is not None:
        entry["name"] = name
    if message.role is Role.ASSISTANT and message.tool_calls:
        entry["tool_calls"] = [dict(call) for call in message.tool_calls]
    if message.role is Role.TOOL and message.tool_call_id:
        entry["tool_call_id"] = message.tool_call_id
    return entry


def to_anthropic(window: ContextWindow) -> dict[str, Any]:
    """The window as Anthropic Messages API arguments: `{"system": str, "messages": [...]}`.

    Anthropic has no system role in `messages` and wants user and assistant to alternate, so:
    the leading system entries (system message, markers, summary) become `system`; a later
    system message becomes a user turn `[system] …`; tool results become user `tool_result`
    blocks; consecutive turns of one role merge. Content is always a list of blocks.
    """
    messages = list(window.messages)
    lead = 0
    while lead < len(messages) and messages[lead].role is Role.SYSTEM:
        lead += 1
    system = "\n\n".join(message.content for message in messages[:lead] if message.content)
    turns: list[dict[str, Any]] = []
    for message in messages[lead:]:
        role, blocks = _anthropic_turn(message)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return {"system": system, "messages": turns}


def _anthropic_turn(message: ContextMessage) -> tuple[str, list[dict[str, Any]]]:
    if message.role is Role.TOOL:
        result = {"type": "tool_result", "tool_use_id": message.tool_call_id or ""}
        return "user", [{**result, "content": message.content}]
    if message.role is Role.SYSTEM:
        return "user", _text(f"[system] {message.content}" if message.content else "")
    blocks = _text(message.content)
    if message.role is Role.ASSISTANT:
        blocks += [_tool_use(call) for call in message.tool_calls or ()]
        return "assistant", blocks
    return "user", blocks


def _text(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}] if text else []


def _tool_use(call: Mapping[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    return {
        "type": "tool_use",
        "id": str(call.get("id", "")),
        "name": str(function.get("name", "")),
        "input": _arguments(function.get("arguments")),
    }


def _arguments(raw: Any) -> dict[str, Any]:
    """Tool-call arguments as the object Anthropic wants: parsed JSON, else `{"raw": text}`."""
    if raw is None or raw == "":
        return {}
    if isinstance(raw, Mapping):
        return dict(raw)
    try:
        parsed = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return {"raw": str(raw)}
    return dict(parsed) if isinstance(parsed, Mapping) else {"raw": str(raw)}
