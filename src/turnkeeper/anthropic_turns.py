"""Chat turns in Anthropic's Messages API: what `POST /v1/messages` needs beyond the turn itself.

The turn (store the new turns, hold the turn, build the window, ask the model, store the reply
and its trace, exactly once under retries) is `turnkeeper.turns.ChatTurns`, the same as for
every other route. This module is what differs for Anthropic, kept in one place:

- `ANTHROPIC_MESSAGES`: how the upstream client speaks to Anthropic (`POST /v1/messages`, the
  key in `x-api-key`, the API version header), and `anthropic_client`, the client for the
  configured Anthropic upstream (its own key, never the OpenAI one).
- `ANTHROPIC_WIRE`: an answer (whole, or the event stream) read into the reply to store, and a
  stored reply answered again to a retry as a message or as its event stream.
- `MessagesTurn`: a client's request read into the turns to store (what cannot be stored is an
  `InvalidInput` naming the field, raised before anything is stored), the fields to forward,
  and how the window is rendered: `to_anthropic`, with prompt-cache marks when the request
  asks for caching (a `cache_control` anywhere in it).

A request's messages after its last assistant message are new, as for the OpenAI-compatible
proxy: a client may send only its new turn (turnkeeper holds the history) or its whole
transcript (the answered part is stored already). Usage is stored as the model counts prompt
tokens: `input_tokens` is Anthropic's input plus its cache reads and writes; the cache figures
themselves are kept in the turn's trace under Anthropic's names.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from turnkeeper.config import ANTHROPIC_VARIABLES, Settings
from turnkeeper.context.formats import CACHE_BREAKPOINTS, MIN_CACHE_TOKENS, to_anthropic
from turnkeeper.errors import InvalidInput, Unsupported
from turnkeeper.llm import ChatAPI, LLMClient, Reply
from turnkeeper.turns import Wire
from turnkeeper.types import ContextWindow, Message, NewMessage, Role, Usage
from turnkeeper.validation import check_message

API_VERSION = "2023-06-01"
"""The `anthropic-version` turnkeeper speaks to its Anthropic upstream."""

ANTHROPIC_MESSAGES = ChatAPI(
    "/v1/messages",
    lambda key: {"x-api-key": key},
    "content",
    {"anthropic-version": API_VERSION},
    provider="anthropic",
)
"""Anthropic's Messages API, under the configured `anthropic_base_url`."""

CACHE_COUNTS = ("cache_read_input_tokens", "cache_creation_input_tokens")
"""Anthropic's usage fields for the prompt cache, kept in the turn's trace."""

_LONGER_CACHE_PREFIXES = {
    4096: ("claude-opus-4-5", "claude-opus-4-6", "claude-opus-4-7", "claude-haiku-4-5"),
    2048: ("claude-3-haiku", "claude-3-5-haiku"),
}
"""Models whose shortest cacheable prefix is over `MIN_CACHE_TOKENS` (Anthropic's table)."""


def min_cache_tokens(model: str) -> int:
    """The shortest prefix Anthropic caches for `model` (1,024 unless its table says more)."""
    for tokens, prefixes in _LONGER_CACHE_PREFIXES.items():
        if model.startswith(prefixes):
            return tokens
    return MIN_CACHE_TOKENS


NOT_CONFIGURED = (
    "this service has no Anthropic upstream: set ANTHROPIC_API_KEY (or the anthropic_api_key "
    "setting, TURNKEEPER_ANTHROPIC_API_KEY) and, for another endpoint, ANTHROPIC_BASE_URL"
)


def anthropic_client(settings: Settings) -> LLMClient:
    """The client of the configured Anthropic upstream (`Unsupported` when there is none)."""
    if not settings.configured(ANTHROPIC_VARIABLES):
        raise Unsupported(NOT_CONFIGURED)
    return LLMClient(
        settings.anthropic_base_url,
        api_key=settings.anthropic_api_key,
        timeout=settings.llm_timeout.total_seconds(),
        max_retries=settings.llm_max_retries,
        backoff=settings.llm_retry_backoff.total_seconds(),
        api=ANTHROPIC_MESSAGES,
    )


# -- answers: read into the reply to store, and a stored reply answered again ------------------


