"""The service layer: every operation turnkeeper offers, over any `Store`.

The CLI, and later the HTTP API and UI, are thin shells over this class: they parse input, call
one method and format the result. Validation, token counting at write time, session-reference
resolution (id or key), expiry rules and context building all live here, so every interface
behaves the same.
"""

from __future__ import annotations

import dataclasses
import math
import uuid
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from turnkeeper import expiry, jsonl, metrics
from turnkeeper.config import Settings
from turnkeeper.context import conversation
from turnkeeper.context.builder import ContextBuilder
from turnkeeper.context.checkpoints import Checkpointed, SessionLocks
from turnkeeper.context.conversation import RECENT_MESSAGES, ConversationContext
from turnkeeper.context.formats import wire_name
from turnkeeper.context.history import StoreHistory
from turnkeeper.context.perspective import EVENT_KEY
from turnkeeper.context.summarizer import ExtractiveSummarizer, LLMSummarizer, Summarizer
from turnkeeper.errors import BackendUnavailable, InvalidInput, SessionExpired, SessionNotFound
from turnkeeper.logs import get_logger
from turnkeeper.storage.base import Store, check_retry
from turnkeeper.storage.codec import to_ts_or_none
from turnkeeper.tokens import (
    TokenCounter,
    context_window_for_model,
    counter_for,
    encoding_for_model,
)
from turnkeeper.types import (
    UNSET,
    AgentState,
    AgentStateUpdate,
    ContextWindow,
    ExpiryReport,
    JSONObject,
    Message,
    MessageDraft,
    NewMessage,
    NewSession,
    Page,
    Phase,
    ProjectStats,
    Role,
    Session,
    SessionFilter,
    SessionPatch,
    SessionStats,
    SessionStatus,
    StrategyName,
    SummaryCheckpoint,
    Usage,
)
from turnkeeper.validation import (
    check_message,
    check_metadata,
    check_name,
    check_non_negative,
    check_phase,
    check_positive,
    check_strategy,
    check_text,
)

SessionRef = Session | str
"""A session, its id, or its key (looked up in the project)."""

MAX_PAGE = 1000


SUMMARY_TOKENS = 150
"""Longest summary in the conversation context object (the anonymous chat
planner's `max_tokens=150`)."""

_log = get_logger("turnkeeper.service")


def utcnow() -> datetime:
    return datetime.now(UTC)


def _looks_like_id(ref: str) -> bool:
    """True for a string shaped like the session ids turnkeeper makes (a UUID's text form);
    a key may look like one too, and is then resolved after the store does not find it."""
    return len(ref) == 36 and ref[8] == ref[13] == ref[18] == ref[23] == "-"


def _agent_name(field: str, value: str) -> str:
    """An agent's name: a required name (the same rules as keys)."""
    name = check_name(field, value)
    if not name:
        raise InvalidInput(field, "an agent name is required")
    return name


def default_summarizer(settings: Settings) -> Summarizer:
    """The LLM summarizer when `summary_model` is set, else the offline extractive one."""
    if settings.summary_model is None:
        return ExtractiveSummarizer()
    from turnkeeper.llm import LLMClient

    return LLMSummarizer(
        LLMClient.from_settings(settings),
        model=settings.summary_model,
        prompt=settings.summary_prompt,
    )


