"""A small Anthropic Messages API server that records every request it receives (and its headers).

The Anthropic stand-in of the HTTP tests, beside `upstream.py` (OpenAI's): a real HTTP server on
loopback speaking `POST /v1/messages`, whole and as Anthropic's event stream (`message_start`,
`ping`, `content_block_start` / `_delta` / `_stop`, `message_delta` with the usage,
`message_stop`). A test sets what it does next through `AnthropicUpstream`: answer, fail with a
status (`mode = "error"`, or the next `failures` requests with `fail_status`), refuse, stall,
break off mid-stream with an `error` event, answer with a tool use, report prompt-cache reads
and writes, or hold every answer until the test opens `gate`.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from .upstream import recorded


@dataclass
class AnthropicUpstream:
    """What the fake Anthropic model does next, and what it was sent."""

    mode: str = "ok"  # ok | error | refuse | slow | break
    delay: float = 5.0
    failures: int = 0
    fail_status: int = 529
    gate: threading.Event | None = None
    """When set, each request is recorded, then answered only once the event is set."""
    tool_use: dict[str, Any] | None = None
    """When set (`{"name", "input"}`), the answer ends with this tool use (`stop_reason:
    tool_use`)."""
    cache_read: int | None = None
    cache_creation: int | None = None
    """When set, `usage` reports these prompt-cache reads and writes, as Anthropic does."""
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    def reset(self) -> AnthropicUpstream:
        """Answering normally, nothing received yet."""
        self.mode, self.delay, self.failures, self.fail_status = "ok", 5.0, 0, 529
        self.gate, self.tool_use = None, None
        self.cache_read = self.cache_creation = None
        self.requests.clear()
        self.headers.clear()
        return self

    def reply_for(self, body: dict[str, Any]) -> str:
        """What the model says: the request's last text, whatever shape it came in (a fuzzed
        request passed through is answered too)."""
        last = body["messages"][-1] if body.get("messages") else {}
        content = last.get("content") if isinstance(last, dict) else last
        if isinstance(content, list):
            content = " | ".join(
                str(block.get("text") or block.get("content") or block.get("type"))
                if isinstance(block, dict)
                else str(block)
                for block in content
            )
        return f"reply {len(self.requests)} to: {content}"

    def usage_for(self, body: dict[str, Any], reply: str) -> dict[str, Any]:
        prompt = len(json.dumps(body.get("system", ""))) // 4 + sum(
            len(json.dumps(message)) // 4 + 3 for message in body.get("messages") or ()
        )
        usage: dict[str, Any] = {"input_tokens": prompt, "output_tokens": len(reply.split())}
        usage["cache_read_input_tokens"] = self.cache_read
        usage["cache_creation_input_tokens"] = self.cache_creation
        return usage

    def content_for(self, reply: str) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = [{"type": "text", "text": reply}]
        if self.tool_use is not None:
            blocks.append(
                {"type": "tool_use", "id": f"toolu_{len(self.requests):02d}", **self.tool_use}
            )
        return blocks


def _event(data: dict[str, Any]) -> str:
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n"


def _error(status: int, kind: str, message: str) -> JSONResponse:
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return JSONResponse(body, status_code=status)


def make_anthropic_app(state: AnthropicUpstream) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/messages")
    async def messages(request: Request) -> Response:
        body = await recorded(request, state.requests, state.headers, state.gate)
        if state.failures > 0:
            state.failures -= 1
            return _error(state.fail_status, "overloaded_error", "failing on purpose")
        if state.mode == "error":
            return _error(500, "api_error", "the model broke")
        if state.mode == "refuse":
            return _error(400, "invalid_request_error", "max_tokens: too large for this model")
        if state.mode == "slow":
            await asyncio.sleep(state.delay)
        reply = state.reply_for(body)
        usage = state.usage_for(body, reply)
        content = state.content_for(reply)
        stop = "tool_use" if state.tool_use is not None else "end_turn"
        message = {
            "id": f"msg_{len(state.requests):04d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        if not body.get("stream"):
            return JSONResponse(message)

        async def events() -> AsyncIterator[str]:
            opening = usage | {"output_tokens": 1}
            yield _event(
                {
                    "type": "message_start",
                    "message": message | {"content": [], "stop_reason": None, "usage": opening},
                }
            )
            yield _event({"type": "ping"})
            for index, block in enumerate(content):
                async for event in _block_events(index, block, state.mode == "break"):
                    yield event
                    if event.startswith("event: error"):
                        return
            yield _event(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": usage["output_tokens"]},
                }
            )
            yield _event({"type": "message_stop"})

        return StreamingResponse(events(), media_type="text/event-stream")

    return app


async def _block_events(index: int, block: dict[str, Any], breaks: bool) -> AsyncIterator[str]:
    """One content block's events: text word by word, a tool use's input in two pieces."""
    if block["type"] == "text":
        yield _event(
            {"type": "content_block_start", "index": index,
             "content_block": {"type": "text", "text": ""}}
        )  # fmt: skip
        for number, word in enumerate(block["text"].split(" ")):
            text = word if number == 0 else f" {word}"
            delta = {"type": "text_delta", "text": text}
            yield _event({"type": "content_block_delta", "index": index, "delta": delta})
            if breaks and number == 1:
                error = {"type": "overloaded_error", "message": "Overloaded"}
                yield _event({"type": "error", "error": error})
                return
    else:
        yield _event(
            {"type": "content_block_start", "index": index, "content_block": block | {"input": {}}}
        )
        whole = json.dumps(block["input"])
        for piece in (whole[: len(whole) // 2], whole[len(whole) // 2 :]):
            delta = {"type": "input_json_delta", "partial_json": piece}
            yield _event({"type": "content_block_delta", "index": index, "delta": delta})
    yield _event({"type": "content_block_stop", "index": index})
