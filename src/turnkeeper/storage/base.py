"""The storage contract every backend implements.

A store persists sessions and messages and guarantees ordering and atomicity; it does not
validate message content or count tokens (the service layer hands it finished
`MessageDraft`s) and it never decides what a model sees. Every method takes the session
explicitly, so one store serves any number of sessions and processes.

Times are passed in (`now`) rather than read from the clock, so behaviour around expiry is
decided by the caller and is testable.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Protocol

from turnkeeper.errors import Conflict
from turnkeeper.types import (
    AgentState,
    AgentStateUpdate,
    ApiKey,
    ExpiryReport,
    Message,
    MessageDraft,
    NewSession,
    Page,
    ProjectStats,
    Session,
    SessionFilter,
    SessionPatch,
    SessionStats,
    SessionStatus,
    SummaryCheckpoint,
)


class Store(Protocol):
    """Durable sessions and messages.

    Errors: a missing session raises `SessionNotFound`; a write that clashes with stored state
    raises `Conflict` (or `SeqConflict`, `SessionExpired`); an unreachable backend raises
    `BackendUnavailable`. A failed call changes nothing.
    """

    url: str
    """Where the data lives (a URL with any password removed)."""

    def meta(self, name: str, default: str) -> str:
        """A database-wide setting, fixed the first time it is asked for.

        The first call stores `default`; every later call (from any process) returns that
        stored value. Used for the token encoding the stored counts were made with.
        """
        ...

    # -- sessions ---------------------------------------------------------------------------

    def create_session(self, new: NewSession, *, now: datetime) -> Session:
        """Store a new active session with a fresh UUID.

        Raises `Conflict` if `new.key` is held by another active session of the project.
        """
        ...

    def get_or_create_session(self, new: NewSession, *, now: datetime) -> tuple[Session, bool]:
        """Return the live session holding `new.key` in `new.project`, or create one.

        A live session past its `expires_at` is marked expired first (it stays readable) and a new
        session takes the key. Returns the session and whether it was created. Atomic: two
        concurrent callers get the same session.
        """
        ...

    def get_session(self, session_id: str) -> Session:
        """The session with this id, whatever its status."""
        ...

    def find_session_by_key(self, project: str, key: str) -> Session:
        """The active session holding `key` in `project`; failing that, the most recently
        updated archived or expired session that held it."""
        ...

    def list_sessions(
        self, where: SessionFilter, *, limit: int, cursor: str | None = None
    ) -> Page[Session]:
        """Sessions matching `where`, most recently updated first (ties by id).

        `cursor` is an opaque `Page.next_cursor` from a previous call with the same filter.
        """
        ...

    def update_session(self, session_id: str, patch: SessionPatch, *, now: datetime) -> Session:
        """Apply the set fields of `patch`; bumps `updated_at` and `version`."""
        ...

    def set_status(self, session_id: str, status: SessionStatus, *, now: datetime) -> Session:
        """Move a session to `status` (archive, expire, or reactivate an archived one)."""
        ...

    def reset_session(
        self, session_id: str, *, keep_system_message: bool, now: datetime
    ) -> Session:
        """Delete the session's messages; with `keep_system_message`, keep the message at seq 1
        if it is a system message. Totals are recomputed and seq continues from what is left."""
        ...

    def delete_session(self, session_id: str) -> None:
        """Delete the session and all its messages."""
        ...

    # -- messages ---------------------------------------------------------------------------

    def append_messages(
        self,
        session_id: str,
        drafts: Sequence[MessageDraft],
        *,
        expected_last_seq: int | None = None,
        now: datetime,
    ) -> list[Message]:
        """Append `drafts` in order, atomically, giving them the next gapless seqs.

        Message ids are scoped to their session: the same id in two sessions names two
        messages, so no session (or tenant) can observe or claim another's ids. A draft whose
        id is already stored in this session with the same content is not stored again: the
        stored message is returned in its place (idempotent retries); with different content
        it raises `Conflict` naming the id, and one id twice in `drafts` raises `InvalidInput`.
        If every draft is already stored, nothing else is checked or written. Otherwise:
        - `expected_last_seq`, when given, must equal the session's last seq (`SeqConflict`);
        - the session must be active (`Conflict`) and not past `expires_at` (`SessionExpired`).
        A draft's `trace` is stored with it, keyed by its seq, in the same transaction.
        """
        ...

    def find_messages(self, session_id: str, ids: Sequence[str]) -> dict[str, Message]:
        """The messages of this session with these ids, by id (unknown ids are left out)."""
        ...

    def read_messages(
        self,
        session_id: str,
        *,
        from_seq: int | None = None,
        to_seq: int | None = None,
        include_internal: bool = True,
        newest_first: bool = False,
        limit: int | None = None,
    ) -> list[Message]:
        """Messages with `from_seq <= seq <= to_seq` (bounds inclusive, None = open), ordered by
        seq (descending with `newest_first`), at most `limit` of them. Served by the
        `(session_id, seq)` index: the cost grows with what is returned, not the session."""
        ...

    def count_messages(
        self, session_id: str, *, before_seq: int | None = None, include_internal: bool = True
    ) -> int:
        """How many messages have `seq < before_seq` (all of them when None), via the index."""
        ...

    # -- agent states (multi-agent) --------------------------------------------------------

    def get_agent_state(self, session_id: str, agent: str) -> AgentState | None:
        """The agent's state in the session; None if it never had one (it has processed
        nothing). A missing session also gives None."""
        ...

    def list_agent_states(self, session_id: str) -> list[AgentState]:
        """Every agent's state in the session, ordered by agent name."""
        ...

    def update_agent_state(
        self, session_id: str, agent: str, update: AgentStateUpdate, *, now: datetime
    ) -> AgentState:
        """Create or change the agent's state atomically: fields given as None are kept (a new
        state starts at 0 / None), `add_execution_ms` and `add_turns` are added. Bumps the
        session's `version` (not `updated_at`). Raises `SessionNotFound`."""
        ...

    # -- summary checkpoints ----------------------------------------------------------------

    def latest_summary(
        self, session_id: str, *, upto_seq: int | None = None
    ) -> SummaryCheckpoint | None:
        """The checkpoint with the highest `covers_to_seq` (at most `upto_seq`), or None."""
        ...

    def list_summaries(self, session_id: str) -> list[SummaryCheckpoint]:
        """Every checkpoint of the session, by `covers_to_seq`."""
        ...

    def save_summary(self, checkpoint: SummaryCheckpoint) -> SummaryCheckpoint:
        """Store a checkpoint unless one covering the same seq exists; returns the stored one
        (the first writer wins, so concurrent builders agree). Storing bumps the session's
        `version`. `reset_session` deletes the checkpoints and moves every agent back to 0.
        Raises `SessionNotFound`."""
        ...

    # -- turn traces ------------------------------------------------------------------------

    # Traces are written only with their reply (`MessageDraft.trace`) or by `import_session`.
    # Deleting the message, resetting or deleting the session deletes its trace.

    def read_traces(self, session_id: str, *, upto_seq: int, limit: int) -> list[tuple[int, str]]:
        """Up to `limit` traces `(seq, data)` at or before `upto_seq`, newest first."""
        ...

    # -- lifecycle and statistics -----------------------------------------------------------

    def expire_sessions(
        self, *, now: datetime, delete: bool = False, grace: timedelta = timedelta(0)
    ) -> ExpiryReport:
        """Mark active sessions whose `expires_at <= now` as expired; with `delete`, also delete
        expired sessions whose `expires_at <= now - grace`. Returns the ids affected."""
        ...

    def session_stats(self, session_id: str) -> SessionStats:
        """Counts and token totals of one session."""
        ...

    def project_stats(self, project: str | None = None) -> list[ProjectStats]:
        """Totals per project (one project, or all of them ordered by name)."""
        ...

    # -- bulk transfer ----------------------------------------------------------------------

    def import_session(
        self,
        session: Session,
        messages: Sequence[Message],
        traces: Sequence[tuple[int, str]] = (),
    ) -> int:
        """Store a session and its messages exactly as given (ids, seqs, times, counts), and
        the turn traces `(seq, data)` of its replies, in one transaction.

        Idempotent: an existing session is kept, only messages whose id is not yet stored are
        added, and a trace for a seq that has one already is skipped. Returns how many
        messages were added.
        """
        ...

    # -- API keys ---------------------------------------------------------------------------

    def create_api_key(self, key: ApiKey, *, secret_hash: str) -> None:
        """Store a new API key record with the hash of its secret (never the secret).

        Raises `Conflict` if `key.id` is already stored.
        """
        ...

    def find_api_key(self, key_id: str) -> tuple[ApiKey, str] | None:
        """The key with this id and its stored secret hash, revoked or not; None if unknown
        (authentication treats both the same, so this does not raise)."""
        ...

    def list_api_keys(self, project: str | None = None) -> list[ApiKey]:
        """Keys of `project` (all projects when None), oldest first, revoked ones included."""
        ...

    def revoke_api_key(self, key_id: str, *, now: datetime) -> ApiKey:
        """Mark the key revoked at `now` (a key revoked already keeps its first `revoked_at`).
        Raises `NotFound` for an unknown id."""
        ...

    def close(self) -> None:
        """Release connections. The store is unusable afterwards."""
        ...

    # -- undo (the OpenAI Agents SDK's `Session.pop_item`) --------------------------------

    def delete_last_message(self, session_id: str, *, now: datetime) -> Message | None:
        """Delete the message with the highest seq and return it (None if there is none).

        Totals are recomputed and the next append reuses the freed seq, as after
        `reset_session`; summary checkpoints covering it are dropped and agent positions past
        it move back. Works whatever the session's status. Raises `SessionNotFound`."""
        ...


def same_message(stored: Message, draft: MessageDraft) -> bool:
    """True when `draft` says what `stored` says: a retry of it, not a different message.

    Compared: everything a client sends (role, content, author, internal, tool calls, usage,
    metadata); not what the service derives (seq, tokens, created_at)."""
    return (
        stored.role is draft.role
        and stored.content == draft.content
        and stored.author == draft.author
        and stored.internal == draft.internal
        and stored.tool_calls == draft.tool_calls
        and stored.tool_call_id == draft.tool_call_id
        and stored.usage == draft.usage
        and dict(stored.metadata) == dict(draft.metadata)
    )


def check_retry(stored: Message, draft: MessageDraft) -> None:
    """`Conflict` naming the id when `draft` reuses a stored message's id for other content."""
    if not same_message(stored, draft):
        raise Conflict(
            f"message id {draft.id!r} is already stored in this session with different content"
        )
