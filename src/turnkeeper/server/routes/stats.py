"""Statistics: per session (`/v1/sessions/{session}/stats`) and per project (`/v1/stats`)."""

from __future__ import annotations

from fastapi import APIRouter

from turnkeeper.server.deps import TK, Scope, SessionRef
from turnkeeper.server.problems import PROBLEM_RESPONSES
from turnkeeper.server.schemas import ProjectStatsPublic, SessionStatsPublic

router = APIRouter(tags=["stats"], responses=PROBLEM_RESPONSES)


@router.get("/v1/sessions/{session}/stats")
def session_stats(session: SessionRef, tk: TK, scope: Scope) -> SessionStatsPublic:
    """Message counts (by role, user-facing vs internal), token totals and time span."""
    return SessionStatsPublic.from_domain(tk.session_stats(session, project=scope))


@router.get("/v1/stats")
def project_stats(tk: TK, scope: Scope) -> list[ProjectStatsPublic]:
    """Totals of the caller's project (an admin: of `project`, or of every project by name)."""
    return [ProjectStatsPublic.from_domain(stats) for stats in tk.project_stats(scope)]
