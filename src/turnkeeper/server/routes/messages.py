"""`/v1/sessions/{session}/messages`: append one or many (idempotent by client id), list."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, status
from starlette.concurrency import run_in_threadpool

from turnkeeper import metrics
from turnkeeper.server.deps import AttemptDep, SessionAccessDep
from turnkeeper.server.problems import PROBLEM_RESPONSES
from turnkeeper.server.schemas import AppendMany, AppendOne, MessagePage, MessagePublic
from turnkeeper.service import Turnkeeper
from turnkeeper.turns import Attempt, with_idempotent_ids
from turnkeeper.types import Message, NewMessage

router = APIRouter(
    prefix="/v1/sessions/{session}/messages", tags=["messages"], responses=PROBLEM_RESPONSES
)


def _append(
    tk: Turnkeeper,
    ref: str,
    project: str | None,
    new: list[NewMessage],
    expected: int | None,
    attempt: Attempt,
) -> list[Message]:
    """Append and count what was newly stored (a retried id is returned, not counted)."""
    session = tk.get_session(ref, project=project)
    new = with_idempotent_ids(tk.store, session, new, attempt.idempotency_key)
    stored = tk.append_many(session, new, expected_last_seq=expected)
    metrics.stored(session, False, [m for m in stored if m.seq > session.last_seq])
    return stored


@router.post("", status_code=status.HTTP_201_CREATED)
async def append_message(
    access: SessionAccessDep, body: AppendOne, attempt: AttemptDep
) -> MessagePublic:
    """Append one message. Re-sending a stored `id` (or `Idempotency-Key`) returns the stored
    message unchanged."""
    # The hottest route: async, with a thread for the store's work only, so FastAPI checks the
    # answer on the event loop instead of handing it to a thread a second time.
    new = [body.to_domain()]
    (stored,) = await run_in_threadpool(
        _append, access.tk, access.ref, access.scope, new, body.expected_last_seq, attempt
    )
    return MessagePublic.from_domain(stored)


@router.post("/batch", status_code=status.HTTP_201_CREATED)
def append_messages(
    access: SessionAccessDep, body: AppendMany, attempt: AttemptDep
) -> list[MessagePublic]:
    """Append several messages atomically (all or none), in order, with gapless seqs. With an
    `Idempotency-Key`, a retry of the batch stores nothing twice."""
    new = [message.to_domain() for message in body.messages]
    stored = _append(access.tk, access.ref, access.scope, new, body.expected_last_seq, attempt)
    return [MessagePublic.from_domain(message) for message in stored]


@router.get("")
def list_messages(
    access: SessionAccessDep,
    from_seq: Annotated[int | None, Query(ge=0, description="Lowest seq (inclusive).")] = None,
    to_seq: Annotated[int | None, Query(ge=0, description="Highest seq (inclusive).")] = None,
    include_internal: Annotated[bool, Query(description="false: user-facing only.")] = True,
    newest_first: bool = False,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> MessagePage:
    """Stored messages (the audit trail) by seq range, a page at a time."""
    items = access.tk.history(
        access.ref, from_seq=from_seq, to_seq=to_seq, include_internal=include_internal,
        newest_first=newest_first, limit=limit, project=access.scope,
    )  # fmt: skip
    page = MessagePage(items=[MessagePublic.from_domain(m) for m in items])
    if len(items) == limit:
        if newest_first:
            page.next_to_seq = items[-1].seq - 1 if items[-1].seq > 1 else None
        else:
            page.next_from_seq = items[-1].seq + 1
    return page
