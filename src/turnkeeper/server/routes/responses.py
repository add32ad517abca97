"""OpenAI's Responses API (`POST /v1/responses`, `GET /v1/responses/{id}`), as the official
`openai` client and the openai-agents SDK's default model call it, answered over chat
completions by the configured upstream with turnkeeper's memory (`turnkeeper.responses` says
how). Errors are in OpenAI's shape, a bad or untranslatable value a 400 naming it; a stream
that fails part-way ends with a `response.failed` event."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request

from turnkeeper.errors import TurnkeeperError
from turnkeeper.responses import Responses, ResponseStream
from turnkeeper.server.deps import AttemptDep, Scope, SessionHeader, Turns
from turnkeeper.server.openai_schemas import ResponseCreate, ResponseObject
from turnkeeper.server.problems import OPENAI_ERRORS, openai_error, problem_for_error, status_for
from turnkeeper.server.streaming import EVENT_SCHEMA, event_stream, relay, sse

router = APIRouter(prefix="/v1/responses", tags=["openai-compatible"], responses=OPENAI_ERRORS)


def _frame(event: dict[str, Any]) -> str:
    return sse(event, event["type"])


def _events(stream: ResponseStream, path: str) -> Iterator[str]:
    def failed(exc: TurnkeeperError) -> str:
        message = openai_error(problem_for_error(exc, instance=path))["error"]["message"]
        code = "rate_limit_exceeded" if status_for(exc) == 429 else "server_error"
        return _frame(stream.failed(message, code))

    return relay(stream, each=_frame, failed=failed, done=lambda: "")


@router.post(
    "",
    response_model=ResponseObject,
    responses={200: {"content": {"text/event-stream": {"schema": EVENT_SCHEMA}}}},
)
def create_response(
    body: ResponseCreate,
    turns: Turns,
    scope: Scope,
    attempt: AttemptDep,
    request: Request,
    x_turnkeeper_session: SessionHeader = None,
) -> Any:
    """A response from the upstream model, remembered in the session `conversation`,
    `previous_response_id` or the header names (or a new one). A retry (the SDK's own, or with
    the same `Idempotency-Key`) stores each turn once."""
    responses = Responses(turns)
    parsed = responses.parse(body.model_dump(exclude_unset=True))
    ref = x_turnkeeper_session
    if parsed.stream:
        stream = responses.stream(parsed, project=scope, session=ref, attempt=attempt)
        return event_stream(_events(stream, request.url.path))
    return responses.create(parsed, project=scope, session=ref, attempt=attempt)


@router.get("/{response_id}")
def retrieve_response(
    response_id: Annotated[str, Path(min_length=1, max_length=300, description="resp_…")],
    turns: Turns,
    scope: Scope,
) -> ResponseObject:
    """A stored response; 404 naming it when the caller's project has no such response."""
    return ResponseObject(**Responses(turns).retrieve(response_id, project=scope))
