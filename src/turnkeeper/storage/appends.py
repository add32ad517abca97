"""The append rule, shared by every store: given the locked session and the drafts' ids
already stored in it, what one append adds and returns.

It is plain data in, plain data out — no SQL, no locking — so the in-memory reference store and
the SQL store decide appends identically (`storage/sql/rows.py` only turns a plan into
statement parameters).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from turnkeeper.errors import Conflict, InvalidInput, SeqConflict, SessionExpired
from turnkeeper.storage.base import check_retry
from turnkeeper.storage.codec import to_ts_or_none
from turnkeeper.types import (
    Message,
    MessageDraft,
    Session,
    SessionStatus,
)

__all__ = ["AppendPlan", "AppendTarget", "plan_append"]


@dataclass(frozen=True, slots=True)
class AppendPlan:
    """What one append stores (`added`, in seq order) and returns (`result`, one per draft)."""

    added: list[Message]
    result: list[Message]
    traces: list[tuple[int, str]]
    """`(seq, data)` of the added messages' traces."""

    @property
    def last_seq(self) -> int:
        return self.added[-1].seq


@dataclass(frozen=True, slots=True)
class AppendTarget:
    """The columns of the locked session row an append decides on (an append needs neither
    the timestamps nor the metadata of the whole row)."""

    id: str
    status: SessionStatus
    expires_at: datetime | None
    last_seq: int
    version: int

    def is_expired_at(self, now: datetime) -> bool:
        """As `Session.is_expired_at`."""
        if self.status is SessionStatus.EXPIRED:
            return True
        return self.expires_at is not None and self.expires_at <= now


def plan_append(
    session: Session | AppendTarget,
    drafts: Sequence[MessageDraft],
    stored: Mapping[str, Message],
    *,
    expected_last_seq: int | None,
    now: datetime,
) -> AppendPlan:
    """Decide an append, given the locked session row and the drafts' ids stored in it.

    Message ids are scoped to their session. An id already stored with the same content is
    returned as stored (an idempotent retry); with other content it is a `Conflict` naming the
    id; one id twice in a batch is `InvalidInput`. The checks on `expected_last_seq`, expiry
    and status apply only when something new is to be written.
    """
    if len(drafts) > 1 or stored:  # one draft and nothing stored (an append's usual case):
        _check_ids(drafts, stored)  # no id can repeat or be a retry
    fresh = [draft for draft in drafts if draft.id not in stored] if stored else drafts
    if fresh:
        if expected_last_seq is not None and expected_last_seq != session.last_seq:
            raise SeqConflict(session.id, expected_last_seq, session.last_seq)
        if session.status is SessionStatus.EXPIRED or session.is_expired_at(now):
            raise SessionExpired(session.id, to_ts_or_none(session.expires_at) or "")
        if session.status is not SessionStatus.ACTIVE:
            raise Conflict(f"session {session.id} is {session.status.value}")
    seq = session.last_seq
    added: list[Message] = []
    traces: list[tuple[int, str]] = []
    for draft in fresh:
        seq += 1
        added.append(draft.stored_as(session.id, seq))
        if draft.trace is not None:
            traces.append((seq, draft.trace))
    if not stored:
        return AppendPlan(added=added, result=added, traces=traces)
    known = {**stored, **{message.id: message for message in added}}
    result = [known[draft.id] for draft in drafts]
    return AppendPlan(added=added, result=result, traces=traces)


def _check_ids(drafts: Sequence[MessageDraft], stored: Mapping[str, Message]) -> None:
    """One id twice in the batch is `InvalidInput`; a stored id must be a retry of its
    message (`check_retry`)."""
    seen: set[str] = set()
    for index, draft in enumerate(drafts):
        if draft.id in seen:
            raise InvalidInput(
                f"messages[{index}].id", f"id {draft.id!r} appears twice in this batch"
            )
        seen.add(draft.id)
        if draft.id in stored:
            check_retry(stored[draft.id], draft)
