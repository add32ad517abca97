"""The storage contract: a small core every backend has, and optional capabilities.

A store persists sessions and their message log and guarantees ordering and atomicity; it does
not validate message content or count tokens (the service layer hands it finished
`MessageDraft`s) and it never decides what a model sees. Every method takes the session
explicitly, so one store serves any number of sessions and processes.

`Store` is the core: the session and message log, enough for conversation memory. Everything
else is a capability a backend may offer — `AgentStateStore`, `SummaryStore`, `TraceStore`,
`ApiKeyStore`, `AdminStore`, `TransferStore`, `LockingStore`, `ForkStore`, `TurnAttemptStore`,
`CutPointStore`, `ErasureStore`, `RetentionStore`,
`SessionLookupStore`, `VersionedReadStore`, `KnownVersionReadStore`, `SeqRunStore` — each a `runtime_checkable`
Protocol, so `isinstance(store, SummaryStore)` answers whether a store has it and `require`
turns a missing one into a clear `Unsupported` error naming the feature that needed it. The
bundled backends (SQLite, PostgreSQL, `InMemoryStore`) have all of them; `FullStore` names
that set for code that needs it whole.

Times are passed in (`now`) rather than read from the clock, so behaviour around expiry is
decided by the caller and is testable. `turnkeeper.testing` holds the contract suite: run it
against a store to prove it keeps what the docstrings here say.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import (
    Any,
    Concatenate,
    Generic,
    ParamSpec,
    Protocol,
    TypeVar,
    cast,
    overload,
    runtime_checkable,
)

from turnkeeper.errors import (
    Conflict,
    InvalidInput,
    SessionExpired,
    SessionNotFound,
    Unsupported,
)
from turnkeeper.storage.codec import to_ts_or_none
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

__all__ = [
    "AdminStore",
    "AgentStateStore",
    "ApiKeyStore",
    "CutPointStore",
    "ErasureStore",
    "ForkStore",
    "FullStore",
    "Inner",
    "KnownVersionReadStore",
    "LockingStore",
    "RetentionStore",
    "SeqRunStore",
    "SessionLookupStore",
    "Store",
    "StoreWrapper",
    "SummaryStore",
    "TraceStore",
    "TransferStore",
    "TurnAttemptStore",
    "VersionedReadStore",
    "WithoutVersion",
    "check_fork",
    "check_retry",
    "every_session",
    "lookup_session",
    "message_seq_runs",
    "read_messages_at",
    "require",
    "same_message",
]

P = ParamSpec("P")
R = TypeVar("R")


class Inner(Generic[P, R]):
    """A method of a store wrapper (`CachedStore`, `EncryptedStore`) that is the wrapped store's
    own, unchanged: `get_session = Inner(Store.get_session)` reads `self.inner.get_session`.

    Typed as the protocol method it names, so a wrapper still type-checks as a `Store`, and
    each wrapper says what it passes through in one line a method rather than repeating every
    signature of the contract."""

    def __init__(self, method: Callable[Concatenate[Any, P], R]) -> None:
        self.name = method.__name__

    @overload
    def __get__(self, wrapper: None, owner: type) -> Inner[P, R]: ...

    @overload
    def __get__(self, wrapper: object, owner: type) -> Callable[P, R]: ...

    def __get__(self, wrapper: object | None, owner: type) -> Any:
        if wrapper is None:
            return self
        return getattr(wrapper.inner, self.name)  # type: ignore[attr-defined]


class WithoutVersion(Generic[P]):
    """`append_messages` of a store whose append says the version it wrote
    (`append_messages_versioned`, `VersionedAppendStore`): the same append, the version left
    out, so such a store writes its append once. `append_messages =
    WithoutVersion(Store.append_messages)` is typed as the protocol's method."""

    def __init__(self, method: Callable[Concatenate[Any, P], list[Message]]) -> None:
        del method  # only its type is wanted

    @overload
    def __get__(self, store: None, owner: type) -> WithoutVersion[P]: ...

    @overload
    def __get__(self, store: object, owner: type) -> Callable[P, list[Message]]: ...

    def __get__(self, store: object | None, owner: type) -> Any:
        if store is None:
            return self
        versioned = store.append_messages_versioned  # type: ignore[attr-defined]

        def append_messages(*args: P.args, **kwargs: P.kwargs) -> list[Message]:
            stored: list[Message] = versioned(*args, **kwargs)[0]
            return stored

        return append_messages


