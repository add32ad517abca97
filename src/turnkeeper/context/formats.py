"""A built window in the wire shapes of the two common chat APIs.

The window is provider-neutral (OpenAI's role vocabulary plus attribution); these functions are
the only place that knows each API's rules, so the strategies never have to.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
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


CACHE_BREAKPOINTS = 4
"""The most `cache_control` marks one Anthropic request may carry (tools, system and messages
together)."""
CACHE_LOOKBACK = 20
"""How many blocks Anthropic looks back from a mark for an entry an earlier request wrote."""
MIN_CACHE_TOKENS = 1024
"""The shortest prefix Anthropic caches for most models (some want 2,048 or 4,096); a mark on a
shorter prefix caches nothing and wastes one of the four."""
EPHEMERAL: Mapping[str, str] = {"type": "ephemeral"}
"""The mark `to_anthropic(window, cache=True)` puts (Anthropic's default five-minute cache)."""


@dataclass(slots=True)
class _Block:
    """A rendered block and the tokens of the window up to it (counted by whole entries: a
    block ending an entry counts that entry, an earlier block of it does not)."""

    block: dict[str, Any]
    prefix_tokens: int


def to_anthropic(
    window: ContextWindow,
    *,
    cache: bool | Mapping[str, Any] = False,
    breakpoints: int = CACHE_BREAKPOINTS,
    min_cache_tokens: int = MIN_CACHE_TOKENS,
) -> dict[str, Any]:
    """The window as Anthropic Messages API arguments: `{"system": …, "messages": [...]}`.

    Anthropic has no system role in `messages` and wants user and assistant to alternate, so:
    the leading system entries (system message, markers, summary) become `system`; a later
    system message becomes a user turn `[system] …`; tool results become user `tool_result`
    blocks; consecutive turns of one role merge. Content is always a list of blocks; `system`
    is one string.

    With `cache` (True, or the `cache_control` object to use, e.g. with a `ttl`), the stable
    prefix is marked for Anthropic's prompt cache, within its rules: `system` becomes a list
    of text blocks (one per leading entry, so the stored system prompt is apart from markers
    and summaries that change), and at most `breakpoints` blocks get the mark, never one whose
    prefix is under `min_cache_tokens` (a mark there caches nothing). In order of worth: the
    last block (the whole window, which the next turn reads back), the last block before a
    note inside the window (`relevant`'s newest turns, which stay while what it recalls after
    them changes), the end of the stored system prompt (still read when the window slides and
    its messages change), then a block every
    `CACHE_LOOKBACK` blocks back from the end, so the next turn finds this one's entry even
    when a turn adds more blocks than Anthropic looks back over (a long tool loop).
    """
    messages = list(window.messages)
    lead = 0
    while lead < len(messages) and messages[lead].role is Role.SYSTEM:
        lead += 1
    turns: list[dict[str, Any]] = []
    blocks: list[_Block] = []
    stable: _Block | None = None  # the last block before a note inside the window
    tokens = sum(message.tokens for message in messages[:lead])
    for message in messages[lead:]:
        if stable is None and blocks and message.kind in ("marker", "summary"):
            stable = blocks[-1]
        role, content = _anthropic_turn(message)
        if not content:
            continue
        blocks += [_Block(block, tokens) for block in content]
        tokens += message.tokens
        blocks[-1].prefix_tokens = tokens
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(content)
        else:
            turns.append({"role": role, "content": content})
    if not cache:
        system = "\n\n".join(message.content for message in messages[:lead] if message.content)
        return {"system": system, "messages": turns}
    mark = dict(EPHEMERAL if cache is True else cache)
    system_blocks, prompt = _system_blocks(messages[:lead])
    points = _cache_points(system_blocks, prompt, blocks, breakpoints, min_cache_tokens, stable)
    for chosen in points:
        chosen.block["cache_control"] = dict(mark)
    return {"system": [entry.block for entry in system_blocks], "messages": turns}


def _system_blocks(lead: list[ContextMessage]) -> tuple[list[_Block], int]:
    """The leading system entries as text blocks, and how many of them are the stored system
    prompt (entries before the first marker or summary)."""
    blocks: list[_Block] = []
    tokens, stable, in_prompt = 0, 0, True
    for message in lead:
        tokens += message.tokens
        in_prompt = in_prompt and message.kind == "message"
        if message.content:
            blocks.append(_Block({"type": "text", "text": message.content}, tokens))
            stable = len(blocks) if in_prompt else stable
    return blocks, stable


def _cache_points(
    system: list[_Block],
    stable: int,
    turns: list[_Block],
    breakpoints: int,
    min_tokens: int,
    before_note: _Block | None = None,
) -> list[_Block]:
    """The blocks to mark (see `to_anthropic`): each with a prefix of at least `min_tokens`.
    `before_note`: the end of what precedes a note inside the window (`relevant` puts the
    turns it recalls after its newest turns and a note: only what comes before stays the same
    next turn)."""

    def worth(block: _Block) -> bool:
        return block.prefix_tokens >= min_tokens

    last = turns[-1:] if turns and worth(turns[-1]) else []
    kept = [before_note] if before_note is not None and worth(before_note) else []
    kept = [block for block in kept if block not in last]
    prompt = system[stable - 1 : stable] if stable and worth(system[stable - 1]) else []
    back = range(len(turns) - 1 - CACHE_LOOKBACK, -1, -CACHE_LOOKBACK) if last else range(0)
    between = [turns[position] for position in back if worth(turns[position])]
    between = [block for block in between if block not in kept]
    return (last + kept + prompt + between)[: max(breakpoints, 0)]


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