def _usage(raw: Any) -> Usage | None:
    """Anthropic's usage as turnkeeper's (input = all prompt tokens, cache reads and writes
    included, as OpenAI counts them)."""
    if not isinstance(raw, Mapping):
        return None
    read, written = (raw[name] if _count(raw.get(name)) else 0 for name in CACHE_COUNTS)
    given, output = raw.get("input_tokens"), raw.get("output_tokens")
    if not _count(given) or not _count(output):
        return None
    return Usage(
        input_tokens=given + read + written, output_tokens=output,
        cache_read_input_tokens=read, cache_creation_input_tokens=written,
    )  # fmt: skip


def _count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _tool_call(block: Mapping[str, Any], arguments: str) -> dict[str, Any]:
    """A `tool_use` block as the tool call turnkeeper stores (OpenAI's shape)."""
    name = str(block.get("name") or "")
    return {"id": str(block.get("id") or ""), "type": "function",
            "function": {"name": name, "arguments": arguments}}  # fmt: skip


def reply_from_message(data: Mapping[str, Any]) -> Reply:
    """A whole Anthropic message as the reply to store: its text, its tool uses, its usage.
    Blocks of other kinds (thinking) go to the client but are not stored."""
    reply = Reply(model=data.get("model"), finish_reason=data.get("stop_reason"))
    for block in data.get("content") or ():
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "text":
            reply.content += str(block.get("text") or "")
        elif block.get("type") == "tool_use":
            reply.tool_calls.append(_tool_call(block, json.dumps(block.get("input") or {})))
    reply.usage = _usage(data.get("usage"))
    return reply


@dataclass
class MessageGatherer:
    """Anthropic's stream events folded into the reply they make (see `reply_from_message`)."""

    reply: Reply = field(default_factory=Reply)
    _calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    _usage: dict[str, Any] = field(default_factory=dict)

    def add_chunk(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") or {}
            self.reply.model = message.get("model") or self.reply.model
            self._usage.update(message.get("usage") or {})
        elif kind == "content_block_start":
            self._start(event.get("index"), event.get("content_block") or {})
        elif kind == "content_block_delta":
            self._delta(event.get("index"), event.get("delta") or {})
        elif kind == "message_delta":
            self.reply.finish_reason = (event.get("delta") or {}).get("stop_reason")
            self._usage.update(event.get("usage") or {})  # counts so far: the last ones stand

    def _start(self, index: Any, block: Mapping[str, Any]) -> None:
        if block.get("type") == "text":
            self.reply.content += str(block.get("text") or "")
        elif block.get("type") == "tool_use" and isinstance(index, int):
            given = block.get("input")
            self._calls[index] = _tool_call(block, json.dumps(given) if given else "")
            self.reply.tool_calls.append(self._calls[index])

    def _delta(self, index: Any, delta: Mapping[str, Any]) -> None:
        if delta.get("type") == "text_delta":
            self.reply.content += str(delta.get("text") or "")
        elif delta.get("type") == "input_json_delta" and index in self._calls:
            self._calls[index]["function"]["arguments"] += str(delta.get("partial_json") or "")

    def gathered(self) -> Reply:
        for call in self._calls.values():
            call["function"]["arguments"] = call["function"]["arguments"] or "{}"
        self.reply.usage = _usage(self._usage)
        return self.reply


def message_from_reply(reply: Message) -> dict[str, Any]:
    """A stored reply as an Anthropic message (a retry of an answered turn gets it again)."""
    content: list[dict[str, Any]] = (
        [{"type": "text", "text": reply.content}] if reply.content else []
    )
    for call in reply.tool_calls or ():
        function = call.get("function") or {}
        content.append({"type": "tool_use", "id": str(call.get("id", "")),
                        "name": str(function.get("name", "")),
                        "input": _input_of(function.get("arguments"))})  # fmt: skip
    usage = reply.usage or Usage()
    return {
        "id": f"msg_{reply.id}",
        "type": "message",
        "role": "assistant",
        "model": str(reply.metadata.get("model", "")),
        "content": content,
        "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": _anthropic_usage(usage),
    }


def _anthropic_usage(usage: Usage) -> dict[str, int]:
    """A stored reply's usage in Anthropic's counting (`_usage` backwards): its `input_tokens`
    are the ones neither read from nor written to the prompt cache."""
    read, written = usage.cache_read_input_tokens, usage.cache_creation_input_tokens
    return {
        "input_tokens": max(usage.input_tokens - read - written, 0),
        "output_tokens": usage.output_tokens,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": written,
    }


def _input_of(arguments: Any) -> dict[str, Any]:
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) and arguments else {}
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def events_from_reply(reply: Message) -> Iterator[dict[str, Any]]:
    """A stored reply as Anthropic's event stream: each block whole in one delta."""
    whole = message_from_reply(reply)
    usage = whole["usage"]
    start = whole | {"content": [], "stop_reason": None,
                     "usage": usage | {"output_tokens": 0}}  # fmt: skip
    yield {"type": "message_start", "message": start}
    for index, block in enumerate(whole["content"]):
        if block["type"] == "text":
            opened, delta = (
                {"type": "text", "text": ""},
                {"type": "text_delta", "text": block["text"]},
            )
        else:
            opened = block | {"input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield {"type": "content_block_start", "index": index, "content_block": opened}
        yield {"type": "content_block_delta", "index": index, "delta": delta}
        yield {"type": "content_block_stop", "index": index}
    yield {
        "type": "message_delta",
        "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": None},
        "usage": {"output_tokens": usage["output_tokens"]},
    }
    yield {"type": "message_stop"}


