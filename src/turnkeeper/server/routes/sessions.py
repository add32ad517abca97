"""`/v1/sessions`: create (or get-or-create by key), list, get, update, reset, archive, delete."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from turnkeeper import metrics
from turnkeeper.server.deps import TK, CallerDep, Scope, SessionRef
from turnkeeper.server.problems import PROBLEM_RESPONSES
from turnkeeper.server.schemas import (
    ResetRequest,
    SessionCreate,
    SessionPage,
    SessionPublic,
    SessionUpdate,
)
from turnkeeper.types import SessionStatus

router = APIRouter(prefix="/v1/sessions", tags=["sessions"], responses=PROBLEM_RESPONSES)


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    responses={200: {"model": SessionPublic, "description": "get_or_create found a live one"}},
)
def create_session(
    body: SessionCreate, tk: TK, caller: CallerDep, response: Response
) -> SessionPublic:
    """Create a session. With `get_or_create` and a `key`, the live session holding the key is
    returned (200) if there is one; otherwise a new one is made (201)."""
    project = caller.scope(body.project)
    if body.get_or_create and body.key is not None:
        session, created = tk.get_or_create_session(body.key, project=project, **body.fields())
    else:
        session, created = tk.create_session(key=body.key, project=project, **body.fields()), True
    metrics.stored(session, created, ())
    response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    return SessionPublic.from_domain(session)


@router.get("")
def list_sessions(
    tk: TK,
    scope: Scope,
    subject: Annotated[
        str | None, Query(max_length=255, description="Only sessions about this subject.")
    ] = None,
    kind: Annotated[str | None, Query(max_length=100)] = None,
    status: SessionStatus | None = None,
    key: Annotated[str | None, Query(max_length=255)] = None,
    updated_since: datetime | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    cursor: Annotated[
        str | None, Query(max_length=1000, description="next_cursor of the previous page.")
    ] = None,
) -> SessionPage:
    """Sessions of the caller's project (an admin: all, or `project`), most recently updated
    first, with cursor pagination."""
    page = tk.list_sessions(
        project=scope, subject=subject, kind=kind, status=status, key=key,
        updated_since=updated_since, limit=limit, cursor=cursor,
    )  # fmt: skip
    return SessionPage.from_domain(page)


@router.get("/{session}")
def get_session(session: SessionRef, tk: TK, scope: Scope) -> SessionPublic:
    """A session by id or key (another project's session is a 404)."""
    return SessionPublic.from_domain(tk.get_session(session, project=scope))


@router.patch("/{session}")
def update_session(session: SessionRef, body: SessionUpdate, tk: TK, scope: Scope) -> SessionPublic:
    """Change title, phase, metadata (replaced as a whole) and/or lifetime."""
    return SessionPublic.from_domain(tk.update_session(session, project=scope, **body.fields()))


@router.delete("/{session}", status_code=status.HTTP_204_NO_CONTENT)
def delete_session(session: SessionRef, tk: TK, scope: Scope) -> Response:
    """Delete the session and all its messages."""
    tk.delete_session(session, project=scope)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/{session}/reset")
def reset_session(session: SessionRef, body: ResetRequest, tk: TK, scope: Scope) -> SessionPublic:
    """Clear the history but keep the session (and, if asked, its first system message)."""
    reset = tk.reset_session(session, keep_system_message=body.keep_system_message, project=scope)
    return SessionPublic.from_domain(reset)


@router.post("/{session}/archive")
def archive_session(session: SessionRef, tk: TK, scope: Scope) -> SessionPublic:
    """Archive: still readable, no longer live; its key is free for a new session."""
    return SessionPublic.from_domain(tk.archive_session(session, project=scope))
