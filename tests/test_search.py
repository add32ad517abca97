"""Full-text search through the service, on every backend (SQLite, PostgreSQL, PostgreSQL behind
the caches): ranked hits with highlighted snippets, filters, project isolation, an index that
follows every write (appends, imports, undo, reset, delete), and a search stopped once it runs
past `search_timeout`."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

import turnkeeper
from tests.conftest import Clock
from turnkeeper.errors import InvalidInput, SearchTooSlow, SessionNotFound
from turnkeeper.service import Turnkeeper
from turnkeeper.storage.search import SearchHit, SnippetPart
from turnkeeper.types import NewMessage, Role, Session


def _found(hits: list[SearchHit]) -> list[tuple[str | None, int]]:
    return [(hit.session_key, hit.seq) for hit in hits]


@pytest.fixture
def trips(tk: Turnkeeper, clock: Clock) -> Turnkeeper:
    """Two sessions about travel in project `travel`, one in project `other`."""
    lisbon = tk.create_session(key="lisbon", project="travel", kind="trip", title="Lisbon")
    tk.append(lisbon, "user", "What should I see in Lisbon next week?", project="travel")
    clock.advance(timedelta(minutes=1))
    tk.append(
        lisbon,
        "assistant",
        "In Lisbon, visit Belém and ride tram 28 through Alfama.",
        author="guide",
        project="travel",
    )
    clock.advance(timedelta(minutes=1))
    tk.append(lisbon, "assistant", "weather lookup: Lisbon sunny", internal=True, project="travel")
    porto = tk.create_session(key="porto", project="travel", kind="chat")
    clock.advance(timedelta(minutes=1))
    tk.append(porto, "user", "Is Porto better than Lisbon for port wine?", project="travel")
    secret = tk.create_session(key="secret", project="other")
    tk.append(secret, "user", "My Lisbon hotel password is hunter2", project="other")
    return tk


def test_a_word_finds_every_message_of_the_project_that_contains_it(trips: Turnkeeper) -> None:
    hits = trips.search("lisbon", project="travel")
    assert sorted(_found(hits)) == [("lisbon", 1), ("lisbon", 2), ("lisbon", 3), ("porto", 1)]
    assert all(hit.project == "travel" for hit in hits)
    assert [hit.rank for hit in hits] == sorted((hit.rank for hit in hits), reverse=True)


def test_snippets_mark_the_matched_words(trips: Turnkeeper) -> None:
    (hit,) = trips.search("tram", project="travel")
    assert (hit.session_key, hit.seq, hit.role, hit.author) == (
        "lisbon",
        2,
        Role.ASSISTANT,
        "guide",
    )
    assert SnippetPart("tram", True) in hit.snippet
    assert hit.marked() == "In Lisbon, visit Belém and ride [tram] 28 through Alfama."
    assert hit.session_title == "Lisbon" and hit.message_id


def test_another_projects_messages_are_never_found(trips: Turnkeeper) -> None:
    assert trips.search("hunter2", project="travel") == []
    assert _found(trips.search("hunter2", project="other")) == [("secret", 1)]
    with pytest.raises(SessionNotFound):
        trips.search("lisbon", project="travel", session="secret")


def test_filters_narrow_by_session_role_author_kind_and_internal(trips: Turnkeeper) -> None:
    def keys(**filters: object) -> list[tuple[str | None, int]]:
        return sorted(_found(trips.search("lisbon", project="travel", **filters)))  # type: ignore[arg-type]

    assert keys(session="porto") == [("porto", 1)]
    assert keys(role="user") == [("lisbon", 1), ("porto", 1)]
    assert keys(author="guide") == [("lisbon", 2)]
    assert keys(kind="chat") == [("porto", 1)]
    assert keys(include_internal=False) == [("lisbon", 1), ("lisbon", 2), ("porto", 1)]


def test_a_time_range_includes_since_and_excludes_until(trips: Turnkeeper, clock: Clock) -> None:
    start = clock.now - timedelta(minutes=3)  # the first message's time
    first = sorted(
        _found(trips.search("lisbon", project="travel", until=start + timedelta(minutes=1)))
    )
    assert first == [("lisbon", 1)]
    later = trips.search("lisbon", project="travel", since=start + timedelta(minutes=2))
    assert sorted(_found(later)) == [("lisbon", 3), ("porto", 1)]


def test_phrases_or_exclusion_and_prefixes(trips: Turnkeeper) -> None:
    def found(q: str) -> list[tuple[str | None, int]]:
        return sorted(_found(trips.search(q, project="travel")))

    assert found('"tram 28"') == [("lisbon", 2)]
    assert found('"28 tram"') == []
    assert found("belém OR porto") == [("lisbon", 2), ("porto", 1)]
    assert found("lisbon -porto -weather") == [("lisbon", 1), ("lisbon", 2)]
    assert found("alfa*") == [("lisbon", 2)]
    assert found("alfa") == []
    assert found("LISBON sunny") == [("lisbon", 3)]
    assert found("AND NEAR content: lisbon") == []  # backend operators are plain words here


def test_the_best_match_ranks_first(tk: Turnkeeper) -> None:
    s = tk.create_session(key="rank")
    tk.append(s, "user", "lisbon " * 5 + "is what this whole message is about")
    tk.append(s, "user", "a long message " + "about many other things " * 20 + "and lisbon once")
    hits = tk.search("lisbon")
    assert [hit.seq for hit in hits] == [1, 2] and hits[0].rank > hits[1].rank


def test_limit_and_offset_page_through_the_ranking(tk: Turnkeeper) -> None:
    s = tk.create_session(key="many")
    for n in range(5):
        tk.append(s, "user", f"message {n} about sintra")
    everything = _found(tk.search("sintra", limit=100))
    assert len(everything) == 5
    assert (
        _found(tk.search("sintra", limit=2))
        + _found(tk.search("sintra", limit=2, offset=2))
        + _found(tk.search("sintra", limit=2, offset=4))
        == everything
    )


def test_the_index_follows_undo_reset_delete_and_import(tk: Turnkeeper, tmp_path: object) -> None:
    s = tk.create_session(key="kept")
    tk.append(s, "system", "You know about azulejos.")
    tk.append(s, "user", "Tell me about azulejos and pastel de nata.")
    tk.append(s, "assistant", "Pastel de nata is a custard tart.")
    assert tk.store.delete_last_message(s.id, now=tk.now()) is not None
    assert _found(tk.search("custard")) == []
    tk.append(s, "assistant", "Azulejos are painted tiles.")
    assert sorted(_found(tk.search("azulejos"))) == [("kept", 1), ("kept", 2), ("kept", 3)]
    tk.reset_session(s, keep_system_message=True)
    assert _found(tk.search("azulejos")) == [("kept", 1)]
    tk.delete_session(s)
    assert tk.search("azulejos") == []

    source = tk.create_session(key="moved", project="a")
    tk.append(source, "user", "Fado in the evening", project="a")
    exported = tk.store.get_session(source.id)
    messages = tk.store.read_messages(source.id)
    tk.delete_session(source, project="a")
    assert tk.search("fado", project="a") == []
    assert tk.store.import_session(exported, messages) == 1
    assert _found(tk.search("fado", project="a")) == [("moved", 1)]


def test_every_message_of_a_large_batch_is_found(tk: Turnkeeper) -> None:
    s = tk.create_session(key="bulk")
    words = ["azulejo", "bacalhau", "fado"]
    tk.append_many(
        s, [NewMessage(role="user", content=f"{words[n % 3]} number {n}") for n in range(1_234)]
    )
    for index, word in enumerate(words):
        found = [
            hit.seq
            for offset in range(0, 500, 100)
            for hit in tk.search(word, offset=offset, limit=100)
        ]
        assert sorted(found) == list(range(index + 1, 1_235, 3))


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ("", "no word"),
        ("   ", "no word"),
        ("?!", "no word"),
        ("-lisbon", "no word"),
        ('"unclosed', "unclosed quote"),
        ("OR lisbon", "OR needs"),
        ("lisbon OR", "OR needs"),
        ("a OR -b", "excluded"),
        ("e-ma*", "prefix"),
        ("x" * 501, "limit is 500"),
    ],
)
def test_malformed_queries_name_q(tk: Turnkeeper, query: str, problem: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        tk.search(query)
    assert raised.value.field == "q" and problem in str(raised.value)


def test_bad_paging_and_ranges_name_their_field(tk: Turnkeeper, clock: Clock) -> None:
    for kwargs, field in [
        ({"limit": 0}, "limit"),
        ({"limit": 101}, "limit"),
        ({"offset": -1}, "offset"),
        ({"offset": 10_001}, "offset"),
        ({"since": clock.now, "until": clock.now}, "until"),
        ({"since": clock.now.replace(tzinfo=None)}, "since"),
        ({"role": "robot"}, "role"),
    ]:
        with pytest.raises(InvalidInput) as raised:
            tk.search("lisbon", **kwargs)  # type: ignore[arg-type]
        assert raised.value.field == field, kwargs


def test_no_query_text_reaches_the_backend_as_syntax(tk: Turnkeeper) -> None:
    """Whatever is typed, the answer is hits or an `InvalidInput` naming `q`: never a database
    error (FTS5 and tsquery each have operators a raw query would trip over)."""
    import random

    s = tk.create_session(key="syntax")
    tk.append(s, "user", 'Quotes " and (parens) AND NEAR OR * - ^ : col:umn é_ü')
    pieces = ['"', "(", ")", "*", "-", "^", ":", "+", "OR", "AND", "NOT", "NEAR", "NEAR(",
              "col:", "é", "_", "quotes", "parens", "a", "''", "\\", "!!", "&", "|", "<->"]  # fmt: skip
    rng = random.Random(7)
    for _ in range(150):
        query = " ".join(rng.choice(pieces) for _ in range(rng.randint(1, 6)))
        query = query if rng.random() < 0.5 else query.replace(" ", "")
        try:
            tk.search(query)
        except InvalidInput as exc:
            assert exc.field == "q", query
    assert _found(tk.search('"parens" AND NEAR')) == [("syntax", 1)]


# -- a search that runs too long -----------------------------------------------------------

GUARD_SECONDS = 60
"""How long a lock is held at most: unbounded, a search waiting for it would wait until then."""


def _many_messages(tk: Turnkeeper) -> Session:
    session = tk.create_session(key="bulk")
    tk.append_many(
        session, [NewMessage(role="user", content=f"lisbon note {n}") for n in range(2_000)]
    )
    return session


def _assert_too_slow(raised: pytest.ExceptionInfo[InvalidInput], bound: str) -> None:
    assert isinstance(raised.value, SearchTooSlow)
    assert raised.value.field == "q"
    assert f"longer than {bound}" in raised.value.problem
    assert "narrow it" in raised.value.problem


def test_a_search_past_search_timeout_on_sqlite_is_stopped_asking_for_a_narrower_one(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'slow.db'}"
    with turnkeeper.open(url, search_timeout=timedelta(microseconds=1)) as tk:
        session = _many_messages(tk)
        with pytest.raises(InvalidInput) as raised:
            tk.search("lisbon")  # matches every message: far more work than a microsecond
        _assert_too_slow(raised, "0.001 ms")
        tk.append(session, "user", "still writable")  # the store serves on
    with turnkeeper.open(url) as tk:  # the default bound: the same search answers
        assert len(tk.search("lisbon", limit=100)) == 100


def test_a_search_past_search_timeout_on_postgres_is_cancelled_asking_for_a_narrower_one(
    postgres_url: str,
) -> None:
    release, locked = threading.Event(), threading.Event()

    def hold_the_messages_table() -> None:  # every search waits for it
        with psycopg.connect(postgres_url, autocommit=True) as locker, locker.transaction():
            locker.execute("LOCK TABLE messages IN ACCESS EXCLUSIVE MODE")
            locked.set()
            release.wait(GUARD_SECONDS)

    with turnkeeper.open(postgres_url, search_timeout="200ms") as tk:
        _many_messages(tk)
        locker = threading.Thread(target=hold_the_messages_table)
        locker.start()
        locked.wait()
        try:
            with pytest.raises(InvalidInput) as raised:
                tk.search("lisbon")
        finally:
            release.set()
            locker.join()
        _assert_too_slow(raised, "200 ms")
        assert len(tk.search("lisbon", limit=100)) == 100  # the store serves on