def anthropic_fields(window: ContextWindow, **cache: Any) -> dict[str, Any]:
    """The window as a request's `system` (left out when there is none) and `messages`,
    with `to_anthropic`'s cache arguments."""
    fields = to_anthropic(window, **cache)
    if not fields["system"]:
        del fields["system"]
    return fields


ANTHROPIC_WIRE = Wire(
    render=anthropic_fields,
    reply=reply_from_message,
    gatherer=MessageGatherer,
    answer=message_from_reply,
    answer_stream=events_from_reply,
)
"""Anthropic's Messages API, as a `ChatTurns` speaks it upstream."""


# -- requests: the turns to store, the fields to forward, the window's rendering ----------------

TEXT_ONLY = "turnkeeper stores text, tool use and tool results"
SERVER_TOOL = (
    "server tools cannot be remembered (their results are Anthropic's to keep); give tools "
    "without a `type`, or `custom`, or call without a session"
)


@dataclass(frozen=True, slots=True)
class MessagesTurn:
    """An Anthropic Messages request read for a remembered session (see the module).

    `system` is the request's system prompt as a message (stored only into an empty session,
    as the proxy does); `turns` the new turns; `forward` the fields sent upstream beside the
    window (model, max_tokens, tools, sampling, metadata without the session); `cache` the
    `cache_control` mark to place when the request asks for caching, and `breakpoints` how many
    marks the window may take (four, less those on tools)."""

    system: NewMessage | None
    turns: tuple[NewMessage, ...]
    forward: dict[str, Any]
    cache: Mapping[str, Any] | None
    breakpoints: int

    @classmethod
    def read(cls, body: Mapping[str, Any], settings: Settings) -> MessagesTurn:
        """Read `body` (without turnkeeper's session field). Raises `InvalidInput` naming the
        field for what cannot be stored or translated; nothing has been stored then."""
        _check_tools(body)
        system = _system_message(body.get("system"))
        located = list(_new_turns(body["messages"]))
        for where, message in located + ([("system", system)] if system else []):
            _check(where, message, settings)
        turns = tuple(message for _, message in located)
        marks = sum(1 for tool in body.get("tools") or () if tool.get("cache_control"))
        forward = {
            name: value
            for name, value in body.items()
            if name not in ("messages", "system", "stream", "cache_control")
        }
        return cls(system, turns, forward, _cache_asked(body), max(CACHE_BREAKPOINTS - marks, 0))

    def new(self, *, session_is_empty: bool) -> list[NewMessage]:
        """The messages to store: the system prompt first into an empty session, then the turns."""
        lead = [self.system] if self.system is not None and session_is_empty else []
        return [*lead, *self.turns]

    def render(self, window: ContextWindow) -> dict[str, Any]:
        """The window as the request's `system` and `messages`, marked for the prompt cache
        when the request asked for caching."""
        if self.cache is None:
            return anthropic_fields(window)
        return anthropic_fields(
            window, cache=self.cache, breakpoints=self.breakpoints,
            min_cache_tokens=min_cache_tokens(str(self.forward.get("model", ""))),
        )  # fmt: skip


def _check_tools(body: Mapping[str, Any]) -> None:
    tools = body.get("tools")
    if tools is None:
        return
    if not isinstance(tools, list):
        raise InvalidInput("tools", "must be a list of tools")
    for index, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            raise InvalidInput(f"tools[{index}]", "must be an object")
        if tool.get("type") not in (None, "custom"):
            raise InvalidInput(f"tools[{index}].type", f"{tool.get('type')!r}: {SERVER_TOOL}")
    thinking = body.get("thinking")
    if tools and isinstance(thinking, Mapping) and thinking.get("type") != "disabled":
        raise InvalidInput(
            "thinking",
            "extended thinking with tools cannot be remembered: a tool loop must send the "
            "signed thinking blocks back, and turnkeeper does not store them",
        )


