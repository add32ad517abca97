"""A batch larger than one statement holds is written and looked up in parts, on both SQL
backends: what is stored, what a retry finds and what the import counts do not depend on where
the parts split. The parts are made small here, so a few dozen messages cross many bounds
(in use, 500 rows an INSERT and 5,000 ids a lookup, under PostgreSQL's 65,535 parameters)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import open_test_store
from turnkeeper.errors import Conflict
from turnkeeper.storage.sql import queries
from turnkeeper.storage.sql.store import SQLStore
from turnkeeper.testing.values import LATER, NOW, draft, new_session


@pytest.fixture(params=["sqlite", "postgres"])
def store(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SQLStore]:
    monkeypatch.setattr(queries, "ROWS_PER_INSERT", 4)
    monkeypatch.setattr(queries, "IDS_PER_SELECT", 3)
    backend = open_test_store(request.param, request, tmp_path)
    assert isinstance(backend, SQLStore)
    yield backend
    backend.close()


def test_a_batch_across_many_parts_is_stored_whole_and_in_order(store: SQLStore) -> None:
    session = store.create_session(new_session(), now=NOW)
    batch = [draft(f"message {n}", id=f"m-{n}", tokens=n + 1) for n in range(23)]
    stored = store.append_messages(session.id, batch, now=LATER)
    assert [(m.id, m.seq) for m in stored] == [(f"m-{n}", n + 1) for n in range(23)]
    assert store.read_messages(session.id) == stored
    assert store.get_session(session.id).stored_tokens == sum(range(1, 24))


def test_a_retry_finds_its_stored_ids_in_every_part(store: SQLStore) -> None:
    session = store.create_session(new_session(), now=NOW)
    first = [draft(f"message {n}", id=f"m-{n}") for n in range(0, 20, 2)]
    stored = store.append_messages(session.id, first, now=NOW)
    mixed = [draft(f"message {n}", id=f"m-{n}") for n in range(20)]
    again = store.append_messages(session.id, mixed, now=LATER)
    assert again[::2] == stored  # the retried ones, as stored, wherever their part falls
    assert [m.seq for m in again[1::2]] == list(range(11, 21))
    assert store.get_session(session.id).message_count == 20
    with pytest.raises(Conflict, match="m-18"):
        store.append_messages(session.id, [*mixed[:18], draft("other", id="m-18")], now=LATER)


def test_an_import_counts_what_each_part_added(store: SQLStore) -> None:
    session = store.create_session(new_session(), now=NOW)
    store.append_messages(session.id, [draft(f"m {n}", id=f"m-{n}") for n in range(7)], now=NOW)
    exported = store.get_session(session.id)
    messages = store.read_messages(session.id)
    store.delete_session(session.id)
    assert store.import_session(exported, messages[:5]) == 5
    assert store.import_session(exported, messages) == 2
    assert store.read_messages(session.id) == messages
