"""The bead conversation routes, as the Go agents' service gives them, mapped onto sessions
(bead = subject).

`GET /api/v1/conversations/{id}` and `GET /api/v1/beads/{bead_id}/conversation` return the
bead conversation service's `GetConversationResponse` fields; `DELETE` returns
`{success, message}`; `POST …/reset` takes `{"keep_system_message": bool}` and returns the
conversation after the reset.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from turnkeeper.errors import SessionNotFound
from turnkeeper.server.deps import TK, Scope, SessionPath
from turnkeeper.server.problems import PROBLEM_RESPONSES
from turnkeeper.server.schemas import BeadConversation, BeadConversationDeleted, ResetRequest
from turnkeeper.service import Turnkeeper
from turnkeeper.types import Session, SessionStatus

router = APIRouter(prefix="/api/v1", tags=["bead conversations"], responses=PROBLEM_RESPONSES)


def _conversation(tk: Turnkeeper, session: Session) -> BeadConversation:
    return BeadConversation.from_domain(session, tk.history(session))


@router.get("/conversations/{id}")
def get_conversation(id: SessionPath, tk: TK, scope: Scope) -> BeadConversation:
    """The full conversation history of a session (by id, or key)."""
    return _conversation(tk, tk.get_session(id, project=scope))


@router.get("/beads/{bead_id}/conversation")
def get_bead_conversation(
    bead_id: Annotated[str, Path(min_length=1, max_length=255, description="The bead (subject).")],
    tk: TK,
    scope: Scope,
) -> BeadConversation:
    """The conversation of a bead: its live session, else the most recently updated one."""
    for status in (SessionStatus.ACTIVE, None):
        page = tk.list_sessions(project=scope, subject=bead_id, status=status, limit=1)
        if page.items:
            return _conversation(tk, page.items[0])
    raise SessionNotFound(f"bead {bead_id}", scope)


@router.delete("/conversations/{id}")
def delete_conversation(id: SessionPath, tk: TK, scope: Scope) -> BeadConversationDeleted:
    """Delete the session and its messages."""
    tk.delete_session(id, project=scope)
    return BeadConversationDeleted(success=True, message=f"conversation {id} deleted")


@router.post("/conversations/{id}/reset")
def reset_conversation(
    id: SessionPath, body: ResetRequest, tk: TK, scope: Scope
) -> BeadConversation:
    """Clear the history but keep the session (and, if asked, the first system message)."""
    session = tk.reset_session(id, keep_system_message=body.keep_system_message, project=scope)
    return _conversation(tk, session)