@runtime_checkable
class Store(Protocol):
    """Durable sessions and their ordered message logs — what every backend must have.

    Errors: a missing session raises `SessionNotFound` (reads of a missing session's messages
    return nothing instead); a write that clashes with stored state raises `Conflict` (or
    `SeqConflict`, `SessionExpired`); an unreachable backend raises `BackendUnavailable`. A
    failed call changes nothing. Every write to a session bumps its `version` (caches key on
    it), and returned values are the caller's: changing them changes nothing stored.
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
        """Store a new active session with a fresh UUID, `created_at == updated_at == now`,
        zero totals and `version` 0.

        A key is unique among the active sessions of a project: a live holder past its
        `expires_at` is marked expired first (freeing the key); otherwise `Conflict` naming the
        key. Archived, expired and deleted sessions do not hold their key.
        """
        ...

    def get_or_create_session(self, new: NewSession, *, now: datetime) -> tuple[Session, bool]:
        """Return the live session holding `new.key` in `new.project`, or create one.

        A live session past its `expires_at` is marked expired first (it stays readable) and a
        new session takes the key. Returns the session and whether it was created. Atomic: two
        concurrent callers get the same session. `ValueError` without a key.
        """
        ...

    def get_session(self, session_id: str) -> Session:
        """The session with this id, whatever its status; `SessionNotFound` naming the id."""
        ...

    def find_session_by_key(self, project: str, key: str) -> Session:
        """The active session holding `key` in `project`; failing that, the most recently
        updated archived or expired session that held it; failing that, `SessionNotFound`."""
        ...

    def list_sessions(
        self, where: SessionFilter, *, limit: int, cursor: str | None = None
    ) -> Page[Session]:
        """Sessions matching `where`, most recently updated first (ties by id, descending), at
        most `limit` per page.

        `cursor` is an opaque `Page.next_cursor` from a previous call with the same filter; it
        is None on the last page. A cursor this store did not make raises `InvalidInput`
        naming `cursor`. `where.search` matches key, subject or title, ignoring case.
        """
        ...

    def update_session(self, session_id: str, patch: SessionPatch, *, now: datetime) -> Session:
        """Apply the set fields of `patch`; bumps `updated_at` and `version`."""
        ...

    def set_status(self, session_id: str, status: SessionStatus, *, now: datetime) -> Session:
        """Move a session to `status` (archive, expire, or reactivate an archived one); bumps
        `updated_at` and `version`. Reactivating raises `Conflict` when another active session
        of the project holds the key meanwhile."""
        ...

    def reset_session(
        self, session_id: str, *, keep_system_message: bool, now: datetime
    ) -> Session:
        """Delete the session's messages; with `keep_system_message`, keep the message at seq 1
        if it is a system message. Totals are recomputed and seq continues from what is left.
        Whatever hangs on the deleted seqs goes too: summary checkpoints and turn traces are
        deleted and every agent's position moves back to 0 (for stores with those
        capabilities)."""
        ...

    def delete_session(self, session_id: str) -> None:
        """Delete the session and everything of it (messages, agent states, checkpoints,
        traces). Its key is free again."""
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
        """Append `drafts` in order, atomically, giving them the next gapless seqs (the first
        message of a session is seq 1); returns one message per draft, in draft order.

        Message ids are scoped to their session: the same id in two sessions names two
        messages, so no session (or tenant) can observe or claim another's ids. A draft whose
        id is already stored in this session with the same content is not stored again: the
        stored message is returned in its place (idempotent retries); with different content
        it raises `Conflict` naming the id, and one id twice in `drafts` raises `InvalidInput`.
        If every draft is already stored, nothing else is checked or written. Otherwise:
        - `expected_last_seq`, when given, must equal the session's last seq (`SeqConflict`);
        - the session must not be expired or past `expires_at` (`SessionExpired`) and must be
          active (`Conflict`).
        The session's totals (`message_count`, `last_seq`, `stored_tokens`, usage) grow by what
        was added, and `updated_at` becomes `now`. A draft's `trace` is stored with it, keyed
        by its seq, in the same transaction (by a `TraceStore`; others drop it). An empty
        `drafts` returns `[]` without looking at the session.
        """
        ...

    def find_messages(self, session_id: str, ids: Sequence[str]) -> dict[str, Message]:
        """The messages of this session with these ids, by id (unknown ids are left out)."""
        ...

    def read_messages(self, session_id: str, query: MessageQuery = MessageQuery()) -> list[Message]:
        """The page `query` names: messages with `from_seq <= seq <= to_seq` (bounds inclusive,
        None = open), ordered by seq (descending with `newest_first`), at most `limit` of them
        (taken from the start of that order). Without `include_internal`, internal messages
        are left out before the limit applies (`MessageQuery.page` is the rule on a list).
        The cost should grow with what is returned, not the session."""
        ...

    def count_messages(
        self, session_id: str, *, before_seq: int | None = None, include_internal: bool = True
    ) -> int:
        """How many messages have `seq < before_seq` (all of them when None)."""
        ...

    def delete_last_message(self, session_id: str, *, now: datetime) -> Message | None:
        """Delete the message with the highest seq and return it (None if there is none).

        Totals are recomputed and the next append reuses the freed seq, as after
        `reset_session`; summary checkpoints covering it and its trace are dropped and agent
        positions past it move back (for stores with those capabilities). Works whatever the
        session's status. The undo of the OpenAI Agents SDK's `Session.pop_item`."""
        ...

    def close(self) -> None:
        """Release connections. The store is unusable afterwards."""
        ...


# -- capabilities -----------------------------------------------------------------------------


@runtime_checkable
class AgentStateStore(Protocol):
    """Per-agent progress through a session (multi-agent conversations)."""

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
        state starts at 0 / None), `add_execution_ms` and `add_turns` are added; `updated_at`
        becomes `now`. Bumps the session's `version` (not `updated_at`). Raises
        `SessionNotFound`."""
        ...


