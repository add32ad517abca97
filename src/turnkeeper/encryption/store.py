"""A `Store` that encrypts what users wrote before it reaches another `Store`, and keeps the
same contract.

The one place encryption happens: it sits outermost, in front of the caches, so the backend's
rows (SQLite, PostgreSQL, `InMemoryStore`), the in-process page cache and Redis all receive
ciphertext, and no backend carries a copy of this code. Sealed: a message's content, metadata
and tool calls, a reply's turn trace, a summary's text. Clear: ids, seqs, roles, authors,
times, token counts and usage, tool call ids, and the session row (its key, subject, title and
metadata identify the session and are what listings filter on) — so windows, statistics and
the caches' version rule work on them without a key.

Each session's values are sealed with its own data key (`keys.DataKey`), made at its first
sealed write and kept wrapped in the key store (`keystore`); deleting the session destroys
that key first. Values written before encryption was turned on are read as they are.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from turnkeeper import jsonenc
from turnkeeper.encryption.keys import PREFIX, DataKey, MasterKeys
from turnkeeper.encryption.keystore import KeyStore, unwrap_row, wrap_row
from turnkeeper.errors import KeyDestroyed, SessionNotFound, Unsupported
from turnkeeper.storage.base import Store, StoreWrapper
from turnkeeper.types import (
    ErasedSession,
    ExpiryReport,
    JSONObject,
    Message,
    MessageDraft,
    MessageQuery,
    NewSession,
    Session,
    SummaryCheckpoint,
)

__all__ = ["EncryptedStore", "SessionKeys"]

SEALED_JSON = "tkenc1"
"""The one key of a sealed JSON object (metadata, or the one element of sealed tool calls)."""


class SessionKeys:
    """The data keys of sessions, unwrapped once per process and kept in memory (a running
    process holds the keys it uses: docs/privacy.md)."""

    HELD = 256
    """Most sessions whose keys (and what they opened lately) one process keeps."""

    def __init__(self, master: MasterKeys, store: KeyStore) -> None:
        self.master = master
        self.store = store
        self._open: dict[str, DataKey] = {}
        self._lock = threading.Lock()

    def for_write(
        self, session_id: str, holds_sealed: Callable[[str], bool] | None = None
    ) -> DataKey:
        """The session's data key, made and stored on its first sealed write (first writer
        wins, across processes) — unless `holds_sealed` says the session already has sealed
        values: then its key was destroyed (`KeyDestroyed`: a restored backup's session), and
        a new key would leave it half readable.

        A key is stored before anything is sealed with it, so sealed values seen after the key
        store said "no key" may be another writer's, made with a key stored in between: the key
        store is asked again before the key is taken for destroyed."""
        key = self._open.get(session_id)
        if key is None:
            row = self.store.find(session_id)
            if row is None and holds_sealed is not None and holds_sealed(session_id):
                row = self.store.find(session_id)
                if row is None:
                    raise KeyDestroyed(session_id)
            if row is None:
                row = self.store.add(session_id, wrap_row(self.master, DataKey.new(session_id)))
            key = self._remember(session_id, unwrap_row(self.master, row))
        return key

    def loaded(self, session_id: str) -> DataKey | None:
        """The session's key if this process holds it already (no key store read)."""
        return self._open.get(session_id)

    def for_read(self, session_id: str) -> DataKey:
        """The key a sealed value of the session needs; `KeyDestroyed` when it is gone."""
        key = self._open.get(session_id)
        if key is None:
            row = self.store.find(session_id)
            if row is None:
                raise KeyDestroyed(session_id)
            key = self._remember(session_id, unwrap_row(self.master, row))
        return key

    def share(self, source_id: str, branch_id: str) -> None:
        """Give a branch a copy of its source's key: its copied values were sealed with it."""
        row = self.store.find(source_id)
        if row is not None:
            self.store.add(branch_id, row)

    def destroy(self, session_ids: Sequence[str]) -> None:
        """Delete the sessions' keys: what was sealed with them is unreadable from now on."""
        if not session_ids:
            return
        with self._lock:
            for session_id in session_ids:
                self._open.pop(session_id, None)
        self.store.delete(session_ids)

    def _remember(self, session_id: str, key: DataKey) -> DataKey:
        """Keep the key (and what it opens) for the `HELD` sessions used last; an older one
        is read from the key store again when needed (one primary-key read and an unwrap)."""
        with self._lock:
            self._open.pop(session_id, None)
            while len(self._open) >= self.HELD:
                self._open.pop(next(iter(self._open)))
            self._open[session_id] = key
        return key


# -- one value, one field -----------------------------------------------------------------------


def _seal_text(key: DataKey, text: str, purpose: str) -> str:
    return key.encrypt(text, purpose) if text else text


def _open_text(keys: SessionKeys, session_id: str, text: str, purpose: str) -> str:
    if not text.startswith(PREFIX):
        return text
    return keys.for_read(session_id).decrypt(text, purpose)


def _seal_json(key: DataKey, value: Any, purpose: str) -> dict[str, Any]:
    return {SEALED_JSON: key.encrypt(jsonenc.canonical(value), purpose)}


def _seal_metadata(key: DataKey, metadata: JSONObject) -> JSONObject:
    """A message's metadata sealed as one value (empty metadata stays empty)."""
    return _seal_json(key, dict(metadata), "metadata") if metadata else {}


def _seal_calls(
    key: DataKey, calls: tuple[JSONObject, ...] | None
) -> tuple[JSONObject, ...] | None:
    """A message's tool calls sealed as one value, the single item of the tuple (None: none)."""
    return None if calls is None else (_seal_json(key, list(calls), "tool_calls"),)


def _sealed_json(value: Any) -> str | None:
    if isinstance(value, dict) and len(value) == 1:
        sealed = value.get(SEALED_JSON)
        if isinstance(sealed, str) and sealed.startswith(PREFIX):
            return sealed
    return None


def seal_draft(key: DataKey, draft: MessageDraft) -> MessageDraft:
    """`draft` with its content, metadata, tool calls and trace sealed (built field by field:
    `dataclasses.replace` would cost about what sealing does)."""
    return MessageDraft(
        id=draft.id,
        role=draft.role,
        content=_seal_text(key, draft.content, "content"),
        tokens=draft.tokens,
        created_at=draft.created_at,
        author=draft.author,
        internal=draft.internal,
        usage=draft.usage,
        tool_calls=_seal_calls(key, draft.tool_calls),
        tool_call_id=draft.tool_call_id,
        metadata=_seal_metadata(key, draft.metadata),
        trace=None if draft.trace is None else _seal_text(key, draft.trace, "trace"),
    )


def seal_message(key: DataKey, message: Message) -> Message:
    """A stored message (an import's) with what `seal_draft` seals sealed."""
    return dataclasses.replace(
        message,
        content=_seal_text(key, message.content, "content"),
        metadata=_seal_metadata(key, message.metadata),
        tool_calls=_seal_calls(key, message.tool_calls),
    )


OPENED_ROWS = 512
"""Most opened messages a session's key keeps (see `open_message`)."""


def is_sealed(message: Message) -> bool:
    """Whether any of `message`'s fields was sealed (a message of a session written before
    encryption was turned on has none)."""
    calls = message.tool_calls
    return (
        message.content.startswith(PREFIX)
        or _sealed_json(message.metadata) is not None
        or (calls is not None and len(calls) == 1 and _sealed_json(calls[0]) is not None)
    )


def open_message(keys: SessionKeys, message: Message) -> Message:
    """`message` as it was written: its sealed fields opened (a clear one is left as it is).

    This runs for every message of every window built, and a chat turn's window is mostly the
    last turn's messages read again: the opened message of a row equal to one opened lately
    is handed out again (as the page cache hands out its messages to every reader), and a new
    one is built field by field, not by `dataclasses.replace`, which costs as much as the
    decryption itself. The memo is asked first: the page cache hands out the very row objects
    it handed out before, so most rows are found there by identity, before any field is looked
    at."""
    key = keys.loaded(message.session_id)
    held = None if key is None else key.opened_rows.get(message.seq)
    if held is not None and (held[0] is message or held[0] == message):
        opened: Message = held[1]  # the same row read again: opened already
        return opened
    content, metadata, tool_calls = message.content, message.metadata, message.tool_calls
    sealed_metadata = _sealed_json(metadata) if metadata else None
    sealed_calls = (
        _sealed_json(tool_calls[0]) if tool_calls is not None and len(tool_calls) == 1 else None
    )
    sealed_content = content.startswith(PREFIX)
    if not sealed_content and sealed_metadata is None and sealed_calls is None:
        return message
    key = key or keys.for_read(message.session_id)
    opened = Message(
        id=message.id,
        session_id=message.session_id,
        seq=message.seq,
        role=message.role,
        content=key.decrypt(content, "content") if sealed_content else content,
        created_at=message.created_at,
        tokens=message.tokens,
        author=message.author,
        internal=message.internal,
        usage=message.usage,
        tool_calls=tool_calls
        if sealed_calls is None
        else tuple(jsonenc.loads(key.decrypt(sealed_calls, "tool_calls"))),
        tool_call_id=message.tool_call_id,
        metadata=metadata
        if sealed_metadata is None
        else jsonenc.loads(key.decrypt(sealed_metadata, "metadata")),
    )
    if len(key.opened_rows) >= OPENED_ROWS:
        key.opened_rows.clear()
    key.opened_rows[message.seq] = (message, opened)
    return opened


def _as_written(stored: Message, plain: MessageDraft) -> Message:
    """A message just stored (or found stored: its sealed values are the draft's, or the store
    would have refused it) with the draft's own content, metadata and tool calls: what opening
    it would give, without decrypting and parsing again."""
    return Message(
        id=stored.id,
        session_id=stored.session_id,
        seq=stored.seq,
        role=stored.role,
        content=plain.content,
        created_at=stored.created_at,
        tokens=stored.tokens,
        author=stored.author,
        internal=stored.internal,
        usage=stored.usage,
        tool_calls=plain.tool_calls,
        tool_call_id=stored.tool_call_id,
        metadata=dict(plain.metadata),
    )


# -- the store ----------------------------------------------------------------------------------


class EncryptedStore(StoreWrapper):
    """`Store` over another store, sealing user content on the way in and opening it on the
    way out (see the module docstring).

    It has the capabilities of the store it wraps, and only those (`StoreWrapper`): the
    optional methods `inner` has are bound on this object, through a sealing version where the
    method carries content (`SEALING`), else straight (`PASSED_THROUGH`)."""

    def __init__(self, inner: Store, keys: SessionKeys) -> None:
        super().__init__(inner, PASSED_THROUGH)
        self.keys = keys
        for name in SEALING:
            if getattr(inner, name, None) is not None:
                setattr(self, name, getattr(self, f"_{name}"))

    def _write_key(self, session_id: str) -> DataKey:
        return self.keys.for_write(session_id, self._holds_sealed)

    def _holds_sealed(self, session_id: str) -> bool:
        """Whether the session's newest message is sealed: asked only when the key store has
        no key for it, once per session and process (next to the key store's synced write,
        one indexed read)."""
        try:
            newest = self.inner.read_messages(session_id, MessageQuery(newest_first=True, limit=1))
        except SessionNotFound:
            return False
        return bool(newest) and is_sealed(newest[0])

    def _open_all(self, messages: Sequence[Message]) -> list[Message]:
        return [open_message(self.keys, message) for message in messages]

    # -- the core ----------------------------------------------------------------------------

    def delete_session(self, session_id: str) -> None:
        """The key goes first: should deleting the rows fail, they are unreadable already."""
        self.keys.destroy([session_id])
        self.inner.delete_session(session_id)

    def append_messages(
        self,
        session_id: str,
        drafts: Sequence[MessageDraft],
        *,
        expected_last_seq: int | None = None,
        now: datetime,
    ) -> list[Message]:
        if not drafts:
            return []
        key = self._write_key(session_id)
        sealed = [seal_draft(key, draft) for draft in drafts]
        try:
            stored = self.inner.append_messages(
                session_id, sealed, expected_last_seq=expected_last_seq, now=now
            )
        except SessionNotFound:  # no session: the key made for it has nothing to seal
            self.keys.destroy([session_id])
            raise
        return [
            _as_written(message, plain)
            if message.content == sealed_draft.content
            else open_message(self.keys, message)
            for message, plain, sealed_draft in zip(stored, drafts, sealed, strict=True)
        ]

    def find_messages(self, session_id: str, ids: Sequence[str]) -> dict[str, Message]:
        found = self.inner.find_messages(session_id, ids)
        return {id_: open_message(self.keys, message) for id_, message in found.items()}

    def read_messages(self, session_id: str, query: MessageQuery = MessageQuery()) -> list[Message]:
        return self._open_all(self.inner.read_messages(session_id, query))

    def count_messages(
        self, session_id: str, *, before_seq: int | None = None, include_internal: bool = True
    ) -> int:
        return self.inner.count_messages(
            session_id, before_seq=before_seq, include_internal=include_internal
        )

    def delete_last_message(self, session_id: str, *, now: datetime) -> Message | None:
        deleted = self.inner.delete_last_message(session_id, now=now)
        return None if deleted is None else open_message(self.keys, deleted)

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            self.keys.store.close()

    # -- capabilities that carry content (bound as their public names when inner has them) --

    def _read_messages_versioned(
        self, session_id: str, query: MessageQuery = MessageQuery()
    ) -> tuple[list[Message], int | None]:
        page, version = self.inner.read_messages_versioned(session_id, query)  # type: ignore[attr-defined]
        return self._open_all(page), version

    def _read_messages_at(
        self, session_id: str, version: int, query: MessageQuery = MessageQuery()
    ) -> list[Message]:
        return self._open_all(self.inner.read_messages_at(session_id, version, query))  # type: ignore[attr-defined]

    def _latest_summary(
        self, session_id: str, *, upto_seq: int | None = None
    ) -> SummaryCheckpoint | None:
        found = self.inner.latest_summary(session_id, upto_seq=upto_seq)  # type: ignore[attr-defined]
        return None if found is None else self._open_summary(found)

    def _list_summaries(self, session_id: str) -> list[SummaryCheckpoint]:
        return [self._open_summary(s) for s in self.inner.list_summaries(session_id)]  # type: ignore[attr-defined]

    def _save_summary(self, checkpoint: SummaryCheckpoint) -> SummaryCheckpoint:
        key = self._write_key(checkpoint.session_id)
        sealed = dataclasses.replace(checkpoint, text=_seal_text(key, checkpoint.text, "summary"))
        return self._open_summary(self.inner.save_summary(sealed))  # type: ignore[attr-defined]

    def _open_summary(self, checkpoint: SummaryCheckpoint) -> SummaryCheckpoint:
        text = _open_text(self.keys, checkpoint.session_id, checkpoint.text, "summary")
        return checkpoint if text is checkpoint.text else dataclasses.replace(checkpoint, text=text)

    def _read_traces(self, session_id: str, *, upto_seq: int, limit: int) -> list[tuple[int, str]]:
        rows = self.inner.read_traces(session_id, upto_seq=upto_seq, limit=limit)  # type: ignore[attr-defined]
        return [(seq, _open_text(self.keys, session_id, data, "trace")) for seq, data in rows]

    def _import_session(
        self,
        session: Session,
        messages: Sequence[Message],
        traces: Sequence[tuple[int, str]] = (),
    ) -> int:
        key = self._write_key(session.id)
        added: int = self.inner.import_session(  # type: ignore[attr-defined]
            session,
            [seal_message(key, message) for message in messages],
            [(seq, _seal_text(key, data, "trace")) for seq, data in traces],
        )
        return added

    def _fork_session(
        self, source_id: str, at_seq: int, new: NewSession, *, now: datetime
    ) -> Session:
        """The branch's copied rows were sealed with the source's key: it gets a copy of it
        (its own row, so deleting the source leaves the branch readable)."""
        branch: Session = self.inner.fork_session(source_id, at_seq, new, now=now)  # type: ignore[attr-defined]
        self.keys.share(source_id, branch.id)
        return branch

    def _expire_sessions(
        self, *, now: datetime, delete: bool = False, grace: timedelta = timedelta(0)
    ) -> ExpiryReport:
        report: ExpiryReport = self.inner.expire_sessions(now=now, delete=delete, grace=grace)  # type: ignore[attr-defined]
        self.keys.destroy(report.deleted)
        return report

    def _erase_session(self, session_id: str, *, now: datetime) -> ErasedSession | None:
        """The rows go, then the key: a held session (None) keeps its key, and every copy of
        an erased one's data (backups, WAL, a replica) is unreadable from then on."""
        erased: ErasedSession | None = self.inner.erase_session(session_id, now=now)  # type: ignore[attr-defined]
        if erased is not None:
            self.keys.destroy([session_id])
        return erased

    def _search_messages(self, *args: Any, **kwargs: Any) -> Any:
        raise _index_refused("full-text search")

    def _messages_with_words(self, *args: Any, **kwargs: Any) -> Any:
        raise _index_refused("the relevant strategy's full-text recall")


def _index_refused(what: str) -> Unsupported:
    return Unsupported(
        f"{what} is off while encryption_key is set: an index of the words would hold the"
        " very text encryption at rest protects (docs/privacy.md)"
    )


SEALING = (
    *("read_messages_versioned", "read_messages_at"),  # VersionedReadStore, KnownVersion…
    *("latest_summary", "list_summaries", "save_summary"),  # SummaryStore
    "read_traces",  # TraceStore
    "import_session",  # TransferStore
    "fork_session",  # ForkStore
    "expire_sessions",  # AdminStore: a deleted session's key goes with it
    "erase_session",  # ErasureStore: an erased session's key goes with it
    "search_messages",  # SearchStore: refused
    "messages_with_words",  # WordMatchStore: refused
)
"""The optional methods that carry content (or delete sessions): bound to their sealing
versions (`_<name>`) when the inner store has them."""

PASSED_THROUGH = (
    *("session_stats", "project_stats"),  # AdminStore
    *("get_agent_state", "list_agent_states", "update_agent_state"),  # AgentStateStore
    *("create_api_key", "find_api_key", "list_api_keys", "revoke_api_key"),  # ApiKeyStore
    "exclusive_lock",  # LockingStore
    *("list_branches", "fork_origin"),  # ForkStore
    "lookup_session",  # SessionLookupStore
    *("begin_turn_attempt", "renew_turn_attempt", "end_turn_attempt", "get_turn_attempt"),
    "message_seq_runs",  # SeqRunStore
    "move_cut_point",  # CutPointStore
    *("tombstones", "lift_tombstones", "legal_holds", "held_sessions"),  # ErasureStore
    *("set_session_hold", "set_project_hold"),
    *("count_messages_before", "delete_messages_before"),  # RetentionStore: counts only
)
"""The optional methods that carry no user content: handed straight to the inner store."""