def _system_message(system: Any) -> NewMessage | None:
    """The request's `system` (text, or text blocks) as a system message, if it says anything."""
    if system is None:
        return None
    if isinstance(system, str):
        text = system
    elif isinstance(system, list):
        text = "\n\n".join(
            _block_text(f"system[{index}]", block) for index, block in enumerate(system)
        )
    else:
        raise InvalidInput("system", "must be text or a list of text blocks")
    return NewMessage(role=Role.SYSTEM, content=text) if text.strip() else None


def _block_text(where: str, block: Any) -> str:
    if not isinstance(block, Mapping) or block.get("type") != "text":
        kind = block.get("type") if isinstance(block, Mapping) else type(block).__name__
        raise InvalidInput(f"{where}.type", f"{kind!r} blocks cannot be stored: {TEXT_ONLY}")
    text = block.get("text")
    if not isinstance(text, str):
        raise InvalidInput(f"{where}.text", "must be text")
    return text


def _new_turns(messages: Sequence[Any]) -> Iterator[tuple[str, NewMessage]]:
    """The turns after the last assistant message, each user message as its tool results (in
    order) then its text; each with the field it came from."""
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping) or message.get("role") not in ("user", "assistant"):
            raise InvalidInput(f"messages[{index}].role", "must be 'user' or 'assistant'")
    last_answer = max(
        (index for index, message in enumerate(messages) if message["role"] == "assistant"),
        default=-1,
    )
    if last_answer == len(messages) - 1:
        raise InvalidInput(
            f"messages[{last_answer}]",
            "there is no new turn after the last assistant message (a prefilled answer cannot "
            "be remembered)",
        )
    for index in range(last_answer + 1, len(messages)):
        yield from _user_turn(f"messages[{index}]", messages[index].get("content"))


def _user_turn(where: str, content: Any) -> Iterator[tuple[str, NewMessage]]:
    if isinstance(content, str):
        yield f"{where}.content", NewMessage(role=Role.USER, content=content)
        return
    if not isinstance(content, list) or not content:
        raise InvalidInput(f"{where}.content", "must be text or a non-empty list of blocks")
    texts = []
    for index, block in enumerate(content):
        at = f"{where}.content[{index}]"
        if isinstance(block, Mapping) and block.get("type") == "tool_result":
            yield f"{at}.content", _tool_result(at, block)
        else:
            texts.append(_block_text(at, block))
    if texts:
        yield f"{where}.content", NewMessage(role=Role.USER, content="\n\n".join(texts))


def _tool_result(where: str, block: Mapping[str, Any]) -> NewMessage:
    call = block.get("tool_use_id")
    if not isinstance(call, str) or not call:
        raise InvalidInput(f"{where}.tool_use_id", "must name the tool_use it answers")
    content = block.get("content", "")
    if isinstance(content, list):
        content = "\n\n".join(
            _block_text(f"{where}.content[{index}]", part) for index, part in enumerate(content)
        )
    elif not isinstance(content, str):
        raise InvalidInput(f"{where}.content", "must be text or a list of text blocks")
    return NewMessage(role=Role.TOOL, content=content, tool_call_id=call)


def _check(where: str, message: NewMessage, settings: Settings) -> None:
    """The checks an append makes, made before anything is stored, naming the request's field."""
    try:
        check_message(
            message, max_bytes=settings.max_message_bytes, max_json_bytes=settings.max_json_bytes
        )
    except InvalidInput as exc:
        raise type(exc)(where, exc.problem) from None


def _cache_asked(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The `cache_control` mark the request asks for: its top-level one (Anthropic's automatic
    caching) or the first on a block of `system` or `messages`; None when it asks for none."""
    top = body.get("cache_control")
    if isinstance(top, Mapping):
        return top
    blocks: list[Any] = (
        list(body.get("system") or []) if isinstance(body.get("system"), list) else []
    )
    for message in body.get("messages") or ():
        content = message.get("content") if isinstance(message, Mapping) else None
        blocks += content if isinstance(content, list) else []
    for block in blocks:
        if isinstance(block, Mapping) and isinstance(block.get("cache_control"), Mapping):
            return dict(block["cache_control"])
    return None