@runtime_checkable
class SummaryStore(Protocol):
    """Summary checkpoints: the text standing in for a session's messages up to a seq."""

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
        `version`; a checkpoint that lost changes nothing. Raises `SessionNotFound`."""
        ...


@runtime_checkable
class CutPointStore(Protocol):
    """A session's cut point (`Session.cut_seq`): where the windows of a strategy that leaves
    older turns out start, kept with the session so that every process and replica builds
    the same window from it.

    Read with the session (it is a field of `Session`). It is bookkeeping of the windows, not
    a change to the conversation: moving it neither bumps the session's `version` nor its
    `updated_at` (no cached read depends on it; a build reads the session row first). A
    deletion that takes the messages at or after it (`reset_session`, `delete_last_message`)
    puts it back to 0 (none), and a branch (`ForkStore.fork_session`) starts with its
    source's cut point, or 0 when the cut is past the fork point."""

    def move_cut_point(self, session_id: str, cut_seq: int, *, version: int) -> bool:
        """Store `cut_seq` as the session's cut point if the session is still at `version`
        (the one the window that moved it was built from): a compare-and-set, so a build of
        an older state never overwrites one of a newer state. True when stored; False when
        the session moved on or is gone (the next build moves the cut point again)."""
        ...


@runtime_checkable
class TraceStore(Protocol):
    """Turn traces: what a reply was built from, kept beside the reply.

    Traces are written only with their reply (`MessageDraft.trace`) or by `import_session`.
    Deleting the message, resetting or deleting the session deletes its trace.
    """

    def read_traces(self, session_id: str, *, upto_seq: int, limit: int) -> list[tuple[int, str]]:
        """Up to `limit` traces `(seq, data)` at or before `upto_seq`, newest first."""
        ...


@runtime_checkable
class SessionLookupStore(Protocol):
    """A session by id or else by key in one read: the service resolves every request's
    session reference, and on a networked database two reads are two round trips."""

    def lookup_session(self, ref: str, project: str) -> Session:
        """The session whose id is `ref`, else the one `find_session_by_key(project, ref)`
        gives. Raises `SessionNotFound(ref, project)` when neither exists."""
        ...


