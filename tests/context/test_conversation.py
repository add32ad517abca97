"""The conversation context object and its four listed tests, on real parts: a SQLite
file behind the version-keyed cache, with a store that counts its reads."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Clock, make_sqlite_store
from turnkeeper.cache import CachedStore, SessionLRU
from turnkeeper.config import Settings
from turnkeeper.context.conversation import (
    ConversationContext,
    RecentMessage,
    planner_context,
)
from turnkeeper.errors import BackendUnavailable
from turnkeeper.logs import capture_events
from turnkeeper.service import Turnkeeper
from turnkeeper.storage.base import Store
from turnkeeper.storage.sql.sqlite import SQLiteStore
from turnkeeper.types import Message, MessageDraft, MessageQuery, NewMessage, Role, Session


class CountingStore(SQLiteStore):
    """A SQLite store that counts the message reads that reach the database (pages, with
    their version or not)."""

    reads = 0

    def read_messages(self, session_id: str, query: MessageQuery = MessageQuery()) -> list[Message]:
        self.reads += 1
        return super().read_messages(session_id, query)

    def read_messages_versioned(
        self, session_id: str, query: MessageQuery = MessageQuery()
    ) -> tuple[list[Message], int | None]:
        self.reads += 1  # how the cache reads a page: with its version, in one statement
        return super().read_messages_versioned(session_id, query)


class UnreachableStore(SQLiteStore):
    """A SQLite store whose database has gone away after opening."""

    broken = False

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        if self.broken:
            raise BackendUnavailable("database is gone")
        return super()._read(sql, params)


@pytest.fixture
def counting(tmp_path: Path) -> CountingStore:
    return CountingStore(f"sqlite:///{tmp_path / 'c.db'}", synchronous="NORMAL")


@pytest.fixture
def tk(counting: CountingStore, settings: Settings, clock: Clock) -> Turnkeeper:
    return Turnkeeper(CachedStore(counting, lru=SessionLRU(100)), settings, clock=clock)


def test_first_message_context(tk: Turnkeeper) -> None:
    tk.create_session(key="conv-1")
    context = tk.conversation_context("conv-1")
    assert context.is_first_message is True
    assert context.recent_messages == ()
    assert context.conversation_id == "conv-1"


def test_conversation_context_caching(tk: Turnkeeper, counting: CountingStore) -> None:
    session = tk.create_session(key="conv-1")
    tk.append(session, "user", "Which talks are about Rust?")
    first = tk.conversation_context("conv-1")
    reads = counting.reads
    assert tk.conversation_context("conv-1") == first
    assert counting.reads == reads  # served from the cache


LATER = datetime(2030, 1, 1, tzinfo=UTC)


def test_cache_invalidation(tk: Turnkeeper, counting: CountingStore) -> None:
    session = tk.create_session(key="conv-1")
    tk.append(session, "user", "Which talks are about Rust?")
    tk.conversation_context("conv-1")
    reads = counting.reads
    tk.append(session, "assistant", "Two: talk-7 and talk-9.", metadata={"referenced_ids": ["t7"]})
    context = tk.conversation_context("conv-1")
    assert counting.reads == reads  # the pages were carried over this process's append
    assert context.message_count == 2 and context.referenced_entities == ("t7",)
    tk.store.inner.append_messages(  # a write this cache did not see (another replica's)
        session.id,
        [MessageDraft(id="m-x", role=Role.USER, content="And talk-9?", tokens=3, created_at=LATER)],
        now=LATER,
    )
    context = tk.conversation_context("conv-1")
    assert counting.reads > reads  # the version moved past what the cache holds: read again
    assert context.message_count == 3 and context.recent_messages[-1].text == "And talk-9?"


def test_long_conversation_summary(tk: Turnkeeper) -> None:
    session = tk.create_session(key="conv-1")
    tk.append_many(
        session,
        [NewMessage("user" if i % 2 == 0 else "assistant", f"Message {i}.") for i in range(20)],
    )
    context = tk.conversation_context("conv-1")
    assert context.summary is not None and "Message 0." in context.summary
    assert len(context.recent_messages) == 10
    assert context.recent_messages[0].text == "Message 10."


def test_short_conversation_has_no_summary(tk: Turnkeeper) -> None:
    session = tk.create_session(key="short")
    tk.append_many(session, [NewMessage("user", f"m{i}") for i in range(15)])
    assert tk.conversation_context(session).summary is None


def test_referenced_entities_come_from_assistant_messages_once_each(tk: Turnkeeper) -> None:
    session = tk.create_session(key="refs")
    tk.append(session, "assistant", "a", metadata={"referenced_ids": ["e1", "e2"]})
    tk.append(session, "user", "b", metadata={"referenced_ids": ["user-said"]})
    tk.append(session, "assistant", "c", metadata={"referenced_ids": ["e2", "e3"]})
    assert tk.conversation_context(session).referenced_entities == ("e1", "e2", "e3")


def test_an_unreachable_store_gives_the_empty_context_and_logs(
    tmp_path: Path, settings: Settings, clock: Clock
) -> None:
    store = UnreachableStore(f"sqlite:///{tmp_path / 'u.db'}")
    tk = Turnkeeper(store, settings, clock=clock)
    tk.create_session(key="conv-1")
    store.broken = True
    with capture_events() as logs:
        context = tk.conversation_context("conv-1")
    assert context == ConversationContext.empty("conv-1")
    assert context.as_dict() == {
        "conversation_id": "conv-1",
        "message_count": 0,
        "is_first_message": True,
        "recent_messages": [],
        "referenced_entities": [],
        "summary": None,
    }
    assert [log["event"] for log in logs] == ["conversation_fetch_failed"]


def test_planner_context_renders_the_planner_text() -> None:
    context = ConversationContext(
        conversation_id="c",
        message_count=7,
        is_first_message=False,
        recent_messages=tuple(RecentMessage("user", f"q{i} " + "x" * 300, None) for i in range(7)),
        referenced_entities=tuple(f"e{i}" for i in range(12)),
        summary="The user asked about Rust talks.",
    )
    lines = planner_context(context).splitlines()
    assert lines[0] == "Conversation summary: The user asked about Rust talks."
    assert lines[1] == "Recent conversation:"
    assert lines[2] == "  user: " + ("q2 " + "x" * 300)[:200]
    assert len(lines) == 8
    assert lines[-1] == "Previously mentioned entities: " + ", ".join(f"e{i}" for i in range(10))
    first = planner_context(ConversationContext.empty("c"))
    assert first == "This is the user's first message in this conversation."


class RowCountingStore(SQLiteStore):
    """A SQLite store that counts the message rows it reads from the database."""

    rows = 0

    def read_messages(self, session_id: str, query: MessageQuery = MessageQuery()) -> list[Message]:
        found = super().read_messages(session_id, query)
        self.rows += len(found)
        return found


def _long_conversation(tk: Turnkeeper, key: str, turns: int) -> Session:
    session = tk.create_session(key=key)
    tk.append_many(
        session,
        [
            NewMessage("user", f"question {n}.")
            if n % 2 == 0
            else NewMessage("assistant", f"answer {n}.", metadata={"referenced_ids": [f"e{n}"]})
            for n in range(turns)
        ],
    )
    return session


def test_each_later_call_reads_the_history_once_and_sees_every_new_entity(
    tmp_path: Path, settings: Settings, clock: Clock
) -> None:
    store = RowCountingStore(f"sqlite:///{tmp_path / 'rows.db'}", synchronous="NORMAL")
    tk = Turnkeeper(store, settings, clock=clock)
    session = _long_conversation(tk, "long", 400)
    tk.conversation_context(session)
    for turn in range(3):
        store.rows = 0
        tk.append(session, "user", f"and then {turn}?")
        tk.append(session, "assistant", "noted.", metadata={"referenced_ids": [f"new{turn}"]})
        context = tk.conversation_context(session)
        assert store.rows == 402 + 2 * turn  # one read of the whole history, nothing more
    assert context.message_count == 406
    assert context.referenced_entities[:2] == ("e1", "e3")
    assert context.referenced_entities[-3:] == ("new0", "new1", "new2")
    assert [m.text for m in context.recent_messages][-2:] == ["and then 2?", "noted."]
    fresh = Turnkeeper(make_sqlite_store(tmp_path / "rows.db"), settings, clock=clock)
    assert fresh.conversation_context(session) == context  # what reading it all gives


def test_remembered_entities_follow_a_popped_or_reset_history(
    store: Store, settings: Settings, clock: Clock
) -> None:
    tk = Turnkeeper(store, settings, clock=clock)
    session = tk.create_session(key="refs")
    tk.append(session, "assistant", "a", metadata={"referenced_ids": ["kept"]})
    tk.append(session, "assistant", "b", metadata={"referenced_ids": ["popped"]})
    assert tk.conversation_context(session).referenced_entities == ("kept", "popped")
    tk.pop_last_message(session)
    tk.append(session, "assistant", "c", metadata={"referenced_ids": ["instead"]})
    assert tk.conversation_context(session).referenced_entities == ("kept", "instead")
    other_writer = Turnkeeper(store, settings, clock=clock)
    other_writer.reset_session(session)
    other_writer.append(session, "assistant", "a", metadata={"referenced_ids": ["after-reset"]})
    context = tk.conversation_context(session)
    assert (context.message_count, context.referenced_entities) == (1, ("after-reset",))
