"""`messages_with_words` (which of a session's messages hold a word, from the full-text index)
on every backend, and the full-text retriever ranking over it: the same answer everywhere, so
a `relevant` window recalls the same turns on memory, SQLite, PostgreSQL and PostgreSQL+Redis."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.conftest import open_test_store
from turnkeeper.context.retrieval import FullTextRetriever
from turnkeeper.storage.base import Store
from turnkeeper.storage.search import WordMatchStore
from turnkeeper.types import MessageDraft, NewSession, Role

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
TEXTS = [
    "You are a travel agent.",
    "My booking code is ZX 4471, the hotel is in Lisbon.",
    "Noted: Lisbon, code ZX 4471.",
    "What about Porto? Is the train to PORTO fast?",
    "The train to Porto takes three hours.",
    "lisbonne is not lisbon; café Über 東京",
    "Lisbon again, and again lisbon.",
]


def _drafts(texts: list[str], prefix: str = "m") -> list[MessageDraft]:
    return [
        MessageDraft(f"{prefix}-{n}", Role.USER, text, 8, NOW) for n, text in enumerate(texts, 1)
    ]


@pytest.fixture(params=["memory", "sqlite", "postgres", "postgres+redis"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    store = open_test_store(request.param, request, tmp_path)
    yield store
    store.close()


def test_every_bundled_backend_matches_words(any_store: Store) -> None:
    assert isinstance(any_store, WordMatchStore)


def test_each_word_gives_the_messages_holding_it_newest_first(any_store: Store) -> None:
    assert isinstance(any_store, WordMatchStore)
    session = any_store.create_session(NewSession(project="alpha"), now=NOW)
    other = any_store.create_session(NewSession(project="alpha"), now=NOW)
    any_store.append_messages(session.id, _drafts(TEXTS), now=NOW)
    any_store.append_messages(other.id, _drafts(["lisbon porto zx"], "o"), now=NOW)
    found = any_store.messages_with_words(
        session.id, ["lisbon", "porto", "zx", "4471", "東京", "madrid"], limit=10
    )
    assert found == {
        "lisbon": [7, 6, 3, 2],  # whole words only: "lisbonne" is another word
        "porto": [5, 4],  # case does not matter
        "zx": [3, 2],
        "4471": [3, 2],
        "東京": [6],
        "madrid": [],
    }
    assert any_store.messages_with_words(session.id, ["lisbon"], limit=2) == {"lisbon": [7, 6]}


def test_matches_follow_deletes_and_later_appends(any_store: Store) -> None:
    assert isinstance(any_store, WordMatchStore)
    session = any_store.create_session(NewSession(project="alpha"), now=NOW)
    any_store.append_messages(session.id, _drafts(TEXTS), now=NOW)
    assert any_store.messages_with_words(session.id, ["lisbon"], limit=10)["lisbon"][0] == 7
    any_store.delete_last_message(session.id, now=NOW)
    assert any_store.messages_with_words(session.id, ["lisbon"], limit=10) == {"lisbon": [6, 3, 2]}
    any_store.append_messages(session.id, _drafts(["back to LISBON"], "n"), now=NOW)
    assert any_store.messages_with_words(session.id, ["lisbon"], limit=10) == {
        "lisbon": [7, 6, 3, 2]
    }


def test_the_full_text_retriever_ranks_rare_words_first(any_store: Store) -> None:
    session = any_store.create_session(NewSession(project="alpha"), now=NOW)
    any_store.append_messages(session.id, _drafts(TEXTS), now=NOW)
    session = any_store.get_session(session.id)
    retriever = FullTextRetriever(any_store)
    # "zx" and "4471" are rarer than "lisbon": the booking messages first, newest first on a tie
    assert retriever(session, "What was the code ZX 4471 for Lisbon?", 3) == [3, 2, 7]
    assert retriever(session, "what is the", 5) == []  # nothing but words too common to rank
    assert retriever(session, "anything", 0) == []