def every_session(store: Store, where: SessionFilter = SessionFilter()) -> Iterator[Session]:
    """Every session matching `where`, paging through `list_sessions` (the whole-store jobs:
    expiry, retention, erasure by subject or project, listings of ids)."""
    cursor: str | None = None
    while True:
        page = store.list_sessions(where, limit=500, cursor=cursor)
        yield from page.items
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def lookup_session(store: Store, ref: str, project: str) -> Session:
    """`store.lookup_session(ref, project)`, or for a store without it the same in two reads."""
    if isinstance(store, SessionLookupStore):
        return store.lookup_session(ref, project)
    try:
        return store.get_session(ref)
    except SessionNotFound:
        return store.find_session_by_key(project, ref)


@runtime_checkable
class VersionedReadStore(Protocol):
    """A page of messages with the session's version it was read at, in one read.

    A cache keys pages by the session's `version`; without this it reads the session row
    after a page to be sure nothing was written meanwhile, one more round trip per page on a
    networked database."""

    def read_messages_versioned(
        self, session_id: str, query: MessageQuery = MessageQuery()
    ) -> tuple[list[Message], int | None]:
        """`read_messages(session_id, query)` and the session's `version` of the same snapshot
        (None when it cannot tell, e.g. for an empty page)."""
        ...


@runtime_checkable
class VersionedAppendStore(Protocol):
    """An append that says which version of the session it wrote.

    A cache holding a session's pages at the version before an append can then carry them to
    the version after it (the pages plus what was appended) instead of reading them again: the
    append is the one write between the two versions, so nothing else can have changed."""

    def append_messages_versioned(
        self,
        session_id: str,
        drafts: Sequence[MessageDraft],
        *,
        expected_last_seq: int | None = None,
        now: datetime,
    ) -> tuple[list[Message], int | None]:
        """`append_messages(...)` and the session's `version` its write left (the version
        before it is one less), or None when it wrote nothing (every draft a retry)."""
        ...


@runtime_checkable
class KnownVersionReadStore(Protocol):
    """Pages read by a caller that knows the session's version already (a context build
    reads the session first): a cache answers for that version without reading the session
    row again. A store without a cache has no use for the version and need not offer this."""

    def read_messages_at(
        self, session_id: str, version: int, query: MessageQuery = MessageQuery()
    ) -> list[Message]:
        """`read_messages(session_id, query)` for a caller that read the session at `version`:
        the page as it was at `version`, or a newer one."""
        ...


def read_messages_at(
    store: Store, session_id: str, version: int | None, query: MessageQuery = MessageQuery()
) -> list[Message]:
    """A page of `session_id` for a caller that read the session at `version`: through
    `read_messages_at` where the store has it (a cache), else `read_messages`."""
    if version is not None and isinstance(store, KnownVersionReadStore):
        return store.read_messages_at(session_id, version, query)
    return store.read_messages(session_id, query)


@runtime_checkable
class SeqRunStore(Protocol):
    """Where a session's messages sit, without reading them: a context build names every
    message it left out, older ones it never read included, and in a view without internal
    messages those are not one run of seqs."""

    def message_seq_runs(
        self, session_id: str, *, from_seq: int, to_seq: int, include_internal: bool = True
    ) -> SeqRanges:
        """The seqs of the messages with `from_seq <= seq <= to_seq` (without internal ones
        unless `include_internal`), as runs. Costs what counting them costs: no message is
        read. A missing session has none."""
        ...


def message_seq_runs(
    store: Store, session_id: str, *, from_seq: int, to_seq: int, include_internal: bool
) -> SeqRanges:
    """`store.message_seq_runs(...)`, or for a store without it the seqs of the messages read."""
    if isinstance(store, SeqRunStore):
        return store.message_seq_runs(
            session_id, from_seq=from_seq, to_seq=to_seq, include_internal=include_internal
        )
    query = MessageQuery(from_seq=from_seq, to_seq=to_seq, include_internal=include_internal)
    return SeqRanges.of(message.seq for message in store.read_messages(session_id, query))


