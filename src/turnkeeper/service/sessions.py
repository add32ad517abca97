"""Sessions: create, find, list, change, reset, archive, delete, and their statistics.

A part of `Turnkeeper` (these are its most used operations, so `tk` offers them flat); its
store calls are the core `Store`'s session calls.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from turnkeeper.errors import InvalidInput, SessionHeld, SessionNotFound
from turnkeeper.service.core import (
    MAX_PAGE,
    AgentPositions,
    Core,
    SessionRef,
    at_most,
    one_of,
    refuse_expired,
)
from turnkeeper.storage.base import AdminStore, ErasureStore, require
from turnkeeper.types import (
    UNSET,
    JSONObject,
    NewSession,
    Page,
    ProjectStats,
    Session,
    SessionFilter,
    SessionPatch,
    SessionStats,
    SessionStatus,
)
from turnkeeper.validation import (
    check_key,
    check_metadata,
    check_name,
    check_phase,
    check_positive,
    check_text,
)


def new_session(
    core: Core,
    *,
    key: str | None,
    project: str | None,
    subject: str | None,
    kind: str | None,
    title: str | None,
    phase: str | None,
    metadata: JSONObject | None,
    ttl: timedelta | Any | None,
) -> NewSession:
    """A checked new session: what `create_session`, `get_or_create_session` and a fork
    (`branches`) store."""
    lifetime = core.settings.session_expiration if ttl is UNSET else ttl
    if lifetime is not None and lifetime <= timedelta(0):
        raise InvalidInput("ttl", "must be positive (or None for a session that never expires)")
    return NewSession(
        project=core.project(project),
        key=check_key("key", key),
        subject=check_text("subject", subject, max_length=255),
        kind=check_text("kind", kind, max_length=100),
        title=check_text("title", title),
        phase=check_phase(phase),
        expires_at=None if lifetime is None else core.now() + lifetime,
        metadata=_metadata(core, metadata),
    )


def _metadata(core: Core, metadata: JSONObject | None) -> dict[str, Any]:
    return check_metadata("metadata", metadata, max_bytes=core.settings.max_json_bytes)


class Sessions:
    """The session operations of `Turnkeeper`."""

    def __init__(self, core: Core, agents: AgentPositions) -> None:
        self.core = core
        self._agents = agents

    def create_session(
        self,
        *,
        key: str | None = None,
        project: str | None = None,
        subject: str | None = None,
        kind: str | None = None,
        title: str | None = None,
        phase: str | None = None,
        metadata: JSONObject | None = None,
        ttl: timedelta | Any | None = UNSET,
    ) -> Session:
        """Create a session. `ttl` overrides `session_expiration` (None: never expires).

        Raises `Conflict` if `key` is held by a live session of the project.
        """
        new = new_session(
            self.core, key=key, project=project, subject=subject, kind=kind, title=title,
            phase=phase, metadata=metadata, ttl=ttl,
        )  # fmt: skip
        return self.core.store.create_session(new, now=self.core.now())

    def get_or_create_session(
        self,
        key: str,
        *,
        project: str | None = None,
        subject: str | None = None,
        kind: str | None = None,
        title: str | None = None,
        phase: str | None = None,
        metadata: JSONObject | None = None,
        ttl: timedelta | Any | None = UNSET,
    ) -> tuple[Session, bool]:
        """The live session holding `key`, or a new one (the other fields apply only to a new
        session). An expired holder stays readable as expired; a new session takes the key.
        Returns the session and whether it was created."""
        if key is None:
            raise InvalidInput("key", "get-or-create needs a key")
        new = new_session(
            self.core, key=key, project=project, subject=subject, kind=kind, title=title,
            phase=phase, metadata=metadata, ttl=ttl,
        )  # fmt: skip
        return self.core.store.get_or_create_session(new, now=self.core.now())

    def list_sessions(
        self,
        *,
        project: str | None = None,
        subject: str | None = None,
        kind: str | None = None,
        status: SessionStatus | str | None = None,
        key: str | None = None,
        updated_since: datetime | None = None,
        limit: int = 50,
        cursor: str | None = None,
        phase: str | None = None,
        search: str | None = None,
    ) -> Page[Session]:
        """Sessions, most recently updated first, `limit` per page (at most 1000).

        `search` matches sessions whose key, subject or title contains it (case-insensitive);
        the other filters match exactly."""
        at_most("limit", check_positive("limit", limit), MAX_PAGE)
        status = None if status is None else one_of("status", status, SessionStatus)
        where = SessionFilter(
            project=check_name("project", project),
            subject=subject,
            kind=kind,
            status=status,
            key=key,
            updated_since=updated_since,
            phase=phase,
            search=check_text("search", search, max_length=255) or None,
        )
        page = self.core.store.list_sessions(where, limit=limit, cursor=cursor)
        return Page(tuple(self.core.present(s) for s in page.items), page.next_cursor)

    def projects_holding(self, ref: str) -> list[str]:
        """The projects where `ref` names a session: its id's, else those of the sessions
        holding it as a key (any status). For telling a caller who did not find a session
        where it is; the interface decides whether the caller may know."""
        try:
            return [self.core.store.get_session(ref).project]
        except SessionNotFound:
            pass
        holders = self.list_sessions(key=ref, limit=MAX_PAGE).items
        return sorted({session.project for session in holders})

    def iter_session_ids(self, *, project: str | None = None) -> Iterator[str]:
        """Ids of every session (of `project`), paging through the listing."""
        cursor: str | None = None
        while True:
            page = self.list_sessions(project=project, limit=MAX_PAGE, cursor=cursor)
            yield from (session.id for session in page.items)
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def update_session(
        self,
        ref: SessionRef,
        *,
        title: str | Any | None = UNSET,
        phase: str | Any | None = UNSET,
        metadata: JSONObject | Any = UNSET,
        ttl: timedelta | Any | None = UNSET,
        project: str | None = None,
    ) -> Session:
        """Change title, phase, metadata (replaced as a whole) and/or the expiry: `ttl` from
        now, or None for never. An expired session cannot be revived (`SessionExpired`)."""
        session = self.core.get_session(ref, project=project)
        expires_at: datetime | Any | None = UNSET
        if ttl is not UNSET:
            refuse_expired(session)
            if ttl is not None and ttl <= timedelta(0):
                raise InvalidInput("ttl", "must be positive (or None: never expires)")
            expires_at = None if ttl is None else self.core.now() + ttl
        patch = SessionPatch(
            title=UNSET if title is UNSET else check_text("title", title),
            phase=UNSET if phase is UNSET else check_phase(phase),
            metadata=UNSET if metadata is UNSET else _metadata(self.core, metadata),
            expires_at=expires_at,
        )
        return self.core.present(
            self.core.store.update_session(session.id, patch, now=self.core.now())
        )

    def reset_session(
        self, ref: SessionRef, *, keep_system_message: bool = False, project: str | None = None
    ) -> Session:
        """Clear the messages, keeping the session (and, if asked, its first system message).
        Refused (`SessionHeld`) while a legal hold covers the session."""
        session = self.core.get_session(ref, project=project)
        self._refuse_held(session.id)
        return self.core.present(
            self.core.store.reset_session(
                session.id, keep_system_message=keep_system_message, now=self.core.now()
            )
        )

    def archive_session(self, ref: SessionRef, *, project: str | None = None) -> Session:
        """Mark the session archived: readable, no longer live (its key becomes free).
        An expired session stays expired (`SessionExpired`)."""
        session = self.core.get_session(ref, project=project)
        refuse_expired(session)
        return self.core.store.set_status(session.id, SessionStatus.ARCHIVED, now=self.core.now())

    def delete_session(self, ref: SessionRef, *, project: str | None = None) -> None:
        """Delete the session and its messages. Refused (`SessionHeld`) while a legal hold
        covers the session."""
        session_id = self.core.get_session(ref, project=project).id
        self._refuse_held(session_id)
        self.core.store.delete_session(session_id)

    def _refuse_held(self, session_id: str) -> None:
        """A legal hold keeps a session's messages from every deletion, not only from erasure
        and retention (a store without holds, no `ErasureStore`, holds nothing)."""
        store = self.core.store
        if isinstance(store, ErasureStore) and store.held_sessions([session_id]):
            raise SessionHeld(session_id)

    def session_stats(self, ref: SessionRef, *, project: str | None = None) -> SessionStats:
        """Message counts (by role, user-facing vs internal), token totals, time span, and
        the execution time agents reported (`agents.responded`)."""
        session_id = self.core.get_session(ref, project=project).id
        stats = require(self.core.store, AdminStore, "session statistics").session_stats(session_id)
        return dataclasses.replace(stats, execution_ms=self._agents.execution_ms(session_id))

    def project_stats(self, project: str | None = None) -> list[ProjectStats]:
        """Sessions by status, messages and tokens per project (one, or all by name)."""
        return require(self.core.store, AdminStore, "project statistics").project_stats(
            check_name("project", project)
        )
