"""`POST /v1/chat/completions`: an OpenAI-compatible endpoint that gives any OpenAI client
program a memory by changing its base URL.

With a session named (`X-Turnkeeper-Session` header, or `metadata.session_id`), the stored
history is put in front of the request's new turns under the configured strategy, the request
is forwarded, and the new turns and the reply are stored (`turnkeeper.turns`). Without one it
is a plain pass-through. Either way the upstream's answer comes back unchanged in shape, whole
or as its own stream of `data:` chunks ending in `data: [DONE]`. Errors come back in OpenAI's
shape (`turnkeeper.server.problems.openai_error`), so an OpenAI SDK shows their message.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from fastapi import APIRouter

from turnkeeper.callers import resolve_session
from turnkeeper.server.answers import answer, pass_through
from turnkeeper.server.deps import AttemptDep, Scope, SessionHeader, Turns
from turnkeeper.server.problems import OPENAI_ERRORS, openai_error, problem_for_error
from turnkeeper.server.schemas import ProxyRequest
from turnkeeper.server.streaming import DONE, Chunks, relay, relayed_answer, sse
from turnkeeper.turns import TurnOptions, new_turns_from_openai

router = APIRouter(tags=["openai-compatible"])


def _relay(chunks: Chunks) -> Iterator[str]:
    """The chunks in OpenAI's framing; a failure part-way is an `error` chunk, as OpenAI's."""
    return relay(
        chunks,
        each=sse,
        failed=lambda exc: sse(
            openai_error(problem_for_error(exc, instance="/v1/chat/completions"))
        ),
        done=lambda: DONE,
    )


@router.post(
    "/v1/chat/completions",
    responses=relayed_answer(
        "The upstream's chat completion (or its event stream), unchanged", OPENAI_ERRORS
    ),
)
def chat_completions(
    body: ProxyRequest,
    turns: Turns,
    scope: Scope,
    attempt: AttemptDep,
    x_turnkeeper_session: SessionHeader = None,
) -> Any:
    """OpenAI's `POST /chat/completions`, with memory when a session is named. A retry (the
    OpenAI SDK's own, or a program's) stores each turn once: see `turnkeeper.turns`."""
    ref, forward = body.session_and_body(x_turnkeeper_session)
    if ref is None:
        return pass_through(turns, forward, stream=body.stream, framing=_relay)
    ref = resolve_session(turns.tk, ref, scope)
    session, created = turns.session_for(ref, project=scope, create=True)
    new = new_turns_from_openai(body.messages, session_is_empty=session.message_count == 0)
    prepared = turns.prepare(
        session, new, created=created, options=TurnOptions(model=body.model), request=forward,
        attempt=dataclasses.replace(attempt, source="proxy"),
    )  # fmt: skip
    return answer(turns, prepared, stream=body.stream, framing=_relay)
