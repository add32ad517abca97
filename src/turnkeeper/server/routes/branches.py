"""`/v1/sessions/{s}/fork` and `/v1/sessions/{s}/branches`: conversation branches."""

from __future__ import annotations

from fastapi import APIRouter, status

from turnkeeper.server.branch_schemas import BranchList, BranchPublic, ForkRequest
from turnkeeper.server.deps import TK, Scope, SessionRef
from turnkeeper.server.problems import PROBLEM_RESPONSES
from turnkeeper.server.schemas import SessionPublic

router = APIRouter(prefix="/v1/sessions", tags=["sessions"], responses=PROBLEM_RESPONSES)


@router.post("/{session}/fork", status_code=status.HTTP_201_CREATED)
def fork_session(session: SessionRef, body: ForkRequest, tk: TK, scope: Scope) -> SessionPublic:
    """A new session whose history is this one's up to and including `at_seq`; appends to
    either do not show in the other. 422 names `at_seq` past the last seq; 409 for an archived
    session or a key in use; 410 for an expired one."""
    branch = tk.fork(session, body.at_seq, project=scope, **body.fields())
    return SessionPublic.from_domain(branch)


@router.get("/{session}/branches")
def list_branches(session: SessionRef, tk: TK, scope: Scope) -> BranchList:
    """The branches forked from this session (with their fork points), and where it came from."""
    origin = tk.fork_origin(session, project=scope)
    return BranchList(
        forked_from=None if origin is None else BranchPublic.from_domain(origin),
        branches=[BranchPublic.from_domain(b) for b in tk.branches(session, project=scope)],
    )
