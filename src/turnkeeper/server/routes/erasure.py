"""`/v1/erasures` and the legal holds (`/v1/sessions/{s}/legal-hold`,
`/v1/projects/{p}/legal-hold`, `/v1/legal-holds`): erasing sessions for good, and what stops it
(docs/privacy.md)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response, status

from turnkeeper.callers import resolve_session
from turnkeeper.server.deps import TK, CallerDep, Scope, SessionRef
from turnkeeper.server.erasure_schemas import (
    ErasureReceiptPublic,
    ErasureRequest,
    LegalHoldPublic,
)
from turnkeeper.server.problems import PROBLEM_RESPONSES
from turnkeeper.types import LegalHold
from turnkeeper.validation import NAME_PATTERN

router = APIRouter(tags=["erasure"], responses=PROBLEM_RESPONSES)

ProjectPath = Annotated[
    str, Path(pattern=NAME_PATTERN, description="The project (a project key: its own only).")
]


@router.post("/v1/erasures")
def erase(body: ErasureRequest, tk: TK, caller: CallerDep) -> ErasureReceiptPublic:
    """Erase sessions for good and answer the receipt: by `subject`, by `session` (and its
    branches), or every session of `project`. Messages, summaries, traces, the search index,
    agent states, turn records, cached entries and (encrypted) data keys go; each erased id
    answers 410 from then on. Sessions under a legal hold are kept and listed in `held`. 422
    names the field when nothing (or both subject and session) is given; 403 for a project key
    naming another project; 404 for an unknown session."""
    scope = caller.scope(body.project)
    named = body.subject is not None or body.session is not None or body.project is not None
    session = None if body.session is None else resolve_session(tk, body.session, scope)
    receipt = tk.erase(
        subject=body.subject,
        session=session,
        project=scope if named else None,  # naming nothing is a 422, never the key's project
        dry_run=body.dry_run,
    )
    return ErasureReceiptPublic.from_domain(receipt)


@router.put("/v1/sessions/{session}/legal-hold")
def hold_session(session: SessionRef, tk: TK, scope: Scope) -> LegalHoldPublic:
    """Put a legal hold on the session: erasure (and retention) leave it whole until the hold
    is cleared. Setting it again keeps its first time."""
    return _standing(tk.set_legal_hold(session, True, project=scope))


@router.delete("/v1/sessions/{session}/legal-hold", status_code=status.HTTP_204_NO_CONTENT)
def release_session(session: SessionRef, tk: TK, scope: Scope) -> Response:
    """Clear the session's legal hold (its project's, if any, still stands)."""
    tk.set_legal_hold(session, False, project=scope)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.put("/v1/projects/{project}/legal-hold")
def hold_project(project: ProjectPath, tk: TK, caller: CallerDep) -> LegalHoldPublic:
    """Put a legal hold on every session of the project, present and future."""
    return _standing(tk.set_legal_hold(project=caller.scope(project), held=True))


@router.delete("/v1/projects/{project}/legal-hold", status_code=status.HTTP_204_NO_CONTENT)
def release_project(project: ProjectPath, tk: TK, caller: CallerDep) -> Response:
    """Clear the project's legal hold (its sessions' own holds still stand)."""
    tk.set_legal_hold(project=caller.scope(project), held=False)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/v1/legal-holds")
def list_holds(tk: TK, scope: Scope) -> list[LegalHoldPublic]:
    """The legal holds standing in the caller's project (an admin: in `project`, or all)."""
    return [LegalHoldPublic.from_domain(hold) for hold in tk.legal_holds(project=scope)]


def _standing(hold: LegalHold | None) -> LegalHoldPublic:
    assert hold is not None  # just set: it stands
    return LegalHoldPublic.from_domain(hold)
