"""What a provider bills for the input of a chat whose prompts it caches.

Providers bill the part of a request that repeats an earlier request's prefix at a tenth of the
price. The two rules differ, and both are simulated here on the requests a window renders to:

- **OpenAI** caches on its own: the longest prefix a request shares with the previous one,
  token for token, is billed as cached when it is at least `minimum` (1,024) tokens, in whole
  `step`s (128) — so a change at token 1,100 leaves 1,024 cached — at `read_price` (0.1×), the
  rest at 1×. `OpenAIPrefixCache`.
- **Anthropic** caches only at explicit `cache_control` breakpoints (at most 4 per request). A
  breakpoint reads the longest prefix a cache entry holds, checking the block boundaries back
  from it to at most `lookback` (20) blocks before it; every breakpoint whose prefix has at
  least `minimum` (1,024) tokens writes an entry. Read tokens cost 0.1×, tokens written (from the
  read point to the last breakpoint written) 1.25×, the rest 1×. With no breakpoint nothing is
  cached. `AnthropicPromptCache`.

Each starts cold (`cold()`), as a provider's cache is after the break between two sittings.
A request is given as token ids (`OpenAIPrefixCache`: one tuple per message, in order) or as
blocks (`AnthropicPromptCache`: `Block`s in prefix order); `Rendering` turns a window into both.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import turnkeeper
from turnkeeper.tokens import REPLY_PRIMING, TOKENS_PER_MESSAGE, TOKENS_PER_NAME

READ_PRICE = 0.1
WRITE_PRICE = 1.25


@dataclass(frozen=True, slots=True)
class Charge:
    """What one request's input is billed: `read` tokens at the cached price, `written` at the
    cache-write price, the rest at the full price."""

    tokens: int
    read: int = 0
    written: int = 0

    @property
    def cost(self) -> float:
        """In full-price tokens."""
        full = self.tokens - self.read - self.written
        return self.read * READ_PRICE + self.written * WRITE_PRICE + full


@dataclass(slots=True)
class Bill:
    """The charges of many requests, added up."""

    requests: int = 0
    tokens: int = 0
    read: int = 0
    written: int = 0
    cost: float = 0.0

    def add(self, charge: Charge) -> None:
        self.requests += 1
        self.tokens += charge.tokens
        self.read += charge.read
        self.written += charge.written
        self.cost += charge.cost

    def merge(self, other: Bill) -> None:
        self.requests += other.requests
        self.tokens += other.tokens
        self.read += other.read
        self.written += other.written
        self.cost += other.cost

    @property
    def cached_share(self) -> float:
        """The share of input tokens billed as cache reads."""
        return self.read / self.tokens if self.tokens else 0.0

    @property
    def relative(self) -> float:
        """The bill over what the same input costs uncached (1.0: caching saved nothing)."""
        return self.cost / self.tokens if self.tokens else 1.0


def common_prefix(before: Sequence[tuple[int, ...]], now: Sequence[tuple[int, ...]]) -> int:
    """How many tokens two requests (token ids per message) share from the start."""
    shared = 0
    for old, new in zip(before, now, strict=False):
        if old is new or old == new:
            shared += len(new)
            continue
        for a, b in zip(old, new, strict=False):
            if a != b:
                break
            shared += 1
        break
    return shared


@dataclass
class OpenAIPrefixCache:
    """OpenAI's automatic prompt caching, against the previous request."""

    minimum: int = 1024
    step: int = 128
    previous: Sequence[tuple[int, ...]] | None = None

    def cold(self) -> None:
        self.previous = None

    def charge(self, request: Sequence[tuple[int, ...]]) -> Charge:
        shared = common_prefix(self.previous, request) if self.previous is not None else 0
        self.previous = request
        cached = shared // self.step * self.step if shared >= self.minimum else 0
        return Charge(sum(len(message) for message in request), read=cached)


@dataclass(frozen=True, slots=True)
class Block:
    """One content block of an Anthropic request, in prefix order: what identifies it (its
    text, its place among messages), its tokens, and whether it carries a breakpoint."""

    key: str
    tokens: int
    breakpoint: bool = False


class TooManyBreakpoints(ValueError):
    """Anthropic refuses a request with more than four `cache_control` breakpoints."""


@dataclass
class AnthropicPromptCache:
    """Anthropic's prompt caching with explicit breakpoints."""

    minimum: int = 1024
    lookback: int = 20
    max_breakpoints: int = 4
    entries: dict[int, int] = field(default_factory=dict)
    """Cached prefixes: the hash of the blocks up to a breakpoint → that prefix's tokens."""

    def cold(self) -> None:
        self.entries.clear()

    def charge(self, blocks: Sequence[Block]) -> Charge:
        marks = [index for index, block in enumerate(blocks) if block.breakpoint]
        if len(marks) > self.max_breakpoints:
            raise TooManyBreakpoints(f"{len(marks)} breakpoints; at most {self.max_breakpoints}")
        prefixes: list[int] = []
        lengths: list[int] = []
        running, total = 0, 0
        for block in blocks:
            running = hash((running, block.key))
            total += block.tokens
            prefixes.append(running)
            lengths.append(total)
        read = 0
        for mark in marks:
            for index in range(mark, max(mark - self.lookback, 0) - 1, -1):
                if prefixes[index] in self.entries:
                    read = max(read, lengths[index])
                    break
        kept = [mark for mark in marks if lengths[mark] >= self.minimum]
        for mark in kept:
            self.entries[prefixes[mark]] = lengths[mark]
        written = max(lengths[kept[-1]] - read, 0) if kept else 0
        return Charge(total, read=read, written=written)


