"""FastAPI dependencies, each declared once as an `Annotated` alias routes use by name.

What a route needs (the service, the chat turns, the caller and the project it works in) comes
from `app.state`, set by the app factory; tests swap any of them with
`app.dependency_overrides` instead of patching modules.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, TypeVar

from fastapi import Depends, Header, Path, Query, Request
from fastapi.security import HTTPAuthorizationCredentials
from starlette.concurrency import run_in_threadpool

from turnkeeper.callers import Caller, PerCallerLimit, resolve_session
from turnkeeper.config import Settings
from turnkeeper.errors import MalformedRequest
from turnkeeper.server.auth import authenticate, authenticate_remembered, bearer, key_credentials
from turnkeeper.service import Turnkeeper
from turnkeeper.turns import Attempt, ChatTurns
from turnkeeper.validation import NAME_PATTERN

T = TypeVar("T")

# Every dependency here is async: FastAPI runs a sync dependency in the thread pool, and a
# request's chain (caller, scope, session, attempt) was six hand-offs to a thread and back, each
# a wake-up of the event loop, for work that is a few attribute reads. Only what reads the
# database (authenticating without the gate, resolving a key across projects) takes a thread,
# and only when it has to. The getters of `app.state` never wait for a thread either (a probe
# must not queue behind requests; see routes.health).


def _from_state(name: str, kind: type[T]) -> Callable[[Request], Awaitable[T]]:
    """The dependency answering `app.state.<name>`, a `kind` the app factory put there."""

    async def get(request: Request) -> T:
        value: T = getattr(request.app.state, name)
        return value

    return get


get_tk = _from_state("tk", Turnkeeper)
get_turns = _from_state("turns", ChatTurns)
get_settings = _from_state("settings", Settings)
get_searches = _from_state("searches", PerCallerLimit)


async def get_caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Caller:
    """The caller `gate.CallerGate` authenticated before the body was read (or, for a request
    without a body, or an app served without the gate, authenticated here)."""
    known: Caller | None = getattr(request.state, "caller", None)
    if known is not None:
        return known
    caller = authenticate_remembered(request, credentials)
    if caller is None:
        caller = await run_in_threadpool(authenticate, request, credentials)
    request.state.caller = caller  # what an error answer may tell this caller (`problems`)
    return caller


async def get_key_caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(key_credentials)],
) -> Caller:
    """`get_caller` for a route whose clients may send the key as `x-api-key` (Anthropic's
    SDKs do); `gate.CallerGate` reads it there too."""
    return await get_caller(request, credentials)


ProjectQuery = Annotated[
    str | None,
    Query(
        pattern=NAME_PATTERN,
        description="Project to work in. A project key may only name its own; an admin key "
        "names any (keys are looked up in it; default: the configured default project).",
    ),
]
"""The `project` query parameter of every route that works in a project."""


async def get_scope(
    caller: Annotated[Caller, Depends(get_caller)], project: ProjectQuery = None
) -> str | None:
    """The project the request works in (None: an admin working across all projects)."""
    return caller.scope(project)


async def get_key_scope(
    caller: Annotated[Caller, Depends(get_key_caller)], project: ProjectQuery = None
) -> str | None:
    """`get_scope`, for the caller of `get_key_caller`."""
    return caller.scope(project)


TK = Annotated[Turnkeeper, Depends(get_tk)]
Turns = Annotated[ChatTurns, Depends(get_turns)]
AppSettings = Annotated[Settings, Depends(get_settings)]
Searches = Annotated[PerCallerLimit, Depends(get_searches)]
"""The turns at search each API key may take at once (REST, UI and MCP share them)."""
CallerDep = Annotated[Caller, Depends(get_caller)]
Scope = Annotated[str | None, Depends(get_scope)]
KeyScope = Annotated[str | None, Depends(get_key_scope)]
"""`Scope` for a route whose clients send the key as `x-api-key` or `Authorization`."""
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


async def get_session_ref(session: SessionPath, scope: Scope, tk: TK) -> str:
    if scope is not None:  # what `resolve_session` returns without reading anything
        return session
    return await run_in_threadpool(resolve_session, tk, session, scope)


SessionRef = Annotated[str, Depends(get_session_ref)]
"""The `{session}` path parameter, resolved for the caller (see `resolve_session`)."""


@dataclass(frozen=True, slots=True)
class SessionAccess:
    """What a route on one session needs, solved as one dependency: the session (resolved for
    the caller), the project the request works in, and the service."""

    ref: str
    scope: str | None
    tk: Turnkeeper


async def get_session_access(
    request: Request,
    session: SessionPath,
    caller: CallerDep,
    project: ProjectQuery = None,
) -> SessionAccess:
    """`SessionRef`, `Scope` and `TK` at once, for the hottest routes. FastAPI solves every
    dependency of a route afresh on each request (a cached one too: its own dependencies are
    solved again before the cache is looked at), at some tens of microseconds each; the three
    separate ones cost a chain of eight where this costs three (this, the caller, the bearer
    token). The parameters are the same ones, so the OpenAPI schema does not change."""
    tk: Turnkeeper = request.app.state.tk
    scope = caller.scope(project)
    if scope is not None:  # what `resolve_session` returns without reading anything
        return SessionAccess(session, scope, tk)
    ref = await run_in_threadpool(resolve_session, tk, session, scope)
    return SessionAccess(ref, scope, tk)


SessionAccessDep = Annotated[SessionAccess, Depends(get_session_access)]
"""The `{session}` path parameter resolved for the caller, with its scope and the service."""


IDEMPOTENCY_KEY = "Idempotency-Key"


async def get_attempt(
    request: Request,
    idempotency_key: Annotated[
        str | None,
        Header(
            min_length=1,
            max_length=255,
            description="Makes a retry of this request store nothing twice (IETF httpapi "
            "Idempotency-Key): the same key in the same session names the same messages; "
            "reused for other messages it is a 422 and nothing is stored; sent more than once, "
            "a 400.",
        ),
    ] = None,
    x_stainless_retry_count: Annotated[
        int | None,
        Header(ge=0, description="Sent by the OpenAI SDKs: above 0, this request is a retry."),
    ] = None,
) -> Attempt:
    """How a turn's request arrived (its retry evidence and request id). One `Idempotency-Key`
    at most: several would be joined into one value ("one, two" is not "two, one"), a key no
    client meant."""
    sent = len(request.headers.getlist(IDEMPOTENCY_KEY))
    if sent > 1:
        raise MalformedRequest(IDEMPOTENCY_KEY, f"sent {sent} times; send it once")
    return Attempt(
        idempotency_key=idempotency_key,
        retry=bool(x_stainless_retry_count),
        request_id=getattr(request.state, "request_id", None),
    )


AttemptDep = Annotated[Attempt, Depends(get_attempt)]

SessionHeader = Annotated[
    str | None,
    Header(
        alias="X-Turnkeeper-Session",
        max_length=255,
        description="Session id or key to remember in.",
    ),
]
"""The session a provider-compatible request remembers in (the proxy, the Responses API, the
Anthropic Messages API)."""
