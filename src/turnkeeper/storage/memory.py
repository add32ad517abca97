"""`InMemoryStore`: the reference store — dicts behind one lock, every capability, no disk.

It exists to be obviously right, not fast: each method does the plain thing on plain dicts,
under one lock, so reading it tells a backend author what the contract in
`turnkeeper.storage.base` means, and `turnkeeper.testing` proves it keeps it. It is also a
real store for tests and throwaway processes (`turnkeeper.open("memory://")`): nothing
survives the process, and separate `InMemoryStore`s share nothing.

Values cross the boundary as copies, so a caller changing a returned session or message (or
the metadata it passed in) changes nothing stored — as with a database.
"""

from __future__ import annotations

import copy
import dataclasses
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from turnkeeper.errors import Conflict, NotFound, SessionErased, SessionNotFound
from turnkeeper.storage.appends import plan_append
from turnkeeper.storage.base import Store, WithoutVersion, check_fork, project_stats, session_stats
from turnkeeper.storage.codec import decode_cursor, encode_cursor, from_ts, to_ts
from turnkeeper.storage.search import words_of
from turnkeeper.types import (
    AgentState,
    AgentStateUpdate,
    ApiKey,
    Branch,
    ErasedSession,
    ExpiryReport,
    LegalHold,
    Message,
    MessageDraft,
    MessageQuery,
    NewSession,
    Page,
    ProjectStats,
    Role,
    SeqRanges,
    Session,
    SessionFilter,
    SessionPatch,
    SessionStats,
    SessionStatus,
    SummaryCheckpoint,
    Tombstone,
    TurnAttempt,
)

T = TypeVar("T")

SEARCHED = ("key", "subject", "title")
"""The session fields `SessionFilter.search` looks in."""


