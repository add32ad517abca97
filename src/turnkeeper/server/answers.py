"""How a provider-compatible route answers a chat turn: the upstream's answer unchanged in shape,
whole as JSON or streamed as the route frames its events. The proxy (`/v1/chat/completions`)
and Anthropic's Messages API (`/v1/messages`) answer alike; only their framing differs."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from fastapi.responses import JSONResponse, Response

from turnkeeper.server.streaming import Chunks, event_stream
from turnkeeper.turns import ChatTurns, PreparedTurn

Framing = Callable[[Chunks], Iterator[str]]
"""A route's events of a stream (see `streaming.relay`)."""


def answer(turns: ChatTurns, prepared: PreparedTurn, *, stream: bool, framing: Framing) -> Response:
    """The answer to a remembered turn (see `ChatTurns.complete` and `ChatTurns.stream`)."""
    if stream:
        return event_stream(framing(turns.stream(prepared)))
    return JSONResponse(turns.complete(prepared).completion)


def pass_through(
    turns: ChatTurns, body: Mapping[str, Any], *, stream: bool, framing: Framing
) -> Response:
    """The upstream's answer to `body`, with nothing stored (no session was named)."""
    if stream:
        return event_stream(framing(turns.llm.stream(body)))
    return JSONResponse(turns.llm.complete(body))