@runtime_checkable
class ApiKeyStore(Protocol):
    """API key records for the HTTP service (never the secrets, only their hashes)."""

    def create_api_key(self, key: ApiKey, *, secret_hash: str) -> None:
        """Store a new API key record with the hash of its secret.

        Raises `Conflict` if `key.id` is already stored.
        """
        ...

    def find_api_key(self, key_id: str) -> tuple[ApiKey, str] | None:
        """The key with this id and its stored secret hash, revoked or not; None if unknown
        (authentication treats both the same, so this does not raise)."""
        ...

    def list_api_keys(self, project: str | None = None) -> list[ApiKey]:
        """Keys of `project` (all projects when None), oldest first (ties by id), revoked
        ones included."""
        ...

    def revoke_api_key(self, key_id: str, *, now: datetime) -> ApiKey:
        """Mark the key revoked at `now` (a key revoked already keeps its first `revoked_at`).
        Raises `NotFound` for an unknown id."""
        ...


@runtime_checkable
class AdminStore(Protocol):
    """Whole-store operations: the expiry sweep and statistics."""

    def expire_sessions(
        self, *, now: datetime, delete: bool = False, grace: timedelta = timedelta(0)
    ) -> ExpiryReport:
        """Mark active sessions whose `expires_at <= now` as expired (bumping `updated_at` and
        `version`); with `delete`, also delete expired sessions whose `expires_at` (or, without
        one, `updated_at`) is at or before `now - grace`. Returns the ids affected, sorted."""
        ...

    def session_stats(self, session_id: str) -> SessionStats:
        """Counts and token totals of one session. Raises `SessionNotFound`."""
        ...

    def project_stats(self, project: str | None = None) -> list[ProjectStats]:
        """Totals per project (one project, or all of them ordered by name); a project
        without sessions is left out."""
        ...


@runtime_checkable
class TransferStore(Protocol):
    """Bulk import of sessions exported elsewhere (`turnkeeper import`, the JSONL restore)."""

    def import_session(
        self,
        session: Session,
        messages: Sequence[Message],
        traces: Sequence[tuple[int, str]] = (),
    ) -> int:
        """Store a session and its messages exactly as given (ids, seqs, times, counts), and
        the turn traces `(seq, data)` of its replies, in one transaction.

        Idempotent: an existing session is kept, only messages whose id and seq are not yet
        stored are added, and a trace for a seq that has one already is skipped. When
        messages were added, the totals are recomputed and the session's `updated_at` and
        `version` are those given. Returns how many messages were added. A new session whose
        key is held by another active session of the project raises `Conflict`.
        """
        ...


@runtime_checkable
class LockingStore(Protocol):
    """Deployment-wide named locks, so a periodic job (the expiry sweeper) runs once however
    many processes or replicas share the store."""

    def exclusive_lock(self, name: str) -> AbstractContextManager[bool]:
        """Try to take the lock `name` for the duration of the `with` block, without waiting.

        Yields True when this caller holds it, False when another holder has it (in this
        process or another); a False block must not do the guarded work. The lock is released
        when the block ends, and if the holding process dies. Locks of different names are
        independent.
        """
        ...


@runtime_checkable
class ForkStore(Protocol):
    """Branches: a new session whose history starts as a prefix of another's.

    Copy-on-fork, not a parent pointer: `fork_session` copies the prefix's rows (messages,
    their turn traces, the summary checkpoints and agent positions that cover only the prefix)
    into the branch in one transaction, and records where it came from. A fork costs
    O(prefix) rows; in exchange a branch is an ordinary session to every other method — reads,
    windows, the caches, stats, export and expiry need no notion of ancestry, appends to either
    side can never show up in the other, and deleting or resetting the source leaves its
    branches whole.
    """

    def fork_session(
        self, source_id: str, at_seq: int, new: NewSession, *, now: datetime
    ) -> Session:
        """Create an active session from `new` whose messages are copies of the source's with
        `seq <= at_seq` (same ids, seqs, contents and times), and record it as a branch of the
        source at `at_seq`. Atomic.

        Copied with it: the turn traces of those messages, the summary checkpoints with
        `covers_to_seq <= at_seq`, and every agent's state with its position capped at
        `at_seq` (its provider session is not copied: it belongs to the source's line). The
        branch's totals are those of its messages; its `created_at`/`updated_at` are `now`.

        Raises `SessionNotFound` (source), `InvalidInput` naming `at_seq` unless
        `0 <= at_seq <= last_seq`, or naming `project` unless `new.project` is the source's,
        `SessionExpired` for an expired source, `Conflict` for an archived one or when
        `new.key` is held by a live session of the project (`check_fork` decides, for every
        backend alike).
        """
        ...

    def list_branches(self, session_id: str) -> list[Branch]:
        """The branches forked from this session, oldest first (ties by id); branches deleted
        since are left out. Raises `SessionNotFound`."""
        ...

    def fork_origin(self, session_id: str) -> Branch | None:
        """Where this session was forked from; None for a session that is not a branch. Raises
        `SessionNotFound`."""
        ...


