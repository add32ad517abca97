"""FastAPI dependencies, each declared once as an `Annotated` alias routes use by name.

What a route needs (the service, the chat turns, the caller and the project it works in) comes
from `app.state`, set by the app factory; tests swap any of them with
`app.dependency_overrides` instead of patching modules.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Path, Query, Request
from fastapi.security import HTTPAuthorizationCredentials

from turnkeeper.callers import Caller, resolve_session
from turnkeeper.config import Settings
from turnkeeper.server.auth import authenticate, bearer
from turnkeeper.service import Turnkeeper
from turnkeeper.turns import Attempt, ChatTurns

# The three getters below only read `app.state`: async, so they run on the event loop and
# never wait for a thread (a probe must not queue behind requests; see routes.health).


async def get_tk(request: Request) -> Turnkeeper:
    tk: Turnkeeper = request.app.state.tk
    return tk


async def get_turns(request: Request) -> ChatTurns:
    turns: ChatTurns = request.app.state.turns
    return turns


async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Caller:
    """The caller `gate.CallerGate` authenticated before the body was read (or, for an app
    served without the gate, authenticated here)."""
    caller: Caller | None = getattr(request.state, "caller", None)
    return caller if caller is not None else authenticate(request, credentials)


def get_scope(
    caller: Annotated[Caller, Depends(get_caller)],
    project: Annotated[
        str | None,
        Query(
            pattern=r"^[A-Za-z0-9][A-Za-z0-9._:@/+=~-]{0,254}$",
            description="Project to work in. A project key may only name its own; an admin key "
            "names any (keys are looked up in it; default: the configured default project).",
        ),
    ] = None,
) -> str | None:
    """The project the request works in (None: an admin working across all projects)."""
    return caller.scope(project)


TK = Annotated[Turnkeeper, Depends(get_tk)]
Turns = Annotated[ChatTurns, Depends(get_turns)]
AppSettings = Annotated[Settings, Depends(get_settings)]
CallerDep = Annotated[Caller, Depends(get_caller)]
Scope = Annotated[str | None, Depends(get_scope)]
SessionPath = Annotated[
    str,
    Path(
        min_length=1,
        max_length=255,
        description="Session id, or key (a key is looked up in the caller's project; an admin "
        "key without `project` finds it in whichever project holds it).",
        examples=["support-42"],
    ),
]


def get_session_ref(session: SessionPath, scope: Scope, tk: TK) -> str:
    return resolve_session(tk, session, scope)


SessionRef = Annotated[str, Depends(get_session_ref)]
"""The `{session}` path parameter, resolved for the caller (see `resolve_session`)."""


def get_attempt(
    request: Request,
    idempotency_key: Annotated[
        str | None,
        Header(
            min_length=1,
            max_length=255,
            description="Makes a retry of this request store nothing twice (IETF httpapi "
            "Idempotency-Key): the same key in the same session names the same messages; "
            "reused for other messages it is a 422 and nothing is stored.",
        ),
    ] = None,
    x_stainless_retry_count: Annotated[
        int | None,
        Header(ge=0, description="Sent by the OpenAI SDKs: above 0, this request is a retry."),
    ] = None,
) -> Attempt:
    """How a turn's request arrived (its retry evidence and request id)."""
    return Attempt(
        idempotency_key=idempotency_key,
        retry=bool(x_stainless_retry_count),
        request_id=getattr(request.state, "request_id", None),
    )


AttemptDep = Annotated[Attempt, Depends(get_attempt)]
