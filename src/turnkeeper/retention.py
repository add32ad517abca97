"""Retention: which sessions have outlived their project's `retention`, and which of those a
legal hold keeps.

A session is past its retention once its last change (`updated_at`: an append, an edit, a
status change) is older than the retention of its project (`project_retention`, else
`retention`); it is then deleted whole, whatever its status, by the same run that deletes
expired sessions (`turnkeeper.expiry.delete_expired`: the sweeper and `turnkeeper gc`), through
the store's `delete_session`, so the caches forget it and an encrypting store destroys its data
key. Retention is housekeeping, not an erasure on request: it leaves no tombstone.

The same run then deletes, in every session that lives on, the messages created more than
its project's retention ago, with the summary checkpoints and turn traces that may hold their
text (`RetentionStore.delete_messages_before`, which says what goes and what stays); a session
so emptied is deleted whole once its last change is past the retention too. These messages are
not archived.

A legal hold (`tk.set_legal_hold`, the `ErasureStore` capability) on the session or on its
project keeps it, and its messages; the run reports it as held. A store without that
capability has no holds; one without `RetentionStore` keeps old messages of live sessions.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from turnkeeper.errors import SessionNotFound
from turnkeeper.storage.base import ErasureStore, RetentionStore, Store, every_session
from turnkeeper.types import Session

KeepFor = Callable[[str], timedelta | None]
"""How long a project's sessions are kept after their last change (None: for ever):
`Settings.retention_for`."""


@dataclass(frozen=True, slots=True)
class Due:
    """Sessions a run would delete, and those a legal hold keeps from it (ids, sorted)."""

    deletable: tuple[str, ...] = ()
    held: tuple[str, ...] = ()


def past_retention(
    store: Store, keep_for: KeepFor, now: datetime, *, skip: Collection[str] = ()
) -> list[str]:
    """Ids of the sessions (any status) whose last change is older than their project's
    retention, except those in `skip` (deleted by the same run for another reason)."""
    return sorted(
        session.id
        for session in every_session(store)
        if session.id not in skip and _outlived(session, keep_for, now)
    )


def due(
    store: Store, keep_for: KeepFor | None, now: datetime, *, skip: Collection[str] = ()
) -> Due:
    """The sessions past their retention (none without one: `keep_for` None), except those
    in `skip`, split into those that may go and those a legal hold keeps."""
    if keep_for is None:
        return Due()
    return split_held(store, past_retention(store, keep_for, now, skip=skip))


def _outlived(session: Session, keep_for: KeepFor, now: datetime) -> bool:
    limit = keep_for(session.project)
    return limit is not None and session.updated_at <= now - limit


def held_of(store: Store, session_ids: Sequence[str]) -> frozenset[str]:
    """Those of `session_ids` a legal hold covers (none on a store without holds)."""
    if not session_ids or not isinstance(store, ErasureStore):
        return frozenset()
    return store.held_sessions(session_ids)


def split_held(store: Store, session_ids: Sequence[str]) -> Due:
    """`session_ids` split into those that may go and those a legal hold keeps."""
    held = held_of(store, session_ids)
    return Due(
        deletable=tuple(i for i in session_ids if i not in held),
        held=tuple(sorted(held)),
    )


def delete_unless_held(
    store: Store, session_ids: Sequence[str], progress: Callable[[str], None] | None = None
) -> Due:
    """Delete each session through the store's delete path (caches, data keys), asking again
    just before each whether a hold has come since the run was planned; returns what was
    deleted and what a hold kept. One already gone is neither."""
    deleted: list[str] = []
    held: list[str] = []
    for session_id in session_ids:
        if held_of(store, [session_id]):
            held.append(session_id)
            continue
        try:
            store.delete_session(session_id)
        except SessionNotFound:  # deleted meanwhile (by hand, or erased)
            continue
        deleted.append(session_id)
        if progress is not None:
            progress(session_id)
    return Due(deletable=tuple(deleted), held=tuple(held))


# -- messages past retention in sessions that live on -----------------------------------------


@dataclass(frozen=True, slots=True)
class OldMessages:
    """The sessions with messages past their project's retention: the cutoff of each (its
    messages created at or before it go) with how many it has, and those a legal hold keeps."""

    cutoffs: Mapping[str, datetime]
    counts: Mapping[str, int]
    held: tuple[str, ...] = ()


def old_messages(
    store: Store, keep_for: KeepFor | None, now: datetime, *, skip: Collection[str] = ()
) -> OldMessages:
    """The sessions (but those in `skip`, deleted whole by the same run) holding messages
    created more than their project's retention ago; one count per session with messages
    (none without a retention or on a store without `RetentionStore`)."""
    if keep_for is None or not isinstance(store, RetentionStore):
        return OldMessages({}, {})
    cutoffs: dict[str, datetime] = {}
    counts: dict[str, int] = {}
    for session in every_session(store):
        limit = keep_for(session.project)
        if session.id in skip or limit is None or not session.message_count:
            continue
        count = store.count_messages_before(session.id, now - limit)
        if count:
            cutoffs[session.id], counts[session.id] = now - limit, count
    held = held_of(store, sorted(counts))
    return OldMessages(
        cutoffs={i: at for i, at in cutoffs.items() if i not in held},
        counts={i: n for i, n in sorted(counts.items()) if i not in held},
        held=tuple(sorted(held)),
    )


def delete_old_messages(store: Store, due: OldMessages) -> OldMessages:
    """Delete the old messages of each session in `due` (a hold that came since the run was
    planned keeps them: the store asks in the same transaction); returns what went, by
    session, and what a hold kept. A session gone meanwhile is neither."""
    if not due.cutoffs or not isinstance(store, RetentionStore):
        return due
    counts: dict[str, int] = {}
    held: list[str] = list(due.held)
    for session_id, cutoff in due.cutoffs.items():
        try:
            deleted = store.delete_messages_before(session_id, cutoff)
        except SessionNotFound:  # deleted meanwhile
            continue
        if deleted is None:
            held.append(session_id)
        elif deleted:
            counts[session_id] = deleted
    return OldMessages(cutoffs={}, counts=counts, held=tuple(sorted(held)))