@runtime_checkable
class TurnAttemptStore(Protocol):
    """Which request is answering each chat turn (`TurnAttempt`), shared by every process on
    the store, so a retry that arrives while the model is still answering waits for that answer
    instead of asking again.

    A record is keyed by the session and the turn's message id, and goes with its session
    (deleting the session deletes it). Times are the caller's (`now`, `lease_until`).
    """

    def begin_turn_attempt(
        self,
        session_id: str,
        turn_id: str,
        attempt_id: str,
        *,
        now: datetime,
        lease_until: datetime,
    ) -> TurnAttempt:
        """Record `attempt_id` as answering the turn until `lease_until`, unless another
        attempt holds it (`TurnAttempt.holds_turn_at(now)`: not failed, lease past `now`).

        Returns the record after the call: this attempt's when it now holds the turn (a failed
        or lapsed holder is replaced, its error cleared), else the holder's, unchanged. Atomic
        across processes: of attempts beginning at once, exactly one gets its own record back.
        Raises `SessionNotFound`.
        """
        ...

    def renew_turn_attempt(
        self, session_id: str, turn_id: str, attempt_id: str, *, lease_until: datetime
    ) -> bool:
        """Move the lease of `attempt_id` on to `lease_until`; False (and nothing changed) when
        the record is no longer this attempt's or has failed."""
        ...

    def end_turn_attempt(
        self, session_id: str, turn_id: str, attempt_id: str, *, error: str | None = None
    ) -> None:
        """`attempt_id` is done with the turn. Without `error` (its reply is stored, or it gave
        up before asking the model) the record is deleted; with one it stays, holding the
        failure for the attempts that waited, and the turn is free. Nothing happens when the
        record is no longer this attempt's."""
        ...

    def get_turn_attempt(self, session_id: str, turn_id: str) -> TurnAttempt | None:
        """The turn's record, or None (no attempt began, or the last one ended well)."""
        ...


@runtime_checkable
class ErasureStore(Protocol):
    """Erasure, tombstones and legal holds: forgetting a session for good, unless the law says
    to keep it.

    `erase_session` deletes the session and everything of it (as `delete_session` does) and
    leaves a `Tombstone` in the same transaction: from then on every method that names the
    session raises `SessionErased` (a `SessionNotFound`) where it raised `SessionNotFound`,
    and `TransferStore.import_session` refuses the id, until `lift_tombstones` removes it.
    A tombstone holds the id, the project and the time, nothing a person wrote.

    A legal hold stands on one session (a field of the session, gone with it) or on a whole
    project (kept whether or not the project has sessions). A held session is never erased:
    `erase_session` leaves it as it is. Setting or clearing a hold is not a change to the
    conversation: it bumps neither `version` nor `updated_at`.
    """

    def erase_session(self, session_id: str, *, now: datetime) -> ErasedSession | None:
        """Delete the session with its messages, search index entries, summaries, traces,
        agent states and turn attempts, and record its tombstone at `now`, atomically; returns
        what was deleted. None (and nothing changed) when a legal hold covers it. Raises
        `SessionNotFound`, or `SessionErased` for a tombstone."""
        ...

    def tombstones(self, session_ids: Sequence[str]) -> dict[str, Tombstone]:
        """The tombstones of those of `session_ids` that were erased, by id."""
        ...

    def lift_tombstones(self, session_ids: Sequence[str]) -> int:
        """Forget these tombstones, so the ids may be imported again (an explicit restore);
        how many there were."""
        ...

    def set_session_hold(self, session_id: str, held: bool, *, now: datetime) -> bool:
        """Put a legal hold on the session at `now` (a hold already there keeps its time), or
        clear it. Returns whether the session is held afterwards. Raises `SessionNotFound`."""
        ...

    def set_project_hold(self, project: str, held: bool, *, now: datetime) -> bool:
        """The same for every session of `project`, present and future."""
        ...

    def legal_holds(self, project: str | None = None) -> list[LegalHold]:
        """The holds standing (of `project`, or all): by project, the project's own first,
        then its sessions' by id."""
        ...

    def held_sessions(self, session_ids: Sequence[str]) -> frozenset[str]:
        """Those of `session_ids` a hold covers (their own, or their project's); unknown ids
        are not held."""
        ...


