"""FastAPI dependencies, each declared once as an `Annotated` alias routes use by name.

What a route needs (the service, the chat turns, the caller and the project it works in) comes
from `app.state`, set by the app factory; tests swap any of them with
`app.dependency_overrides` instead of patching modules.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Query, Request
from fastapi.security import HTTPAuthorizationCredentials

from turnkeeper.config import Settings
from turnkeeper.server.auth import Caller, authenticate, bearer
from turnkeeper.service import Turnkeeper
from turnkeeper.turns import ChatTurns

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
SessionRef = Annotated[
    str,
    Path(
        min_length=1,
        max_length=255,
        description="Session id, or key (a key is looked up in the caller's project).",
        examples=["support-42"],
    ),
]
