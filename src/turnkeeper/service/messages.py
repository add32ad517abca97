"""The message log: validate and count, append (atomically, idempotently), read, and take back
the newest message.

A part of `Turnkeeper` (flat on `tk`). Everything adapters need from the log is
here, so none of them reads or writes the store directly: they get the service's clock,
project scope and sliding expiry with every call.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Iterable
from datetime import datetime

from turnkeeper.context.formats import wire_name
from turnkeeper.errors import InvalidInput, SessionNotFound
from turnkeeper.service.core import Core, SessionRef
from turnkeeper.tokens import TokenCounter
from turnkeeper.types import (
    JSONObject,
    Message,
    MessageDraft,
    MessageQuery,
    NewMessage,
    Role,
    Session,
    SessionPatch,
    Usage,
)
from turnkeeper.validation import check_message, check_non_negative, check_positive


def _looks_like_id(ref: str) -> bool:
    """True for a string shaped like the session ids turnkeeper makes (a UUID's text form);
    a key may look like one too, and is then resolved after the store does not find it."""
    return len(ref) == 36 and ref[8] == ref[13] == ref[18] == ref[23] == "-"


def new_ids(count: int) -> list[str]:
    """`count` random (version 4) UUIDs in their text form, as `str(uuid.uuid4())` makes
    them, from one read of the system's randomness."""
    raw = os.urandom(16 * count)
    ids = []
    for start in range(0, 16 * count, 16):
        h = raw[start : start + 16].hex()
        # The version digit becomes 4, the variant digit's top two bits 10.
        ids.append(f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:]}")
    return ids


_VARIANT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}
"""The first hex digit of a UUID's variant field with its two top bits set to 10."""


class Messages:
    """The message operations of `Turnkeeper`."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def draft(self, message: NewMessage) -> MessageDraft:
        """Validate a message and count its tokens (once, with the store's encoding)."""
        return self._draft(message, self.core.now(), None, self.core.counter)

    def _draft(
        self, message: NewMessage, now: datetime, new_id: str | None, counter: TokenCounter
    ) -> MessageDraft:
        """`draft`, at `now`, with `new_id` as the id when the message has none (a fresh
        random id when that is None too), counted by `counter` (looked up once a batch)."""
        settings = self.core.settings
        role, tool_calls, metadata = check_message(
            message,
            max_bytes=settings.max_message_bytes,
            max_json_bytes=settings.max_json_bytes,
        )
        author = message.author
        return MessageDraft(
            id=message.id or new_id or str(uuid.uuid4()),
            role=role,
            content=message.content,
            tokens=counter.count_message(
                role.value,
                message.content,
                name=wire_name(role, author) if author else None,
                tool_calls=tool_calls,
                tool_call_id=message.tool_call_id,
            ),
            created_at=now,
            author=author,
            internal=message.internal,
            usage=message.usage,
            tool_calls=tool_calls,
            tool_call_id=message.tool_call_id,
            metadata=metadata,
            trace=None,
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
            role=role,
            content=content,
            author=author,
            internal=internal,
            id=id,
            metadata=metadata,
            usage=usage,
            tool_call_id=tool_call_id,
            tool_calls=list(tool_calls) if tool_calls is not None else None,
        )
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
        session = None if session_id is not None else self.core.get_session(ref, project=project)
        batch = messages if isinstance(messages, (list, tuple)) else list(messages)
        # One instant for the whole batch (it is stored atomically), and its random ids
        # made at once: `uuid.uuid4()` per message was a tenth of a large append.
        now = self.core.now()
        ids = new_ids(len(batch))
        counter = self.core.counter
        drafts = []
        for index, message in enumerate(batch):
            try:
                drafts.append(self._draft(message, now, ids[index], counter))
            except InvalidInput as exc:
                if session is None:  # a missing session is reported before a bad message
                    self.core.get_session(ref, project=project)
                if index == 0 and not drafts:
                    raise
                raise type(exc)(f"messages[{index}].{exc.field}", exc.problem) from None
        if session_id is not None:
            try:
                appended = self.core.store.append_messages(
                    session_id, drafts, expected_last_seq=expected_last_seq, now=self.core.now()
                )
                return appended
            except SessionNotFound:
                session = self.core.get_session(ref, project=project)  # a key shaped like an id
        assert session is not None
        return self._store_drafts(session, drafts, expected_last_seq)

    def _appendable_id(self, ref: SessionRef, project: str | None) -> str | None:
        """The session id an append can go to without reading the session first, else None.

        The store's append locks and checks the session row itself (existence, status,
        expiry), so the service's own read of it — a sixth of an append — is needed only to
        resolve a key, to check a project, or for sliding expiry (which extends the session
        from what it read)."""
        if project is not None or self._slides:
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
        now = self.core.now()
        stored = self.core.store.append_messages(
            session.id, drafts, expected_last_seq=expected_last_seq, now=now
        )
        if self._slides:
            self._slide_expiry(session, stored, now)
        return stored

    @property
    def _slides(self) -> bool:
        """Whether appends extend expiry: `sliding_expiry` (the default) with a configured
        `session_expiration` (none by default: then nothing expires, and nothing slides)."""
        return (
            self.core.settings.sliding_expiry and self.core.settings.session_expiration is not None
        )

    def _slide_expiry(self, session: Session, stored: list[Message], now: datetime) -> None:
        """Sliding expiry: a session that gets new messages lives another
        `session_expiration` from now (a session that never expires stays so)."""
        lifetime = self.core.settings.session_expiration
        if lifetime is None or session.expires_at is None:
            return
        if not any(message.seq > session.last_seq for message in stored):
            return  # only retries of stored messages: no new activity
        if now + lifetime > session.expires_at:
            self.core.store.update_session(
                session.id, SessionPatch(expires_at=now + lifetime), now=now
            )

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

        query = MessageQuery(
            from_seq=from_seq, to_seq=to_seq, include_internal=include_internal,
            newest_first=newest_first, limit=limit,
        )  # fmt: skip

        def read(session_id: str) -> list[Message]:
            return self.core.store.read_messages(session_id, query)

        if isinstance(ref, Session) and project is None:
            # The session in hand: its messages in one read (a page of an agent's latest items
            # was two reads). Messages found prove the session exists; none found, it is
            # looked up as before (gone: `SessionNotFound`, or the session that key names).
            try:
                messages: list[Message] | None = read(ref.id)
            except SessionNotFound:
                messages = None
            if messages:
                return messages
            session = self.core.get_session(ref)
            return messages if messages is not None and session.id == ref.id else read(session.id)
        return read(self.core.get_session(ref, project=project).id)

    def pop_last_message(self, ref: SessionRef, *, project: str | None = None) -> Message | None:
        """Delete the newest message and return it (None for an empty session): an undo, as
        the OpenAI Agents SDK's `Session.pop_item`.

        Totals are recomputed and the next append reuses the freed seq; summary checkpoints
        covering it are dropped and agents that had read it move back. Works whatever the
        session's status (like `history`, it is a correction of the record, not a new turn),
        so it neither needs a live session nor slides its expiry.
        """
        session = self.core.get_session(ref, project=project)
        return self.core.store.delete_last_message(session.id, now=self.core.now())