@runtime_checkable
class RetentionStore(Protocol):
    """Message retention: the old messages of a session that lives on, deleted with everything
    that holds their text.

    `delete_messages_before` deletes, in one transaction, the session's messages created at
    or before `cutoff` (their search index entries go with the rows), every summary checkpoint
    that covers one of them (`covers_to_seq` at or past the first deleted seq: a checkpoint
    stands for every seq up to its own), and the turn traces from the first deleted seq on:
    those of the deleted replies and those of every later reply, whose window may have held
    a deleted message verbatim, or a summary of it (a store cannot tell which without reading
    the trace, which may be sealed). Agents' positions and the cut point stay: seqs are never
    reused nor renumbered, and a window starts at the first message after them that is left.

    The session's totals (`message_count`, `stored_tokens`, usage) become those of the
    messages left and its `version` moves on, so no cache serves the deleted messages; its
    `last_seq` (the next append goes after it) and `updated_at` stay: retention is
    housekeeping, not a change to the conversation, and the whole-session retention still
    counts from the last change. A session a legal hold covers (`ErasureStore`) is left as
    it is."""

    def count_messages_before(self, session_id: str, cutoff: datetime) -> int:
        """How many of the session's messages were created at or before `cutoff` (0 for a
        missing session)."""
        ...

    def delete_messages_before(self, session_id: str, cutoff: datetime) -> int | None:
        """Delete the session's messages created at or before `cutoff` and what holds their
        text (see the class); how many messages went. None (and nothing changed) when a legal
        hold covers the session. Raises `SessionNotFound`."""
        ...


@runtime_checkable
class FullStore(
    Store,
    AgentStateStore,
    SummaryStore,
    TraceStore,
    ApiKeyStore,
    AdminStore,
    TransferStore,
    ForkStore,
    TurnAttemptStore,
    CutPointStore,
    ErasureStore,
    RetentionStore,
    Protocol,
):
    """A store with every capability the service uses (what the bundled backends offer).

    `LockingStore` is not part of it yet: a store without locks still works, its sweeper just
    cannot tell that another replica is sweeping too.
    """


class StoreWrapper:
    """A store in front of another one (`CachedStore`, `EncryptedStore`), with the
    capabilities of the store it wraps and only those.

    The session methods of the core contract go straight to `inner` (a wrapper overrides the
    ones it changes). Of the optional capability methods, those named in `passed_through` that
    `inner` has become this object's own, bound to `inner`'s, so `isinstance(wrapper,
    SummaryStore)` answers as it would for `inner`; a wrapper binds the ones it changes itself.
    Anything else a backend has outside the contract (`schema_version`, `path`, …) stays
    reachable through attribute lookup."""

    def __init__(self, inner: Store, passed_through: Iterable[str]) -> None:
        self.inner = inner
        self.url = inner.url
        for name in passed_through:
            method = getattr(inner, name, None)
            if method is not None:
                setattr(self, name, method)

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (e.g. while unpickling): don't recurse
            raise AttributeError(name)
        return getattr(self.inner, name)

    find_messages = Inner(Store.find_messages)
    meta = Inner(Store.meta)
    create_session = Inner(Store.create_session)
    get_or_create_session = Inner(Store.get_or_create_session)
    get_session = Inner(Store.get_session)
    find_session_by_key = Inner(Store.find_session_by_key)
    list_sessions = Inner(Store.list_sessions)
    update_session = Inner(Store.update_session)
    set_status = Inner(Store.set_status)
    reset_session = Inner(Store.reset_session)
    delete_session = Inner(Store.delete_session)
    delete_last_message = Inner(Store.delete_last_message)