Encode = Callable[[str], Sequence[int]]


def o200k() -> Encode:
    """Token ids as GPT-4o and later count them (`bpe_openai`, an independent implementation of
    the same encoding turnkeeper counts with, installed with turnkeeper's test extra)."""
    import bpe_openai

    encoding = bpe_openai.get_encoding("o200k_base")
    return encoding.encode_ordinary  # type: ignore[no-any-return]


class Rendering:
    """A window as the token ids of the OpenAI request and the blocks of the Anthropic one.

    OpenAI: each message's ids are its role, name, content, tool calls and tool-call id, with
    the chat format's overhead as placeholder ids (-1…), so a request has exactly as many
    tokens as turnkeeper counts for the window; the reply priming closes it. Anthropic: the same
    encoding stands in for Anthropic's tokenizer, which is not public; each message's first
    block carries its role's overhead. Encodings are remembered per message, as a provider
    would see the same bytes again.
    """

    def __init__(self, encode: Encode | None = None) -> None:
        self.encode = encode or o200k()
        self._messages: dict[tuple[str | None, ...], tuple[int, ...]] = {}
        self._blocks: dict[str, int] = {}
        self.priming = (-9,) * REPLY_PRIMING

    def openai(self, window: turnkeeper.ContextWindow) -> list[tuple[int, ...]]:
        request = [self._openai_message(message) for message in turnkeeper.to_openai(window)]
        request.append(self.priming)
        return request

    def _openai_message(self, message: dict[str, Any]) -> tuple[int, ...]:
        calls = message.get("tool_calls")
        key = (
            message["role"],
            message.get("name"),
            message.get("content"),
            message.get("tool_call_id"),
            json.dumps(calls, sort_keys=True) if calls else None,
        )
        found = self._messages.get(key)
        if found is None:
            ids: list[int] = [-1] * (TOKENS_PER_MESSAGE - 1)
            ids += self.encode(message["role"])
            if message.get("name"):
                ids += [-2] * TOKENS_PER_NAME
                ids += self.encode(message["name"])
            ids.append(-3)
            ids += self.encode(message.get("content") or "")
            for call in message.get("tool_calls") or ():
                ids += [-4] * TOKENS_PER_MESSAGE
                ids += self.encode(str(call.get("id", "")))
                ids += self.encode(str(call["function"].get("name", "")))
                ids += self.encode(str(call["function"].get("arguments", "")))
            ids += self.encode(message.get("tool_call_id") or "")
            found = self._messages[key] = tuple(ids)
        return found

    def anthropic(self, request: dict[str, Any]) -> list[Block]:
        """The blocks of Anthropic Messages arguments (`system` and `messages`), in order."""
        system = request.get("system") or []
        if isinstance(system, str):
            system = [{"type": "text", "text": system}] if system else []
        blocks = [self._block("system", 0, block) for block in system]
        for message in request["messages"]:
            for index, block in enumerate(message["content"]):
                blocks.append(self._block(message["role"], index, block))
        return blocks

    def _block(self, role: str, index: int, block: dict[str, Any]) -> Block:
        bare = {name: value for name, value in block.items() if name != "cache_control"}
        if bare["type"] == "text":  # most blocks: their text says it all
            key = f"{role}:{index}:text:{bare['text']}"
        else:
            key = f"{role}:{index}:{json.dumps(bare, sort_keys=True)}"
        tokens = self._blocks.get(key)
        if tokens is None:
            text = " ".join(str(bare.get(name, "")) for name in ("text", "name", "content"))
            tokens = len(self.encode(text))
            if "input" in bare:
                tokens += len(self.encode(json.dumps(bare["input"])))
            if index == 0:
                tokens += TOKENS_PER_MESSAGE
            self._blocks[key] = tokens
        return Block(key, tokens, breakpoint="cache_control" in block)


BREAKPOINT = {"type": "ephemeral"}


def with_breakpoints(request: dict[str, Any]) -> dict[str, Any]:
    """Anthropic arguments with the usual two breakpoints of a chat: on the system prompt and
    on the last block of the last message (each request then reads what the one before wrote)."""
    system = request.get("system") or ""
    blocks = [{"type": "text", "text": system, "cache_control": BREAKPOINT}] if system else []
    messages = [dict(message, content=list(message["content"])) for message in request["messages"]]
    if messages and messages[-1]["content"]:
        last = messages[-1]["content"]
        last[-1] = {**last[-1], "cache_control": BREAKPOINT}
    return {**request, "system": blocks, "messages": messages}


def library_places_breakpoints() -> bool:
    """Whether `turnkeeper.to_anthropic` can place `cache_control` itself (`cache=True`)."""
    return "cache" in inspect.signature(turnkeeper.to_anthropic).parameters


def anthropic_request(window: turnkeeper.ContextWindow) -> dict[str, Any]:
    """The Anthropic arguments a window is sent as: with the library's own breakpoints where
    `to_anthropic(window, cache=True)` exists, else today's `to_anthropic` with the usual two
    breakpoints added (`with_breakpoints`), so the rule measures the window's stability."""
    if library_places_breakpoints():
        return turnkeeper.to_anthropic(window, cache=True)  # type: ignore[call-arg]
    return with_breakpoints(turnkeeper.to_anthropic(window))


def total(bills: Iterable[Bill]) -> Bill:
    summed = Bill()
    for bill in bills:
        summed.merge(bill)
    return summed