def _utc(value: datetime) -> datetime:
    """Times are stored in UTC (a naive time is taken as UTC), as the SQL backends return them."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _copy(value: T) -> T:
    return copy.deepcopy(value)


@dataclass
class _Log:
    """One session and everything hanging on it."""

    session: Session
    messages: dict[int, Message] = field(default_factory=dict)
    """By seq, in insertion order, which is seq order: appends add seqs above the last, and
    deletions (the last message, a reset, retention's oldest) keep the order of the rest."""
    agents: dict[str, AgentState] = field(default_factory=dict)
    summaries: dict[int, SummaryCheckpoint] = field(default_factory=dict)
    """By `covers_to_seq`."""
    traces: dict[int, str] = field(default_factory=dict)
    """By seq."""
    attempts: dict[str, TurnAttempt] = field(default_factory=dict)
    """By turn id."""
    held_at: datetime | None = None
    """When a legal hold was put on the session (`ErasureStore`); None when there is none."""
    words: dict[str, list[int]] = field(default_factory=dict)
    """The word index (`messages_with_words`): each word's seqs, oldest first. Brought up to
    date at a query by indexing the messages above `indexed_to` (appends only add seqs above
    it); anything else that changes the messages (`recompute_totals`) empties it."""
    indexed_to: int = 0

    def index_words(self) -> dict[str, list[int]]:
        """The word index, with every message indexed."""
        for seq in range(self.indexed_to + 1, self.session.last_seq + 1):
            message = self.messages.get(seq)
            for word in dict.fromkeys(words_of(message.content)) if message else ():
                self.words.setdefault(word, []).append(seq)
        self.indexed_to = max(self.indexed_to, self.session.last_seq)
        return self.words

    def bump(self, **changes: Any) -> Session:
        """Replace the session with `changes` applied and its version moved on."""
        self.session = dataclasses.replace(
            self.session, version=self.session.version + 1, **changes
        )
        return self.session

    def recompute_totals(self, now: datetime) -> Session:
        """The totals of the messages left; a cut point past the last of them goes back to 0
        (`CutPointStore`)."""
        last_seq = max(self.messages, default=0)
        return self.bump(
            **self._message_totals(),
            last_seq=last_seq,
            cut_seq=0 if self.session.cut_seq > last_seq else self.session.cut_seq,
            updated_at=now,
        )

    def retotal_keeping_seq(self) -> Session:
        """The totals of the messages left after retention took old ones, with `last_seq`,
        the cut point and `updated_at` as they were (`RetentionStore`)."""
        return self.bump(**self._message_totals())

    def _message_totals(self) -> dict[str, int]:
        self.words, self.indexed_to = {}, 0  # the index is rebuilt from what is left
        messages = self.messages.values()
        return {
            "message_count": len(self.messages),
            "stored_tokens": sum(m.tokens for m in messages),
            "usage_input_tokens": sum(m.usage.input_tokens for m in messages if m.usage),
            "usage_output_tokens": sum(m.usage.output_tokens for m in messages if m.usage),
            "usage_cache_read_tokens": sum(
                m.usage.cache_read_input_tokens for m in messages if m.usage
            ),
            "usage_cache_creation_tokens": sum(
                m.usage.cache_creation_input_tokens for m in messages if m.usage
            ),
        }


class InMemoryStore:
    """Every capability of `turnkeeper.storage.base` on dicts. See the module docstring."""

    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self._lock = threading.RLock()
        self._logs: dict[str, _Log] = {}
        self._meta: dict[str, str] = {}
        self._api_keys: dict[str, tuple[ApiKey, str]] = {}
        self._held: set[str] = set()
        self._forks: dict[str, Branch] = {}
        """By branch id; kept when the source goes (see `ForkStore`), read only while the
        branch itself exists."""
        self._tombstones: dict[str, Tombstone] = {}
        self._project_holds: dict[str, datetime] = {}

    def _log(self, session_id: str) -> _Log:
        log = self._logs.get(session_id)
        if log is None:
            raise self._gone(session_id)
        return log

    def _gone(self, session_id: str, project: str | None = None) -> SessionNotFound:
        """`SessionErased` for a tombstone, else `SessionNotFound`."""
        tombstone = self._tombstones.get(session_id)
        if tombstone is None:
            return SessionNotFound(session_id, project)
        erased_at = to_ts(tombstone.erased_at)
        return SessionErased(tombstone.session_id, tombstone.project, erased_at)

    def meta(self, name: str, default: str) -> str:
        with self._lock:
            return self._meta.setdefault(name, default)

    def close(self) -> None:
        """Nothing to release; the data stays until the store is dropped."""

    # -- sessions ---------------------------------------------------------------------------

    def _live_holder(self, project: str, key: str) -> _Log | None:
        return next(
            (
                log
                for log in self._logs.values()
                if log.session.project == project
                and log.session.key == key
                and log.session.status is SessionStatus.ACTIVE
            ),
            None,
        )

    def _release_stale_key(self, project: str, key: str, now: datetime) -> None:
        holder = self._live_holder(project, key)
        if holder is not None and holder.session.is_expired_at(now):
            holder.bump(status=SessionStatus.EXPIRED, updated_at=now)

    def _insert(self, new: NewSession, now: datetime) -> Session:
        if new.key is not None and self._live_holder(new.project, new.key) is not None:
            raise Conflict(f"key {new.key!r} is held by a live session of project {new.project!r}")
        expires_at = None if new.expires_at is None else _utc(new.expires_at)
        stored = dataclasses.replace(new, expires_at=expires_at, metadata=_copy(dict(new.metadata)))
        session = stored.created_as(str(uuid.uuid4()), now)
        self._logs[session.id] = _Log(session)
        return _copy(session)

    def create_session(self, new: NewSession, *, now: datetime) -> Session:
        now = _utc(now)
        with self._lock:
            if new.key is not None:
                self._release_stale_key(new.project, new.key, now)
            return self._insert(new, now)

    def get_or_create_session(self, new: NewSession, *, now: datetime) -> tuple[Session, bool]:
        if new.key is None:
            raise ValueError("get_or_create_session needs a key")
        now = _utc(now)
        with self._lock:
            self._release_stale_key(new.project, new.key, now)
            holder = self._live_holder(new.project, new.key)
            if holder is not None:
                return _copy(holder.session), False
            return self._insert(new, now), True

    def get_session(self, session_id: str) -> Session:
        with self._lock:
            return _copy(self._log(session_id).session)

    def lookup_session(self, ref: str, project: str) -> Session:
        with self._lock:
            log = self._logs.get(ref)
            if log is not None:
                return _copy(log.session)
            try:
                return self.find_session_by_key(project, ref)
            except SessionNotFound:
                raise self._gone(ref, project) from None

    def find_session_by_key(self, project: str, key: str) -> Session:
        with self._lock:
            held = [
                log.session
                for log in self._logs.values()
                if log.session.project == project and log.session.key == key
            ]
        if not held:
            raise SessionNotFound(key, project)
        best = max(held, key=lambda s: (s.status is SessionStatus.ACTIVE, s.updated_at, s.id))
        return _copy(best)

    def list_sessions(
        self, where: SessionFilter, *, limit: int, cursor: str | None = None
    ) -> Page[Session]:
        after = None
        if cursor is not None:
            after_updated, after_id = decode_cursor(cursor)
            after = (from_ts(after_updated), after_id)
        with self._lock:
            matching = [log.session for log in self._logs.values() if _matches(log.session, where)]
        matching.sort(key=lambda s: (s.updated_at, s.id), reverse=True)
        if after is not None:
            matching = [s for s in matching if (s.updated_at, s.id) < after]
        items = tuple(_copy(s) for s in matching[:limit])
        next_cursor = None
        if len(matching) > limit:
            next_cursor = encode_cursor(to_ts(items[-1].updated_at), items[-1].id)
        return Page(items=items, next_cursor=next_cursor)

    def update_session(self, session_id: str, patch: SessionPatch, *, now: datetime) -> Session:
        changes = _copy(patch.changes())
        if changes.get("expires_at") is not None:
            changes["expires_at"] = _utc(changes["expires_at"])
        with self._lock:
            return _copy(self._log(session_id).bump(**changes, updated_at=_utc(now)))

    def set_status(self, session_id: str, status: SessionStatus, *, now: datetime) -> Session:
        with self._lock:
            log = self._log(session_id)
            current = log.session
            if status is SessionStatus.ACTIVE and current.key is not None:
                holder = self._live_holder(current.project, current.key)
                if holder is not None and holder is not log:
                    raise Conflict(
                        f"key {current.key!r} is already held by another live session"
                        f" of project {current.project!r}"
                    )
            return _copy(log.bump(status=status, updated_at=_utc(now)))

    def reset_session(
        self, session_id: str, *, keep_system_message: bool, now: datetime
    ) -> Session:
        with self._lock:
            log = self._log(session_id)
            first = log.messages.get(1)
            keep = keep_system_message and first is not None and first.role is Role.SYSTEM
            log.messages = {1: first} if keep and first is not None else {}
            log.summaries.clear()
            log.traces.clear()
            for agent, state in log.agents.items():
                log.agents[agent] = dataclasses.replace(state, last_processed_seq=0)
            return _copy(log.recompute_totals(_utc(now)))

    def delete_session(self, session_id: str) -> None:
        with self._lock:
            self._log(session_id)
            del self._logs[session_id]

    # -- messages ---------------------------------------------------------------------------

    append_messages = WithoutVersion(Store.append_messages)

    def append_messages_versioned(
        self,
        session_id: str,
        drafts: Sequence[MessageDraft],
        *,
        expected_last_seq: int | None = None,
        now: datetime,
    ) -> tuple[list[Message], int | None]:
        if not drafts:
            return [], None
        now = _utc(now)
        with self._lock:
            log = self._log(session_id)
            stored = self._by_id(log, [draft.id for draft in drafts])
            plan = plan_append(
                log.session, drafts, stored, expected_last_seq=expected_last_seq, now=now
            )
            if plan.added:
                added = [
                    dataclasses.replace(
                        m, created_at=_utc(m.created_at), metadata=_copy(m.metadata)
                    )
                    for m in plan.added
                ]
                log.messages.update((m.seq, m) for m in added)
                for seq, data in plan.traces:
                    log.traces.setdefault(seq, data)
                session = log.bump(
                    last_seq=plan.last_seq,
                    message_count=log.session.message_count + len(added),
                    stored_tokens=log.session.stored_tokens + sum(m.tokens for m in added),
                    usage_input_tokens=log.session.usage_input_tokens
                    + sum(m.usage.input_tokens for m in added if m.usage),
                    usage_output_tokens=log.session.usage_output_tokens
                    + sum(m.usage.output_tokens for m in added if m.usage),
                    usage_cache_read_tokens=log.session.usage_cache_read_tokens
                    + sum(m.usage.cache_read_input_tokens for m in added if m.usage),
                    usage_cache_creation_tokens=log.session.usage_cache_creation_tokens
                    + sum(m.usage.cache_creation_input_tokens for m in added if m.usage),
                    updated_at=now,
                )
                fresh = {m.id: m for m in added}
                return [_copy(fresh.get(m.id, m)) for m in plan.result], session.version
            return _copy(plan.result), None

    @staticmethod
    def _by_id(log: _Log, ids: Sequence[str]) -> dict[str, Message]:
        wanted = set(ids)
        return {m.id: m for m in log.messages.values() if m.id in wanted}

    def find_messages(self, session_id: str, ids: Sequence[str]) -> dict[str, Message]:
        with self._lock:
            log = self._logs.get(session_id)
            return _copy(self._by_id(log, ids)) if log is not None else {}

    def _messages(self, session_id: str) -> list[Message]:
        """The session's messages in seq order, as stored (none for a missing session)."""
        with self._lock:
            log = self._logs.get(session_id)
            return list(log.messages.values()) if log is not None else []

    def read_messages(self, session_id: str, query: MessageQuery = MessageQuery()) -> list[Message]:
        return _copy(query.page(self._messages(session_id)))

    def read_messages_versioned(
        self, session_id: str, query: MessageQuery = MessageQuery()
    ) -> tuple[list[Message], int | None]:
        with self._lock:  # re-entrant: the page and the version of one moment
            log = self._logs.get(session_id)
            page = self.read_messages(session_id, query)
            return page, (log.session.version if log is not None and page else None)

    def count_messages(
        self, session_id: str, *, before_seq: int | None = None, include_internal: bool = True
    ) -> int:
        return sum(
            1
            for m in self._messages(session_id)
            if (before_seq is None or m.seq < before_seq) and (include_internal or not m.internal)
        )

    def message_seq_runs(
        self, session_id: str, *, from_seq: int, to_seq: int, include_internal: bool = True
    ) -> SeqRanges:
        query = MessageQuery(from_seq=from_seq, to_seq=to_seq, include_internal=include_internal)
        return SeqRanges.of(m.seq for m in self._messages(session_id) if query.selects(m))

    def move_cut_point(self, session_id: str, cut_seq: int, *, version: int) -> bool:
        with self._lock:
            log = self._logs.get(session_id)
            if log is None or log.session.version != version:
                return False
            log.session = dataclasses.replace(log.session, cut_seq=cut_seq)
            return True

    def delete_last_message(self, session_id: str, *, now: datetime) -> Message | None:
        with self._lock:
            log = self._log(session_id)
            if not log.messages:
                return None
            seq = max(log.messages)
            deleted = log.messages.pop(seq)
            log.traces = {s: data for s, data in log.traces.items() if s < seq}
            log.summaries = {s: c for s, c in log.summaries.items() if s < seq}
            for agent, state in log.agents.items():
                if state.last_processed_seq >= seq:
                    log.agents[agent] = dataclasses.replace(state, last_processed_seq=seq - 1)
            log.recompute_totals(_utc(now))
            return _copy(deleted)

    def messages_with_words(
        self, session_id: str, words: Sequence[str], *, limit: int
    ) -> dict[str, list[int]]:
        with self._lock:
            log = self._logs.get(session_id)
            index = log.index_words() if log is not None else {}
            found = {word: index.get(word, []) for word in words}
            return {word: seqs[max(0, len(seqs) - limit) :][::-1] for word, seqs in found.items()}

    # -- agent states -----------------------------------------------------------------------

    def get_agent_state(self, session_id: str, agent: str) -> AgentState | None:
        with self._lock:
            log = self._logs.get(session_id)
            return _copy(log.agents.get(agent)) if log is not None else None

    def list_agent_states(self, session_id: str) -> list[AgentState]:
        with self._lock:
            log = self._logs.get(session_id)
            states = list(log.agents.values()) if log is not None else []
        return _copy(sorted(states, key=lambda s: s.agent))

    def update_agent_state(
        self, session_id: str, agent: str, update: AgentStateUpdate, *, now: datetime
    ) -> AgentState:
        with self._lock:
            log = self._log(session_id)
            old = log.agents.get(agent) or AgentState(session_id=session_id, agent=agent)
            state = AgentState(
                session_id=session_id,
                agent=agent,
                last_processed_seq=(
                    old.last_processed_seq
                    if update.last_processed_seq is None
                    else update.last_processed_seq
                ),
                provider_session_id=(
                    old.provider_session_id
                    if update.provider_session_id is None
                    else update.provider_session_id
                ),
                execution_ms=old.execution_ms + update.add_execution_ms,
                turns=old.turns + update.add_turns,
                updated_at=_utc(now),
            )
            log.agents[agent] = state
            log.bump()
            return _copy(state)

    # -- summary checkpoints ----------------------------------------------------------------

    def latest_summary(
        self, session_id: str, *, upto_seq: int | None = None
    ) -> SummaryCheckpoint | None:
        with self._lock:
            log = self._logs.get(session_id)
            covered = [
                c
                for seq, c in (log.summaries.items() if log is not None else ())
                if upto_seq is None or seq <= upto_seq
            ]
        return _copy(max(covered, key=lambda c: c.covers_to_seq, default=None))

    def list_summaries(self, session_id: str) -> list[SummaryCheckpoint]:
        with self._lock:
            log = self._logs.get(session_id)
            checkpoints = list(log.summaries.values()) if log is not None else []
        return _copy(sorted(checkpoints, key=lambda c: c.covers_to_seq))

    def save_summary(self, checkpoint: SummaryCheckpoint) -> SummaryCheckpoint:
        with self._lock:
            log = self._log(checkpoint.session_id)
            if checkpoint.covers_to_seq not in log.summaries:
                stored = dataclasses.replace(checkpoint, created_at=_utc(checkpoint.created_at))
                log.summaries[checkpoint.covers_to_seq] = stored
                log.bump()
            return _copy(log.summaries[checkpoint.covers_to_seq])

    # -- branches ---------------------------------------------------------------------------

    def fork_session(
        self, source_id: str, at_seq: int, new: NewSession, *, now: datetime
    ) -> Session:
        now = _utc(now)
        with self._lock:
            source = self._log(source_id)
            check_fork(source.session, at_seq, new, now)
            if new.key is not None:
                self._release_stale_key(new.project, new.key, now)
            branch_id = self._insert(new, now).id
            branch = self._logs[branch_id]
            branch.messages = {
                seq: dataclasses.replace(m, session_id=branch_id)
                for seq, m in source.messages.items()
                if seq <= at_seq
            }
            branch.traces = {seq: t for seq, t in source.traces.items() if seq <= at_seq}
            branch.summaries = {
                seq: dataclasses.replace(c, session_id=branch_id)
                for seq, c in source.summaries.items()
                if seq <= at_seq
            }
            branch.agents = {
                agent: dataclasses.replace(
                    state,
                    session_id=branch_id,
                    last_processed_seq=min(state.last_processed_seq, at_seq),
                    provider_session_id=None,
                )
                for agent, state in source.agents.items()
            }
            self._forks[branch_id] = Branch(branch_id, source_id, at_seq, now)
            branch.session = dataclasses.replace(branch.session, cut_seq=source.session.cut_seq)
            return _copy(branch.recompute_totals(now))

    def list_branches(self, session_id: str) -> list[Branch]:
        with self._lock:
            self._log(session_id)
            branches = [
                b
                for b in self._forks.values()
                if b.parent_id == session_id and b.session_id in self._logs
            ]
        return sorted(branches, key=lambda b: (b.created_at, b.session_id))

    def fork_origin(self, session_id: str) -> Branch | None:
        with self._lock:
            self._log(session_id)
            return self._forks.get(session_id)

    # -- turn traces ------------------------------------------------------------------------

    def read_traces(self, session_id: str, *, upto_seq: int, limit: int) -> list[tuple[int, str]]:
        with self._lock:
            log = self._logs.get(session_id)
            traces = list(log.traces.items()) if log is not None else []
        return sorted((t for t in traces if t[0] <= upto_seq), reverse=True)[:limit]

    # -- lifecycle and statistics -----------------------------------------------------------

    def expire_sessions(
        self, *, now: datetime, delete: bool = False, grace: timedelta = timedelta(0)
    ) -> ExpiryReport:
        now = _utc(now)
        with self._lock:
            expired = []
            for log in self._logs.values():
                s = log.session
                due = s.expires_at is not None and s.expires_at <= now
                if s.status is SessionStatus.ACTIVE and due:
                    log.bump(status=SessionStatus.EXPIRED, updated_at=now)
                    expired.append(s.id)
            deleted = []
            if delete:
                for session_id, log in list(self._logs.items()):
                    s = log.session
                    since = s.expires_at if s.expires_at is not None else s.updated_at
                    if s.status is SessionStatus.EXPIRED and since <= now - grace:
                        del self._logs[session_id]
                        deleted.append(session_id)
        return ExpiryReport(expired=tuple(sorted(expired)), deleted=tuple(sorted(deleted)))

    def session_stats(self, session_id: str) -> SessionStats:
        with self._lock:
            log = self._log(session_id)
            session, messages = log.session, list(log.messages.values())
        by_role: dict[str, int] = {}
        for m in messages:
            by_role[m.role.value] = by_role.get(m.role.value, 0) + 1
        internal = sum(1 for m in messages if m.internal)
        times = [m.created_at for m in messages]
        return session_stats(
            session, by_role, internal, min(times, default=None), max(times, default=None)
        )

    def project_stats(self, project: str | None = None) -> list[ProjectStats]:
        with self._lock:
            sessions = [
                log.session
                for log in self._logs.values()
                if project is None or log.session.project == project
            ]
        return project_stats(
            (
                s.project,
                s.status.value,
                1,
                s.message_count,
                s.stored_tokens,
                s.usage_input_tokens,
                s.usage_output_tokens,
                s.usage_cache_read_tokens,
                s.usage_cache_creation_tokens,
            )
            for s in sorted(sessions, key=lambda s: s.project)
        )

    # -- bulk transfer ----------------------------------------------------------------------

    def import_session(
        self,
        session: Session,
        messages: Sequence[Message],
        traces: Sequence[tuple[int, str]] = (),
    ) -> int:
        with self._lock:
            if session.id in self._tombstones:
                raise self._gone(session.id)
            log = self._logs.get(session.id)
            if log is None:
                key_held = session.key is not None and (
                    self._live_holder(session.project, session.key) is not None
                )
                if session.status is SessionStatus.ACTIVE and key_held:
                    raise Conflict(
                        f"cannot import session {session.id}: key {session.key!r} is held"
                        f" by another live session of project {session.project!r}"
                    )
                log = _Log(
                    _copy(
                        dataclasses.replace(
                            session,
                            created_at=_utc(session.created_at),
                            updated_at=_utc(session.updated_at),
                            expires_at=None
                            if session.expires_at is None
                            else _utc(session.expires_at),
                            message_count=0,
                            last_seq=0,
                            stored_tokens=0,
                            usage_input_tokens=0,
                            usage_output_tokens=0,
                            usage_cache_read_tokens=0,
                            usage_cache_creation_tokens=0,
                        )
                    )
                )
                self._logs[session.id] = log
            added = 0
            for message in messages:
                known = any(m.id == message.id for m in log.messages.values())
                if known or message.seq in log.messages:
                    continue
                log.messages[message.seq] = _copy(
                    dataclasses.replace(
                        message, session_id=session.id, created_at=_utc(message.created_at)
                    )
                )
                added += 1
            log.messages = dict(sorted(log.messages.items()))
            for seq, data in traces:
                log.traces.setdefault(seq, data)
            if added:
                log.recompute_totals(_utc(session.updated_at))
                log.session = dataclasses.replace(log.session, version=session.version)
            return added

    # -- erasure, tombstones and legal holds ------------------------------------------------

    def _on_hold(self, log: _Log) -> bool:
        return log.held_at is not None or log.session.project in self._project_holds

    def erase_session(self, session_id: str, *, now: datetime) -> ErasedSession | None:
        with self._lock:
            log = self._log(session_id)
            if self._on_hold(log):
                return None
            del self._logs[session_id]
            project = log.session.project
            self._tombstones[session_id] = Tombstone(session_id, project, _utc(now))
            return ErasedSession(
                session_id=session_id,
                project=project,
                messages=len(log.messages),
                summaries=len(log.summaries),
                traces=len(log.traces),
                agent_states=len(log.agents),
                turn_attempts=len(log.attempts),
            )

    # -- message retention ------------------------------------------------------------------

    def count_messages_before(self, session_id: str, cutoff: datetime) -> int:
        cutoff = _utc(cutoff)
        return sum(1 for m in self._messages(session_id) if m.created_at <= cutoff)

    def delete_messages_before(self, session_id: str, cutoff: datetime) -> int | None:
        cutoff = _utc(cutoff)
        with self._lock:
            log = self._log(session_id)
            if self._on_hold(log):
                return None
            old = [seq for seq, m in log.messages.items() if m.created_at <= cutoff]
            if not old:
                return 0
            first = min(old)
            for seq in old:
                del log.messages[seq]
            log.traces = {s: data for s, data in log.traces.items() if s < first}
            log.summaries = {s: c for s, c in log.summaries.items() if s < first}
            log.retotal_keeping_seq()
            return len(old)

    def tombstones(self, session_ids: Sequence[str]) -> dict[str, Tombstone]:
        with self._lock:
            return {i: self._tombstones[i] for i in session_ids if i in self._tombstones}

    def lift_tombstones(self, session_ids: Sequence[str]) -> int:
        with self._lock:
            return sum(self._tombstones.pop(i, None) is not None for i in set(session_ids))

    def set_session_hold(self, session_id: str, held: bool, *, now: datetime) -> bool:
        with self._lock:
            log = self._log(session_id)
            log.held_at = (log.held_at or _utc(now)) if held else None
            return held

    def set_project_hold(self, project: str, held: bool, *, now: datetime) -> bool:
        with self._lock:
            if held:
                self._project_holds.setdefault(project, _utc(now))
            else:
                self._project_holds.pop(project, None)
            return held

    def legal_holds(self, project: str | None = None) -> list[LegalHold]:
        with self._lock:
            holds = [LegalHold(p, None, at) for p, at in self._project_holds.items()]
            holds += [
                LegalHold(log.session.project, log.session.id, log.held_at)
                for log in self._logs.values()
                if log.held_at is not None
            ]
        chosen = [h for h in holds if project is None or h.project == project]
        return sorted(
            chosen, key=lambda h: (h.project, h.session_id is not None, h.session_id or "")
        )

    def held_sessions(self, session_ids: Sequence[str]) -> frozenset[str]:
        with self._lock:
            return frozenset(
                i
                for i in session_ids
                if (log := self._logs.get(i)) is not None and self._on_hold(log)
            )

    # -- API keys ---------------------------------------------------------------------------

    def create_api_key(self, key: ApiKey, *, secret_hash: str) -> None:
        with self._lock:
            if key.id in self._api_keys:
                raise Conflict(f"API key {key.id!r} exists already")
            stored = dataclasses.replace(
                key,
                created_at=_utc(key.created_at),
                revoked_at=None if key.revoked_at is None else _utc(key.revoked_at),
            )
            self._api_keys[key.id] = (stored, secret_hash)

    def find_api_key(self, key_id: str) -> tuple[ApiKey, str] | None:
        with self._lock:
            return self._api_keys.get(key_id)

    def list_api_keys(self, project: str | None = None) -> list[ApiKey]:
        with self._lock:
            keys = [key for key, _ in self._api_keys.values()]
        chosen = [key for key in keys if project is None or key.project == project]
        return sorted(chosen, key=lambda key: (key.created_at, key.id))

    def revoke_api_key(self, key_id: str, *, now: datetime) -> ApiKey:
        with self._lock:
            if key_id not in self._api_keys:
                raise NotFound(f"API key {key_id!r} not found")
            key, secret_hash = self._api_keys[key_id]
            if key.revoked_at is None:
                key = dataclasses.replace(key, revoked_at=_utc(now))
                self._api_keys[key_id] = (key, secret_hash)
            return key

    # -- turn attempts ----------------------------------------------------------------------

    def begin_turn_attempt(
        self,
        session_id: str,
        turn_id: str,
        attempt_id: str,
        *,
        now: datetime,
        lease_until: datetime,
    ) -> TurnAttempt:
        with self._lock:
            attempts = self._log(session_id).attempts
            holder = attempts.get(turn_id)
            if holder is None or not holder.holds_turn_at(_utc(now)):
                holder = TurnAttempt(session_id, turn_id, attempt_id, _utc(lease_until))
                attempts[turn_id] = holder
            return holder

    def renew_turn_attempt(
        self, session_id: str, turn_id: str, attempt_id: str, *, lease_until: datetime
    ) -> bool:
        with self._lock:
            attempts = self._logs[session_id].attempts if session_id in self._logs else {}
            record = attempts.get(turn_id)
            if record is None or record.attempt_id != attempt_id or record.error is not None:
                return False
            attempts[turn_id] = dataclasses.replace(record, lease_until=_utc(lease_until))
            return True

    def end_turn_attempt(
        self, session_id: str, turn_id: str, attempt_id: str, *, error: str | None = None
    ) -> None:
        with self._lock:
            attempts = self._logs[session_id].attempts if session_id in self._logs else {}
            record = attempts.get(turn_id)
            if record is None or record.attempt_id != attempt_id:
                return
            if error is None:
                del attempts[turn_id]
            elif record.error is None:
                attempts[turn_id] = dataclasses.replace(record, error=error)

    def get_turn_attempt(self, session_id: str, turn_id: str) -> TurnAttempt | None:
        with self._lock:
            log = self._logs.get(session_id)
            return None if log is None else log.attempts.get(turn_id)

    # -- locks ------------------------------------------------------------------------------

    @contextmanager
    def exclusive_lock(self, name: str) -> Iterator[bool]:
        """The lock `name` among the users of this store (one process: its memory is the
        deployment). Never waits."""
        with self._lock:
            acquired = name not in self._held
            self._held.add(name)
        try:
            yield acquired
        finally:
            if acquired:
                with self._lock:
                    self._held.discard(name)


def _matches(session: Session, where: SessionFilter) -> bool:
    """Whether `session` passes every set field of `where`."""
    for name in ("project", "subject", "kind", "key", "status", "phase"):
        wanted = getattr(where, name)
        if wanted is not None and getattr(session, name) != wanted:
            return False
    if where.updated_since is not None and session.updated_at < _utc(where.updated_since):
        return False
    if where.search:
        needle = where.search.lower()
        if not any(needle in (getattr(session, name) or "").lower() for name in SEARCHED):
            return False
    return True