C = TypeVar("C")


def require(store: object, capability: Callable[..., C], what: str) -> C:
    """`store` as a `capability` (one of the protocols above), or `Unsupported` saying that
    `what` needs it.

    `what` names the feature for the person who asked for it (e.g. "summary checkpoints"), so
    the error says which request a backend cannot serve rather than which method is missing.
    (`capability` is typed as a callable, not `type[C]`: mypy refuses a protocol class where
    `type[...]` is expected.)
    """
    if isinstance(store, cast(type, capability)):
        return cast(C, store)
    # The class, never the URL: this message reaches HTTP clients (a 501), who must not learn
    # where the database lives.
    raise Unsupported(
        f"{what} needs a store with {getattr(capability, '__name__', capability)};"
        f" this deployment's store ({type(store).__name__}) does not have it"
    )


# -- the append rule every backend shares ------------------------------------------------------


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


def check_fork(source: Session, at_seq: int, new: NewSession, now: datetime) -> None:
    """Whether `source` may be forked at `at_seq` into `new`, for every backend alike (see
    `ForkStore.fork_session`); raises the error that says why not."""
    if isinstance(at_seq, bool) or not 0 <= at_seq <= source.last_seq:
        raise InvalidInput(
            "at_seq", f"must be between 0 and {source.last_seq} (the source's last seq)"
        )
    if new.project != source.project:
        raise InvalidInput("project", "a branch lives in the project of the session it forks")
    if source.is_expired_at(now):
        raise SessionExpired(source.id, to_ts_or_none(source.expires_at) or "")
    if source.status is not SessionStatus.ACTIVE:
        raise Conflict(f"session {source.id} is {source.status.value}; reactivate it to fork it")


# -- statistics every backend builds alike -----------------------------------------------------


def session_stats(
    session: Session,
    by_role: dict[str, int],
    internal: int,
    first: datetime | None,
    last: datetime | None,
) -> SessionStats:
    """A session's statistics: its own totals, and its messages counted by role (`internal` of
    them hidden from users), the first sent at `first` and the last at `last`."""
    return SessionStats(
        session_id=session.id,
        message_count=session.message_count,
        user_facing_messages=session.message_count - internal,
        internal_messages=internal,
        messages_by_role=by_role,
        stored_tokens=session.stored_tokens,
        usage_input_tokens=session.usage_input_tokens,
        usage_output_tokens=session.usage_output_tokens,
        usage_cache_read_tokens=session.usage_cache_read_tokens,
        usage_cache_creation_tokens=session.usage_cache_creation_tokens,
        first_message_at=first,
        last_message_at=last,
    )


ProjectCount = tuple[str, str, int, int, int, int, int, int, int]
"""(project, status, sessions, messages, stored tokens, usage input tokens, usage output
tokens, cache read tokens, cache creation tokens): what `project_stats` sums."""


def project_stats(counts: Iterable[ProjectCount]) -> list[ProjectStats]:
    """Per-project statistics from counts of sessions and their totals, summed by project (and
    sessions by status), in the order the projects first appear."""
    totals: dict[str, tuple[dict[str, int], list[int]]] = {}
    for project, status, sessions, *amounts in counts:
        by_status, sums = totals.setdefault(project, ({}, [0, 0, 0, 0, 0, 0]))
        by_status[status] = by_status.get(status, 0) + sessions
        for index, amount in enumerate(amounts):
            sums[index] += amount
    return [
        ProjectStats(
            project=project,
            sessions_by_status=by_status,
            message_count=messages,
            stored_tokens=tokens,
            usage_input_tokens=usage_in,
            usage_output_tokens=usage_out,
            usage_cache_read_tokens=cache_read,
            usage_cache_creation_tokens=cache_creation,
        )
        for project, (
            by_status,
            [messages, tokens, usage_in, usage_out, cache_read, cache_creation],
        ) in totals.items()
    ]
