"""`POST /v1/messages`: Anthropic's Messages API, so any `anthropic` client program gets a memory
by changing its base URL.

With a session named (`X-Turnkeeper-Session` header, or `metadata.session_id`), the request's
new turns are stored, the window is built by the configured strategy and sent in place of the
request's `system` and `messages` (`turnkeeper.anthropic_turns`), and the reply is stored with its
usage and trace; a retry stores each turn once and asks the model once (`turnkeeper.turns`).
Without one it is a plain pass-through. Either way the upstream's answer comes back unchanged in
shape, whole or as Anthropic's event stream. The key may come as `x-api-key` (what Anthropic's
SDKs send) or `Authorization: Bearer`; errors come back in Anthropic's shape
(`turnkeeper.server.problems.anthropic_error`), so an Anthropic SDK shows their message.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from turnkeeper.anthropic_turns import (
    ANTHROPIC_WIRE,
    NOT_CONFIGURED,
    MessagesTurn,
    anthropic_client,
)
from turnkeeper.callers import resolve_session
from turnkeeper.config import ANTHROPIC_VARIABLES, Settings
from turnkeeper.errors import Unsupported
from turnkeeper.server.answers import answer, pass_through
from turnkeeper.server.anthropic_schemas import MessagesRequest
from turnkeeper.server.deps import AttemptDep, KeyScope, SessionHeader
from turnkeeper.server.problems import ANTHROPIC_ERRORS, anthropic_error, problem_for_error
from turnkeeper.server.streaming import Chunks, relay, relayed_answer, sse
from turnkeeper.service import Turnkeeper
from turnkeeper.turns import ChatTurns, TurnOptions

router = APIRouter(tags=["anthropic-compatible"])

PATH = "/v1/messages"


def open_turns(tk: Turnkeeper, settings: Settings) -> ChatTurns | None:
    """The chat turns against the configured Anthropic upstream (None without one); the app
    opens them in its lifespan and closes them with it."""
    if not settings.configured(ANTHROPIC_VARIABLES):
        return None
    return ChatTurns(tk, anthropic_client(settings), wire=ANTHROPIC_WIRE)


async def get_anthropic_turns(request: Request) -> ChatTurns:
    """The chat turns against the Anthropic upstream (`Unsupported`, a 501 naming the setting
    to set, when this service has none)."""
    turns: ChatTurns | None = request.app.state.anthropic_turns
    if turns is None:
        raise Unsupported(NOT_CONFIGURED)
    return turns


AnthropicTurns = Annotated[ChatTurns, Depends(get_anthropic_turns)]


def _events(chunks: Chunks, request_id: str | None) -> Iterator[str]:
    """Anthropic's events, each named by its type; a failure part-way is an `error` event."""
    return relay(
        chunks,
        each=lambda event: sse(event, str(event.get("type") or "message")),
        failed=lambda exc: sse(
            anthropic_error(problem_for_error(exc, instance=PATH, request_id=request_id)), "error"
        ),
        done=lambda: "",
    )


@router.post(
    PATH,
    responses=relayed_answer(
        "The upstream's message (or its event stream), unchanged in shape", ANTHROPIC_ERRORS
    ),
)
def create_message(
    body: MessagesRequest,
    turns: AnthropicTurns,
    scope: KeyScope,
    attempt: AttemptDep,
    x_turnkeeper_session: SessionHeader = None,
) -> Any:
    """Anthropic's `POST /v1/messages`, with memory when a session is named. A retry (the
    Anthropic SDK's own, or a program's) stores each turn once: see `turnkeeper.turns`."""
    ref, forward = body.session_and_body(x_turnkeeper_session)
    framing = functools.partial(_events, request_id=attempt.request_id)
    if ref is None:
        return pass_through(turns, forward, stream=body.stream, framing=framing)
    turn = MessagesTurn.read(forward, turns.tk.settings)  # before anything is stored
    session, created = turns.session_for(
        resolve_session(turns.tk, ref, scope), project=scope, create=True
    )
    prepared = turns.prepare(
        session, turn.new(session_is_empty=session.message_count == 0), created=created,
        options=TurnOptions(model=body.model), request=turn.forward, render=turn.render,
        attempt=dataclasses.replace(attempt, source="anthropic"),
    )  # fmt: skip
    return answer(turns, prepared, stream=body.stream, framing=framing)
