"""A small OpenAI-compatible chat server that records every request it receives.

The only stand-in in the HTTP tests: a real HTTP server on loopback speaking the
`/v1/chat/completions` protocol (whole and streamed) and `GET /v1/models` (a list set in
`Upstream.models`), whose behaviour a test sets through `Upstream.mode`: answer, fail with a status, stall past the client's timeout, or break off
mid-stream; through `Upstream.failures`: fail the next N requests with `fail_status` (and
`Retry-After`, when set), then answer; and through `Upstream.gate`: hold every answer until the
test opens the gate (a slow model whose answer comes when the test says so), or, through
`Upstream.stream_gate`, pause a streamed answer after its first chunk; and through
`Upstream.next_tool_calls`: answer the next request with tool calls.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse


@dataclass
class Upstream:
    """What the fake model does next, and what it was sent."""

    mode: str = "ok"  # ok | error | refuse | slow | break | empty | huge
    delay: float = 5.0
    failures: int = 0
    fail_status: int = 500
    retry_after: str | None = None
    gate: threading.Event | None = None
    """When set, each request is recorded, then answered only once the event is set."""
    stream_gate: threading.Event | None = None
    """When set, a streamed answer sends its first chunk, then the rest once the event is set."""
    cached_tokens: int | None = None
    """When set, `usage` says this many prompt tokens came from the provider's cache
    (`prompt_tokens_details.cached_tokens`, as OpenAI reports it)."""
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    models: list[dict[str, Any]] | None = None
    """What `GET /v1/models` lists; None: the route answers 404, as many local servers do."""
    next_tool_calls: list[dict[str, str]] | None = None
    """When set, the next answer calls these tools (each `{"name", "arguments"}`, ids
    `call_<n>`) instead of saying something; it is cleared as it is used."""

    def reply_for(self, body: dict[str, Any]) -> str:
        last = body["messages"][-1]
        content = last.get("content")
        text = content if isinstance(content, str) else json.dumps(content)
        return f"reply {len(self.requests)} to: {text}"

    def usage_for(self, body: dict[str, Any], reply: str) -> dict[str, Any]:
        prompt = sum(len(str(m.get("content", ""))) // 4 + 3 for m in body["messages"])
        completion = len(reply.split())
        usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        if self.cached_tokens is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": self.cached_tokens}
        return usage


def completion(body: dict[str, Any], reply: str, usage: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body["model"],
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": usage,
        "system_fingerprint": "fp_test",
    }


def chunk(body: dict[str, Any], delta: dict[str, Any], finish: str | None = None) -> str:
    data = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body["model"],
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(data)}\n\n"


def tool_calls_answer(
    body: dict[str, Any], calls: list[dict[str, str]], usage: dict[str, Any], turn: int
) -> Response:
    """An answer calling `calls`, whole or streamed (each call's arguments in two pieces)."""
    made = [
        {"id": f"call_{turn}_{n}", "type": "function", "function": dict(call)}
        for n, call in enumerate(calls)
    ]
    if not body.get("stream"):
        answer = completion(body, "", usage)
        answer["choices"][0]["message"] = {"role": "assistant", "content": None, "tool_calls": made}
        answer["choices"][0]["finish_reason"] = "tool_calls"
        return JSONResponse(answer)

    async def events() -> AsyncIterator[str]:
        yield chunk(body, {"role": "assistant", "content": None})
        for n, call in enumerate(made):
            arguments = call["function"]["arguments"]
            head = {"index": n, "id": call["id"], "type": "function"}
            name = {"name": call["function"]["name"], "arguments": arguments[:5]}
            yield chunk(body, {"tool_calls": [head | {"function": name}]})
            rest = {"index": n, "function": {"arguments": arguments[5:]}}
            yield chunk(body, {"tool_calls": [rest]})
        yield chunk(body, {}, finish="tool_calls")
        yield "data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


async def recorded(
    request: Request,
    requests: list[dict[str, Any]],
    headers: list[dict[str, str]],
    gate: threading.Event | None,
) -> dict[str, Any]:
    """The request's JSON body, once it and its headers are recorded and `gate` (if any) is
    open: what every recording model does first."""
    body: dict[str, Any] = await request.json()
    requests.append(body)
    headers.append(dict(request.headers))
    if gate is not None:
        await asyncio.to_thread(gate.wait, 60)
    return body


def make_app(state: Upstream) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        body = await recorded(request, state.requests, state.headers, state.gate)
        if state.failures > 0:
            state.failures -= 1
            headers = {"Retry-After": state.retry_after} if state.retry_after else None
            return JSONResponse(
                {"error": {"message": f"failing on purpose ({state.failures} more)"}},
                status_code=state.fail_status,
                headers=headers,
            )
        if state.mode == "error":
            return JSONResponse({"error": {"message": "model overloaded"}}, status_code=500)
        if state.mode == "refuse":
            return JSONResponse({"error": {"message": "unknown model"}}, status_code=404)
        if state.mode == "slow":
            await asyncio.sleep(state.delay)
        reply = "" if state.mode == "empty" else state.reply_for(body)
        if state.mode == "huge":  # past the 1 MiB a stored message may hold
            reply = "word " * 300_000
        usage = state.usage_for(body, reply)
        calls, state.next_tool_calls = state.next_tool_calls, None
        if calls is not None:
            return tool_calls_answer(body, calls, usage, len(state.requests))
        if not body.get("stream"):
            return JSONResponse(completion(body, reply, usage))

        async def events() -> AsyncIterator[str]:
            yield chunk(body, {"role": "assistant", "content": ""})
            if state.stream_gate is not None:
                await asyncio.to_thread(state.stream_gate.wait, 60)
            for index, word in enumerate(reply.split(" ")):
                yield chunk(body, {"content": word if index == 0 else " " + word})
                if state.mode == "break" and index == 1:
                    yield 'data: {"error": {"message": "the model crashed"}}\n\n'
                    return
            yield chunk(body, {}, finish="stop")
            if (body.get("stream_options") or {}).get("include_usage"):
                usage_chunk = {
                    "id": "chatcmpl-test",
                    "object": "chat.completion.chunk",
                    "created": int(time.time()),
                    "model": body["model"],
                    "choices": [],
                    "usage": usage,
                }
                yield f"data: {json.dumps(usage_chunk)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    @app.get("/v1/models")
    async def models(request: Request) -> Response:
        state.headers.append(dict(request.headers))
        if state.mode == "error":
            return JSONResponse({"error": {"message": "model overloaded"}}, status_code=500)
        if state.models is None:
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        return JSONResponse({"object": "list", "data": state.models})

    return app
