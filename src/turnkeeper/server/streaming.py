"""Server-sent events: the framing, and the one response type every stream goes out as."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from fastapi.responses import StreamingResponse

DONE = "data: [DONE]\n\n"


def sse(data: Any, event: str | None = None) -> str:
    """One event: an optional `event:` line and the data as one line of JSON."""
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, separators=(',', ':'), default=str)}\n\n"


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
