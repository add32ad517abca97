"""Branches of a conversation: fork a session at a seq, list a session's forks.

What `Turnkeeper.fork`, `Turnkeeper.branches` and `Turnkeeper.fork_origin` do, kept out of
the service module so each capability stays a small module of its own.

A fork copies the source's prefix (messages, their traces, the summary checkpoints and agent
positions that cover only the prefix) into a new session in one transaction; see
`turnkeeper.storage.base.ForkStore` for why copying was chosen over a parent pointer. From
then on the branch is an ordinary session: appends go to it alone, and its context windows,
stats, export and expiry see its whole history without knowing it is a branch.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from turnkeeper.errors import InvalidInput
from turnkeeper.storage.base import ForkStore, require
from turnkeeper.types import Branch, JSONObject, Session

if TYPE_CHECKING:
    from turnkeeper.service import SessionRef, Turnkeeper

FEATURE = "branches"
"""What a store without `ForkStore` is told it cannot serve."""


def _forks(tk: Turnkeeper) -> ForkStore:
    return require(tk.store, ForkStore, FEATURE)


def fork(
    tk: Turnkeeper,
    ref: SessionRef,
    at_seq: int,
    *,
    key: str | None,
    title: str | None,
    metadata: JSONObject | None,
    ttl: timedelta | Any | None,
    project: str | None,
) -> Session:
    """See `Turnkeeper.fork`."""
    if isinstance(at_seq, bool) or not isinstance(at_seq, int):
        raise InvalidInput("at_seq", "must be an integer seq (0 forks before the first message)")
    source = tk.get_session(ref, project=project)
    new = tk._new_session(
        key=key,
        project=source.project,
        subject=source.subject,
        kind=source.kind,
        title=source.title if title is None else title,
        phase=source.phase,
        metadata=dict(source.metadata) if metadata is None else metadata,
        ttl=ttl,
    )
    return _forks(tk).fork_session(source.id, at_seq, new, now=tk.now())


def branches(tk: Turnkeeper, ref: SessionRef, *, project: str | None) -> list[Branch]:
    """See `Turnkeeper.branches`."""
    return _forks(tk).list_branches(tk.get_session(ref, project=project).id)


def fork_origin(tk: Turnkeeper, ref: SessionRef, *, project: str | None) -> Branch | None:
    """See `Turnkeeper.fork_origin`."""
    return _forks(tk).fork_origin(tk.get_session(ref, project=project).id)