class Turnkeeper:
    """Conversation memory over a store. Open one with `turnkeeper.open()`.

    Usable as a context manager; `close()` releases the store.
    """

    def __init__(
        self,
        store: Store,
        settings: Settings,
        *,
        clock: Callable[[], datetime] = utcnow,
        summarizer: Summarizer | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self._clock = clock
        self._summarizer = summarizer or default_summarizer(settings)
        self._locks = SessionLocks()
        self.encoding = store.meta("token_encoding", settings.token_encoding)
        """Encoding the stored token counts were made with (fixed when the database was made)."""

    def __enter__(self) -> Turnkeeper:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.store.close()

    @property
    def counter(self) -> TokenCounter:
        """The tokenizer stored counts are made with."""
        return counter_for(self.encoding)

    def now(self) -> datetime:
        """The current time as this service sees it (its clock decides expiry)."""
        return self._clock()

    # -- sessions ---------------------------------------------------------------------------

    def _project(self, project: str | None) -> str:
        return check_name("project", project) or self.settings.default_project

    def _new_session(
        self,
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
        lifetime = self.settings.session_expiration if ttl is UNSET else ttl
        if lifetime is not None and lifetime <= timedelta(0):
            raise InvalidInput("ttl", "must be positive (or None for a session that never expires)")
        return NewSession(
            project=self._project(project),
            key=check_name("key", key),
            subject=check_text("subject", subject, max_length=255),
            kind=check_text("kind", kind, max_length=100),
            title=check_text("title", title),
            phase=check_phase(phase),
            expires_at=None if lifetime is None else self._clock() + lifetime,
            metadata=check_metadata("metadata", metadata),
        )

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
        new = self._new_session(
            key=key, project=project, subject=subject, kind=kind, title=title, phase=phase,
            metadata=metadata, ttl=ttl,
        )  # fmt: skip
        return self.store.create_session(new, now=self._clock())

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
        new = self._new_session(
            key=key, project=project, subject=subject, kind=kind, title=title, phase=phase,
            metadata=metadata, ttl=ttl,
        )  # fmt: skip
        return self.store.get_or_create_session(new, now=self._clock())

    def _present(self, session: Session) -> Session:
        """An active session past its expiry is shown as expired: it is never live again."""
        if session.status is SessionStatus.ACTIVE and session.is_expired_at(self._clock()):
            return dataclasses.replace(session, status=SessionStatus.EXPIRED)
        return session

    def get_session(self, ref: SessionRef, *, project: str | None = None) -> Session:
        """A session by id or key. With `project`, a session of another project is not found
        (isolation). A key is looked up in `project` (default: the configured default)."""
        if isinstance(ref, Session):
            ref = ref.id
        if not isinstance(ref, str) or not ref:
            raise InvalidInput("session", "must be a session id or key")
        try:
            found = self.store.get_session(ref)
        except SessionNotFound:
            check_name("session", ref)
            found = self.store.find_session_by_key(self._project(project), ref)
        if project is not None and found.project != project:
            raise SessionNotFound(ref, project)
        return self._present(found)

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
        check_positive("limit", limit)
        if limit > MAX_PAGE:
            raise InvalidInput("limit", f"must be at most {MAX_PAGE}, got {limit}")
        if status is not None:
            try:
                status = SessionStatus(status)
            except ValueError:
                names = ", ".join(s.value for s in SessionStatus)
                raise InvalidInput("status", f"unknown status {status!r}; use {names}") from None
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
        page = self.store.list_sessions(where, limit=limit, cursor=cursor)
        return Page(tuple(self._present(s) for s in page.items), page.next_cursor)

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
        session = self.get_session(ref, project=project)
        expires_at: datetime | Any | None = UNSET
        if ttl is not UNSET:
            if session.status is SessionStatus.EXPIRED:
                raise SessionExpired(session.id, to_ts_or_none(session.expires_at) or "")
            if ttl is not None and ttl <= timedelta(0):
                raise InvalidInput("ttl", "must be positive (or None: never expires)")
            expires_at = None if ttl is None else self._clock() + ttl
        patch = SessionPatch(
            title=UNSET if title is UNSET else check_text("title", title),
            phase=UNSET if phase is UNSET else check_phase(phase),
            metadata=UNSET if metadata is UNSET else check_metadata("metadata", metadata),
            expires_at=expires_at,
        )
        return self._present(self.store.update_session(session.id, patch, now=self._clock()))

    def reset_session(
        self, ref: SessionRef, *, keep_system_message: bool = False, project: str | None = None
    ) -> Session:
        """Clear the messages, keeping the session (and, if asked, its first system message)."""
        session = self.get_session(ref, project=project)
        return self._present(
            self.store.reset_session(
                session.id, keep_system_message=keep_system_message, now=self._clock()
            )
        )

    def archive_session(self, ref: SessionRef, *, project: str | None = None) -> Session:
        """Mark the session archived: readable, no longer live (its key becomes free).
        An expired session stays expired (`SessionExpired`)."""
        session = self.get_session(ref, project=project)
        if session.status is SessionStatus.EXPIRED:
            raise SessionExpired(session.id, to_ts_or_none(session.expires_at) or "")
        return self.store.set_status(session.id, SessionStatus.ARCHIVED, now=self._clock())

    def delete_session(self, ref: SessionRef, *, project: str | None = None) -> None:
        """Delete the session and its messages."""
        self.store.delete_session(self.get_session(ref, project=project).id)

    def expire(
        self,
        *,
        delete: bool = False,
        grace: timedelta | None = None,
        archive_dir: Path | None = None,
        progress: Callable[[str], None] | None = None,
        dry_run: bool = False,
    ) -> ExpiryReport:
        """Mark sessions past `expires_at` expired; with `delete`, delete expired sessions
        older than the grace period (default: `expiry_grace`), calling `progress` with each.
        With `dry_run`, change nothing and report what a run would expire and delete.

        With an archive directory (`archive_dir`, default: the `archive_dir` setting), the
        sessions to delete are first written to a new JSONL file there (`archive_path` in the
        report), which `turnkeeper import` reads back; nothing is deleted unless its archive
        is on disk.
        """
        now = self._clock()
        grace = self.settings.expiry_grace if grace is None else grace
        if dry_run:
            return expiry.plan(self.store, now=now, grace=grace if delete else None)
        if delete:
            report = expiry.delete_expired(
                self.store,
                now=now,
                grace=grace,
                archive_dir=archive_dir or self.settings.archive_dir,
                progress=progress,
            )
        else:
            report = self.store.expire_sessions(now=now)
        if report.archive_path is not None:
            get_logger("turnkeeper.expiry").info(
                "sessions_archived", path=report.archive_path, sessions=len(report.deleted)
            )
        metrics.SESSIONS_EXPIRED.inc(len(report.expired))
        metrics.SESSIONS_DELETED.inc(len(report.deleted))
        return report

    def session_stats(self, ref: SessionRef, *, project: str | None = None) -> SessionStats:
        """Message counts (by role, user-facing vs internal), token totals, time span, and
        the execution time agents reported (`agent_responded`)."""
        session_id = self.get_session(ref, project=project).id
        stats = self.store.session_stats(session_id)
        spent = sum(state.execution_ms for state in self.store.list_agent_states(session_id))
        return dataclasses.replace(stats, execution_ms=spent)

    def project_stats(self, project: str | None = None) -> list[ProjectStats]:
        """Sessions by status, messages and tokens per project (one, or all by name)."""
        return self.store.project_stats(check_name("project", project))

    def iter_session_ids(self, *, project: str | None = None) -> Iterator[str]:
        """Ids of every session (of `project`), paging through the listing."""
        cursor: str | None = None
        while True:
            page = self.list_sessions(project=project, limit=MAX_PAGE, cursor=cursor)
            yield from (session.id for session in page.items)
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def export_sessions(
        self,
        refs: Iterable[SessionRef] | None,
        out: IO[str],
        *,
        project: str | None = None,
        progress: Callable[[Session], None] | None = None,
    ) -> tuple[int, int]:
        """Write sessions (all of them, or of `project`, when `refs` is None) as JSONL.
        Returns (sessions, messages) written."""
        ids = (
            self.iter_session_ids(project=project)
            if refs is None
            else [self.get_session(ref, project=project).id for ref in refs]
        )
        return jsonl.export_sessions(self.store, ids, out, progress=progress)

    def import_sessions(
        self,
        path: Path,
        *,
        dry_run: bool = False,
        progress: Callable[[Session], None] | None = None,
    ) -> jsonl.ImportReport:
        """Import a JSONL export: idempotent; malformed lines are reported by file:line and
        the rest is imported."""
        return jsonl.import_sessions(self.store, path, dry_run=dry_run, progress=progress)

    # -- messages ---------------------------------------------------------------------------

    def draft(self, message: NewMessage) -> MessageDraft:
        """Validate a message and count its tokens (once, with the store's encoding)."""
        clean = check_message(message, max_bytes=self.settings.max_message_bytes)
        role = Role(clean.role)
        tool_calls = tuple(clean.tool_calls) if clean.tool_calls is not None else None
        return MessageDraft(
            id=clean.id or str(uuid.uuid4()),
            role=role,
            content=clean.content,
            tokens=self.counter.count_message(
                role.value,
                clean.content,
                name=wire_name(role, clean.author),
                tool_calls=tool_calls,
                tool_call_id=clean.tool_call_id,
            ),
            created_at=self._clock(),
            author=clean.author,
            internal=clean.internal,
            usage=clean.usage,
            tool_calls=tool_calls,
            tool_call_id=clean.tool_call_id,
            metadata=clean.metadata or {},
        )

    def append(
        self,
        ref: SessionRef,
        role: Role | str,
        content: str,
        *,
        author: str | None = None,
        internal: bool = False,
        id: str | None = None,
        metadata: JSONObject | None = None,
        usage: Usage | None = None,
        tool_calls: Iterable[JSONObject] | None = None,
        tool_call_id: str | None = None,
        expected_last_seq: int | None = None,
        project: str | None = None,
    ) -> Message:
        """Append one message. Appending an id that is already stored returns the stored
        message. With `expected_last_seq`, fails with `SeqConflict` if the session moved on."""
        message = NewMessage(
            role=role, content=content, author=author, internal=internal, id=id,
            metadata=metadata, usage=usage, tool_call_id=tool_call_id,
            tool_calls=list(tool_calls) if tool_calls is not None else None,
        )  # fmt: skip
        (stored,) = self.append_many(
            ref, [message], expected_last_seq=expected_last_seq, project=project
        )
        return stored

    def append_many(
        self,
        ref: SessionRef,
        messages: Iterable[NewMessage],
        *,
        expected_last_seq: int | None = None,
        project: str | None = None,
    ) -> list[Message]:
        """Append messages atomically (all or none), in order, with gapless seqs."""
        if expected_last_seq is not None:
            check_non_negative("expected_last_seq", expected_last_seq)
        session_id = self._appendable_id(ref, project)
        session = None if session_id is not None else self.get_session(ref, project=project)
        drafts = []
        for index, message in enumerate(messages):
            try:
                drafts.append(self.draft(message))
            except InvalidInput as exc:
                if session is None:  # a missing session is reported before a bad message
                    self.get_session(ref, project=project)
                if index == 0 and not drafts:
                    raise
                raise type(exc)(f"messages[{index}].{exc.field}", exc.problem) from None
        if session_id is not None:
            try:
                return self.store.append_messages(
                    session_id, drafts, expected_last_seq=expected_last_seq, now=self._clock()
                )
            except SessionNotFound:
                session = self.get_session(ref, project=project)  # a key shaped like an id
        assert session is not None
        return self._store_drafts(session, drafts, expected_last_seq)

    def _appendable_id(self, ref: SessionRef, project: str | None) -> str | None:
        """The session id an append can go to without reading the session first, else None.

        The store's append locks and checks the session row itself (existence, status,
        expiry), so the service's own read of it — a sixth of an append — is needed only to
        resolve a key, to check a project, or for sliding expiry (which extends the session
        from what it read)."""
        if project is not None or self.settings.sliding_expiry:
            return None
        if isinstance(ref, Session):
            return ref.id
        if isinstance(ref, str) and _looks_like_id(ref):
            return ref
        return None

    def append_traced(self, session: Session, message: NewMessage, trace: str) -> Message:
        """Append a chat turn's reply together with its turn trace (`turnkeeper.traces`), in
        one transaction: a reply is never stored without the record of what the model saw."""
        draft = dataclasses.replace(self.draft(message), trace=trace)
        (stored,) = self._store_drafts(session, [draft], None)
        return stored

    def _store_drafts(
        self, session: Session, drafts: list[MessageDraft], expected_last_seq: int | None
    ) -> list[Message]:
        now = self._clock()
        stored = self.store.append_messages(
            session.id, drafts, expected_last_seq=expected_last_seq, now=now
        )
        if self.settings.sliding_expiry:
            self._slide_expiry(session, stored, now)
        return stored

    def _slide_expiry(self, session: Session, stored: list[Message], now: datetime) -> None:
        """Sliding expiry: a session that gets new messages lives another
        `session_expiration` from now (a session that never expires stays so)."""
        lifetime = self.settings.session_expiration
        if lifetime is None or session.expires_at is None:
            return
        if not any(message.seq > session.last_seq for message in stored):
            return  # only retries of stored messages: no new activity
        if now + lifetime > session.expires_at:
            self.store.update_session(session.id, SessionPatch(expires_at=now + lifetime), now=now)

    def history(
        self,
        ref: SessionRef,
        *,
        from_seq: int | None = None,
        to_seq: int | None = None,
        include_internal: bool = True,
        newest_first: bool = False,
        limit: int | None = None,
        project: str | None = None,
    ) -> list[Message]:
        """Stored messages (the audit trail), readable whatever the session's status."""
        for field, value in (("from_seq", from_seq), ("to_seq", to_seq)):
            if value is not None:
                check_non_negative(field, value)
        if limit is not None:
            check_positive("limit", limit)
        session = self.get_session(ref, project=project)
        return self.store.read_messages(
            session.id,
            from_seq=from_seq,
            to_seq=to_seq,
            include_internal=include_internal,
            newest_first=newest_first,
            limit=limit,
        )

    # -- context ----------------------------------------------------------------------------

    def budget_for(
        self,
        strategy: StrategyName,
        *,
        max_tokens: int | None,
        reserved_tokens: int | None,
        model: str,
    ) -> int:
        """The token budget of a build: `max_tokens - reserved_tokens`.

        Defaults: `truncate` uses its own `max_context_tokens` and `reserved_tokens`; every
        other strategy uses `max_tokens` from the settings, or else `budget_ratio` × the model's
        context window, with nothing reserved. The default reserve belongs to the
        default budget: a caller who gives `max_tokens` without `reserved_tokens` gets a window
        of at most `max_tokens`, with nothing reserved.
        """
        if max_tokens is not None:
            check_positive("max_tokens", max_tokens)
        if reserved_tokens is not None:
            check_non_negative("reserved_tokens", reserved_tokens)
        settings = self.settings
        if strategy is StrategyName.TRUNCATE:
            limit = max_tokens or settings.max_context_tokens
            default_reserve = settings.reserved_tokens if max_tokens is None else 0
            reserved = default_reserve if reserved_tokens is None else reserved_tokens
        else:
            window = context_window_for_model(model, settings.default_context_window)
            limit = max_tokens or settings.max_tokens or math.floor(window * settings.budget_ratio)
            reserved = reserved_tokens or 0
        if limit - reserved <= 0:
            raise InvalidInput(
                "reserved_tokens",
                f"{reserved} reserved tokens leave no room in a budget of {limit} tokens",
            )
        return limit - reserved

    def context(
        self,
        ref: SessionRef,
        *,
        strategy: StrategyName | str | None = None,
        max_tokens: int | None = None,
        reserved_tokens: int | None = None,
        keep_recent: int | None = None,
        model: str | None = None,
        new_message: NewMessage | None = None,
        include_internal: bool | None = None,
        project: str | None = None,
        agent: str | None = None,
        trigger: int | None = None,
    ) -> ContextWindow:
        """Build the message list the model sees for the next turn.

        `new_message` is the turn being answered, if it is not stored yet; if it is already
        stored (same id) it still appears once. `include_internal` defaults to False for
        `recent` (user-facing context) and True for the other strategies and for an
        agent's perspective.

        With `agent`, the window is that agent's perspective (`context.perspective`):
        the full history before the trigger (`new_message`, else the stored message with seq
        `trigger`, else the newest), others' turns attributed, the "while you were away" block
        after its `last_processed_seq`, the marker, the trigger; `strategy` does not apply, and
        the older history is summarized only when the whole does not fit the budget.

        Raises `SessionExpired` for an expired session and `ContextBudgetExceeded` when the
        triggering message alone cannot fit.
        """
        session = self.get_session(ref, project=project)
        if session.status is SessionStatus.EXPIRED:
            raise SessionExpired(session.id, to_ts_or_none(session.expires_at) or "")
        chosen = check_strategy(strategy or self.settings.strategy)
        model_name = model or self.settings.model
        budget = self.budget_for(
            chosen, max_tokens=max_tokens, reserved_tokens=reserved_tokens, model=model_name
        )
        recent = check_positive(
            "keep_recent",
            self.settings.keep_recent_messages if keep_recent is None else keep_recent,
        )
        if include_internal is None:  # an agent's perspective sees everything by default
            include_internal = chosen is not StrategyName.RECENT or agent is not None
        history = StoreHistory(
            self.store,
            session.id,
            messages_in_store=session.message_count,
            include_internal=include_internal,
            page_size=StoreHistory.page_size_for(
                budget, session.stored_tokens / max(1, session.message_count)
            ),
        )
        builder = ContextBuilder(
            counter_for(encoding_for_model(model_name, default=self.encoding)),
            stored_encoding=self.encoding,
            # Checkpoints cover every stored message, so only a build that sees them all
            # may use (and extend) them.
            summarizer=self._checkpointed(session.id) if include_internal else self._summarizer,
        )
        pending = self.draft(new_message) if new_message is not None else None
        stored_pending = self._stored(session.id, pending)
        if stored_pending is not None and stored_pending.internal and not include_internal:
            pending = None  # stored, and not part of this view: no turn of its own either
        if agent is not None:
            name = _agent_name("agent", agent)
            state = self.store.get_agent_state(session.id, name)
            if trigger is not None:
                check_positive("trigger", trigger)
            return builder.build_perspective(
                session.id,
                history,
                agent=name,
                last_processed_seq=state.last_processed_seq if state else 0,
                budget=budget,
                trigger_seq=trigger,
                pending=pending,
            )
        return builder.build(
            session.id,
            history,
            strategy=chosen,
            budget=budget,
            keep_recent=recent,
            max_messages=(
                self.settings.max_history_messages if chosen is StrategyName.TRUNCATE else None
            ),
            pending=None if stored_pending is not None else pending,
        )

    def _stored(self, session_id: str, pending: MessageDraft | None) -> Message | None:
        """The stored message when the pending turn is stored already (same id, anywhere in the
        session): it is then part of the history, and must not be added a second time. The same
        id with other content is a `Conflict`, as appending it would be."""
        if pending is None:
            return None
        stored = self.store.find_messages(session_id, [pending.id]).get(pending.id)
        if stored is None:
            return None
        check_retry(stored, pending)
        return stored

    def _checkpointed(self, session_id: str) -> Checkpointed:
        return Checkpointed(
            self._summarizer, self.store, session_id, clock=self._clock, locks=self._locks
        )

    # -- multi-agent conversations --------------------------------------------------------

    def _event(
        self,
        session: Session,
        content: str,
        author: str | None,
        event: dict[str, Any],
        **extra: Any,
    ) -> Message:
        """Store a system event (phase transition, hand-off) in the history: `metadata.event`
        holds its fields (`kind` first); `extra` adds top-level metadata."""
        metadata = {EVENT_KEY: event, **extra}
        (stored,) = self.append_many(
            session, [NewMessage(Role.SYSTEM, content, author=author, metadata=metadata)]
        )
        return stored

    def set_phase(
        self,
        ref: SessionRef,
        phase: Phase | str,
        *,
        by: str | None = None,
        summary: str | None = None,
        project: str | None = None,
    ) -> Message:
        """Move the session to `phase` (chat, brainstorm, plan, execute, verification, chores,
        reflection) and record the transition in the history as a system event (`metadata.
        event.kind == "phase_transition"`, with who moved it and the hand-off summary if any).
        Returns the stored event."""
        new = check_phase(phase)
        if new is None:
            raise InvalidInput("phase", "a phase is needed")
        session = self.get_session(ref, project=project)
        by = check_name("by", by)
        summary = check_text("summary", summary)
        text = f"Phase changed from {session.phase or 'none'} to {new.value}"
        text += f" by {by}." if by else "."
        if summary:
            text += f"\nSummary: {summary}"
        event = self._event(
            session, text, by,
            {"kind": "phase_transition", "from": session.phase, "to": new.value, "by": by,
             "summary": summary},
            phase=new.value,  # what the web UI draws as a phase divider
        )  # fmt: skip
        self.store.update_session(session.id, SessionPatch(phase=new.value), now=self._clock())
        return event

    def handoff(
        self,
        ref: SessionRef,
        from_agent: str,
        to_agent: str,
        summary: str | None = None,
        *,
        project: str | None = None,
    ) -> Message:
        """Record that `from_agent` hands the work to `to_agent`, with a summary for the
        receiver, as a system event in the history (`metadata.event.kind == "handoff"`).
        The receiver sees it in its history, and in its "while you were away" block if it
        was away. Returns the stored event."""
        session = self.get_session(ref, project=project)
        source, target = _agent_name("from_agent", from_agent), _agent_name("to_agent", to_agent)
        summary = check_text("summary", summary)
        text = f"Hand-off from {source} to {target}."
        if summary:
            text += f"\nSummary: {summary}"
        return self._event(
            session, text, source,
            {"kind": "handoff", "from": source, "to": target, "summary": summary},
        )  # fmt: skip

    def agent_state(self, ref: SessionRef, agent: str, *, project: str | None = None) -> AgentState:
        """The agent's state in the session; an agent that never answered is at 0."""
        session = self.get_session(ref, project=project)
        name = _agent_name("agent", agent)
        return self.store.get_agent_state(session.id, name) or AgentState(session.id, name)

    def agent_states(self, ref: SessionRef, *, project: str | None = None) -> list[AgentState]:
        """Every agent's state in the session, by name."""
        return self.store.list_agent_states(self.get_session(ref, project=project).id)

    def update_agent_state(
        self,
        ref: SessionRef,
        agent: str,
        *,
        last_processed_seq: int | None = None,
        provider_session_id: str | None = None,
        project: str | None = None,
    ) -> AgentState:
        """Set the agent's position and/or provider session id (None keeps a field)."""
        session = self.get_session(ref, project=project)
        if last_processed_seq is not None:
            check_non_negative("last_processed_seq", last_processed_seq)
        update = AgentStateUpdate(
            last_processed_seq=last_processed_seq,
            provider_session_id=check_text("provider_session_id", provider_session_id),
        )
        name = _agent_name("agent", agent)
        return self.store.update_agent_state(session.id, name, update, now=self._clock())

    def agent_responded(
        self,
        ref: SessionRef,
        agent: str,
        reply: str | NewMessage | None = None,
        *,
        provider_session_id: str | None = None,
        execution_ms: int | None = None,
        project: str | None = None,
    ) -> AgentState:
        """Record that `agent` answered: store its `reply` (if given; authored by it), then
        move its state to the end of the history (the multi-agent runner's
        `lastProcessedMessageIndex` = history length), keep or replace its provider session id,
        and add `execution_ms` to its time. This, not a plain append, is what advances an agent."""
        session = self.get_session(ref, project=project)
        name = _agent_name("agent", agent)
        if execution_ms is not None:
            check_non_negative("execution_ms", execution_ms)
        if reply is not None:
            message = reply if isinstance(reply, NewMessage) else NewMessage(Role.ASSISTANT, reply)
            self.append_many(session, [dataclasses.replace(message, author=name)])
        update = AgentStateUpdate(
            last_processed_seq=self.store.get_session(session.id).last_seq,
            provider_session_id=check_text("provider_session_id", provider_session_id),
            add_execution_ms=execution_ms or 0,
            add_turns=1,
        )
        return self.store.update_agent_state(session.id, name, update, now=self._clock())

    def summaries(self, ref: SessionRef, *, project: str | None = None) -> list[SummaryCheckpoint]:
        """The session's stored summary checkpoints, oldest first."""
        return self.store.list_summaries(self.get_session(ref, project=project).id)

    # -- the conversation context object ----------------------------------------------------

    def conversation_context(
        self, ref: SessionRef, *, recent: int = RECENT_MESSAGES, project: str | None = None
    ) -> ConversationContext:
        """A digest of a conversation: count, first-message flag, the last `recent`
        user-facing messages, entities earlier answers referenced, and a summary of what came
        before the recent ones once there are more than `summary_threshold` messages.

        Reads go through the store's caches (a second call for an unchanged session is served
        from them; an append moves the version, so it never sees stale data). If the store
        cannot be reached, returns the empty context and logs the error instead of raising.
        """
        check_positive("recent", recent)
        try:
            session = self.get_session(ref, project=project)
            messages = self.store.read_messages(session.id)
        except BackendUnavailable as exc:
            _log.error("conversation_fetch_failed", session=str(ref), error=str(exc))
            return ConversationContext.empty(ref.id if isinstance(ref, Session) else ref)
        shown = [m for m in messages if not m.internal][-recent:]
        summary = None
        if session.message_count > self.settings.summary_threshold and shown:
            older = [m for m in messages if m.seq < shown[0].seq]
            summary = self._conversation_summary(session.id, older)
        return conversation.build(
            session.key or session.id,
            message_count=session.message_count,
            recent=shown,
            referenced=conversation.referenced_ids(messages),
            summary=summary,
        )

    def _conversation_summary(self, session_id: str, older: list[Message]) -> str | None:
        """The rolling summary of `older`, or None if there is nothing or it failed (logged
        and counted: a summary is never worth failing the request)."""
        if not older:
            return None
        try:
            return self._checkpointed(session_id).summarize(
                older, max_tokens=SUMMARY_TOKENS, counter=self.counter
            )
        except Exception as exc:
            metrics.SUMMARY_FAILURES.inc()
            _log.warning("summary_failed", session_id=session_id, error=str(exc))
            return None
