"""`POST /v1/sessions/{session}/chat`: one user turn answered by the upstream model.

The turn itself (store, build, ask, store) is `turnkeeper.turns.ChatTurns`; this route only
parses the request and formats the answer, as JSON or as server-sent events:

    event: turn    {"message": <stored user message>, "context": <report>, ...}
    event: delta   {"content": "<text>"}              (repeated)
    event: done    <the ChatResponse, as the JSON answer would be>
    event: error   <a problem document>               (instead of done, if the model fails)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request

from turnkeeper.server.deps import TK, AttemptDep, Scope, SessionRef, Turns
from turnkeeper.server.problems import PROBLEM_RESPONSES, UPSTREAM_PROBLEMS, problem_for_error
from turnkeeper.server.schemas import (
    ChatRequest,
    ChatResponse,
    ContextReportPublic,
    MessagePublic,
    SessionPublic,
)
from turnkeeper.server.streaming import EVENT_SCHEMA, delta, event_stream, relay, sse
from turnkeeper.server.trace_schemas import TracePublic, TraceResponse
from turnkeeper.traces import TurnTrace, trace_of, window_diff
from turnkeeper.turns import ChatTurns, PreparedTurn, TurnStream
from turnkeeper.types import Message
from turnkeeper.validation import MAX_WHOLE

router = APIRouter(tags=["chat"], responses=PROBLEM_RESPONSES)


def _answer(
    turns: ChatTurns, prepared: PreparedTurn, reply: Message, trace: TurnTrace | None
) -> ChatResponse:
    window = prepared.window
    return ChatResponse(
        trace=None if trace is None else TracePublic.from_domain(trace),
        session=SessionPublic.from_domain(turns.tk.get_session(prepared.session.id)),
        created=prepared.created,
        message=MessagePublic.from_domain(prepared.turns[-1]),
        reply=MessagePublic.from_domain(reply),
        replayed=prepared.replay is not None,
        context=None if window is None else ContextReportPublic.from_domain(window.report),
    )


def _events(turns: ChatTurns, stream: TurnStream, request: Request) -> Iterator[str]:
    prepared, window = stream.prepared, stream.prepared.window
    yield sse(
        {
            "session_id": prepared.session.id,
            "created": prepared.created,
            "message": MessagePublic.from_domain(prepared.turns[-1]).model_dump(mode="json"),
            "context": None
            if window is None
            else ContextReportPublic.from_domain(window.report).model_dump(mode="json"),
        },
        "turn",
    )
    request_id = getattr(request.state, "request_id", None)
    yield from relay(
        stream,
        each=delta,
        failed=lambda exc: sse(
            problem_for_error(exc, instance=request.url.path, request_id=request_id), "error"
        ),
        done=lambda: sse(_done(turns, stream).model_dump(mode="json"), "done"),
    )


def _done(turns: ChatTurns, stream: TurnStream) -> ChatResponse:
    assert stream.reply is not None  # set once the upstream stream has ended
    return _answer(turns, stream.prepared, stream.reply, stream.trace)


@router.post(
    "/v1/sessions/{session}/chat",
    response_model=ChatResponse,
    responses={
        200: {"content": {"text/event-stream": {"schema": EVENT_SCHEMA}}},
        **UPSTREAM_PROBLEMS,
    },
)
def chat(
    session: SessionRef,
    body: ChatRequest,
    turns: Turns,
    scope: Scope,
    request: Request,
    attempt: AttemptDep,
) -> Any:
    """Answer one user turn: store it, build the window from the stored history (the turn
    included exactly once), ask the upstream model, store the reply with its usage and its
    trace. A failed or timed-out model leaves the user's message stored (502/504); a retry
    (the same `id`, the same `Idempotency-Key`, or the same text while it is unanswered)
    stores nothing twice."""
    found, created = turns.session_for(session, project=scope, create=body.create)
    prepared = turns.prepare(
        found, [body.to_message()], created=created, options=body.options(),
        request=body.upstream_fields(), attempt=dataclasses.replace(attempt, source="chat"),
    )  # fmt: skip
    if body.stream:
        return event_stream(_events(turns, turns.stream(prepared), request))
    result = turns.complete(prepared)
    return _answer(turns, prepared, result.reply, result.trace)


@router.get("/v1/sessions/{session}/messages/{seq}/trace")
def trace(
    session: SessionRef, seq: Annotated[int, Path(ge=1, le=MAX_WHOLE)], tk: TK, scope: Scope
) -> TraceResponse:
    """What the model saw for the reply at `seq`: the window exactly as sent, how it was built
    (strategy, budget, model, encoding, what was kept, dropped and summarized), what it cost,
    and how it differs from the previous turn's window (what entered, what fell out). 404 for
    a message that is not a reply produced by a chat turn."""
    current, previous = trace_of(tk, session, seq, project=scope)
    return TraceResponse.of(current, previous, window_diff(previous, current))
