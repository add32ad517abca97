"""`message_seq_runs` (where a session's messages sit, without reading them) on every backend:
the same answer as reading the messages, with or without internal ones."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.conftest import open_test_store
from turnkeeper.storage.base import SeqRunStore, Store, message_seq_runs
from turnkeeper.types import MessageDraft, MessageQuery, NewSession, Role, SeqRanges

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def _draft(n: int, *, internal: bool) -> MessageDraft:
    return MessageDraft(
        id=f"m-{n}", role=Role.USER, content=f"m{n}", tokens=2, created_at=NOW, internal=internal
    )


@pytest.fixture(params=["memory", "sqlite", "postgres", "postgres+redis"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    store = open_test_store(request.param, request, tmp_path)
    yield store
    store.close()


def test_every_bundled_backend_says_where_messages_sit(any_store: Store) -> None:
    assert isinstance(any_store, SeqRunStore)


def test_runs_are_the_seqs_reading_the_messages_gives(any_store: Store) -> None:
    session = any_store.create_session(NewSession(project="alpha"), now=NOW)
    internal = {3, 4, 9, 12}
    any_store.append_messages(
        session.id, [_draft(n, internal=n in internal) for n in range(1, 13)], now=NOW
    )
    for include_internal in (True, False):
        for first, last in ((1, 12), (2, 11), (5, 8), (4, 4), (13, 20)):
            read = any_store.read_messages(
                session.id,
                MessageQuery(from_seq=first, to_seq=last, include_internal=include_internal),
            )
            runs = any_store.message_seq_runs(
                session.id, from_seq=first, to_seq=last, include_internal=include_internal
            )
            assert runs == SeqRanges.of(m.seq for m in read)
    assert any_store.message_seq_runs(
        session.id, from_seq=1, to_seq=12, include_internal=False
    ).runs == ((1, 2), (5, 8), (10, 11))
    assert (
        message_seq_runs(any_store, "no-such-session", from_seq=1, to_seq=5, include_internal=True)
        == SeqRanges()
    )
