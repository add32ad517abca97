"""Server-sent events: the framing, the one relay loop, and the one response type every stream
goes out as.

Every stream the service sends (the chat route, the OpenAI-compatible proxy, the UI's chat box)
relays an upstream stream the same way: each chunk framed as it arrives, a failure part-way sent
as one last event in the stream's own error shape (the status line went out long ago), the
upstream always closed, and a closing event only after a complete stream. `relay` is that loop;
the routes only say how to frame a chunk, an error and the end."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from fastapi.responses import StreamingResponse

from turnkeeper.errors import TurnkeeperError
from turnkeeper.llm import delta_text

DONE = "data: [DONE]\n\n"


def sse(data: Any, event: str | None = None) -> str:
    """One event: an optional `event:` line and the data as one line of JSON."""
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, separators=(',', ':'), default=str)}\n\n"


class Chunks(Protocol):
    """A stream of completion chunks that must be closed (`ChatStream`, `TurnStream`)."""

    def __iter__(self) -> Iterator[dict[str, Any]]: ...

    def close(self) -> None: ...


def relay(
    chunks: Chunks,
    *,
    each: Callable[[dict[str, Any]], str | None],
    failed: Callable[[TurnkeeperError], str],
    done: Callable[[], str],
) -> Iterator[str]:
    """The events of `chunks`: `each(chunk)` as they arrive (None: nothing to send), then
    `done()`; a failure part-way ends the stream with `failed(error)` instead. The upstream is
    closed however the stream ends (a client that goes away included)."""
    try:
        for chunk in chunks:
            if (event := each(chunk)) is not None:
                yield event
    except TurnkeeperError as exc:
        yield failed(exc)
        return
    finally:
        chunks.close()
    yield done()


def delta(chunk: dict[str, Any]) -> str | None:
    """A `delta` event with the text a completion chunk adds, if it adds any."""
    text = delta_text(chunk)
    return sse({"content": text}, "delta") if text else None


def event_stream(events: Iterator[str]) -> StreamingResponse:
    """Send `events` as they are produced. A sync iterator: Starlette pulls it from its thread
    pool, which is what lets a blocking upstream read feed the stream."""
    return StreamingResponse(
        events,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


EVENT_SCHEMA = {
    "type": "object",
    "description": "One server-sent event: its name (absent for unnamed events) and JSON data.",
    "properties": {"event": {"type": "string"}, "data": {"type": "string"}},
}
"""The OpenAPI schema of one event of a `text/event-stream` answer."""


def relayed_answer(
    description: str, errors: dict[int | str, dict[str, Any]]
) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI `responses` of a route that hands back an upstream's answer unchanged: a
    JSON object, or its event stream, and `errors` in the provider's shape."""
    return {
        200: {
            "description": description,
            "content": {
                "application/json": {"schema": {"type": "object"}},
                "text/event-stream": {"schema": EVENT_SCHEMA},
            },
        },
        **errors,
    }
