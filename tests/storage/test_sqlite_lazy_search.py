"""SQLite's full-text index catches up at search time (migration step 10), and must always answer
as if every write had indexed its messages at once.

A model-based run interleaves every write that adds or removes messages with searches, through
`turnkeeper.open()` as a user opens it, and compares each search with a naive scan of what the
store holds; after each search the FTS5 index must also agree with the table it indexes (FTS5's
own `integrity-check` against the content table), which is what a delete of a never-indexed
row would break. Then the edges one at a time: a rowid freed and taken again, two processes
catching up at once, and a v9 database (frozen dump) upgraded with its index intact.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import turnkeeper
from turnkeeper.service import Turnkeeper
from turnkeeper.storage.sql.schema import LATEST_VERSION
from turnkeeper.storage.sql.search import CATCH_UP_BATCH
from turnkeeper.types import NewMessage

FIXTURES = Path(__file__).parent / "fixtures"
WORDS = ["lisbon", "porto", "tram", "fado", "azulejos", "sintra"]
PROJECT = "p"
contents = st.lists(
    st.sampled_from([*WORDS, "the", "and", "Lisbon,", "TRAM!"]), min_size=1, max_size=5
)


def _words(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"\w+", text)}


def _index_agrees_with_messages(path: Path) -> None:
    """FTS5's check of the index against its content table (fails on a stray or missing row)."""
    with sqlite3.connect(path, isolation_level=None) as conn:
        conn.execute("INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)")
        (indexed,) = conn.execute("SELECT count(*) FROM messages_fts_docsize").fetchone()
        (stored,) = conn.execute("SELECT count(*) FROM messages").fetchone()
    assert indexed == stored


def _watermark(path: Path) -> tuple[int, int]:
    with sqlite3.connect(path) as conn:
        row = conn.execute(
            "SELECT indexed_to, (SELECT coalesce(max(rowid), 0) FROM messages)"
            " FROM search_watermark"
        ).fetchone()
    return int(row[0]), int(row[1])


class LazyIndexMachine(RuleBasedStateMachine):
    """Sessions of one project; every search must equal a scan of the stored messages."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.TemporaryDirectory()
        self.path = Path(self.dir.name) / "lazy.db"
        self.tk: Turnkeeper = turnkeeper.open(f"sqlite:///{self.path}")
        self.sessions: list[str] = []

    @initialize()
    def first_session(self) -> None:
        self.sessions.append(self.tk.create_session(project=PROJECT).id)

    def teardown(self) -> None:
        self.tk.close()
        self.dir.cleanup()

    def _pick(self, index: int) -> str:
        return self.sessions[index % len(self.sessions)]

    @rule(index=st.integers(0, 9), words=contents)
    def append(self, index: int, words: list[str]) -> None:
        self.tk.append(self._pick(index), "user", " ".join(words), project=PROJECT)

    @rule(index=st.integers(0, 9), batch=st.lists(contents, min_size=1, max_size=4))
    def append_many(self, index: int, batch: list[list[str]]) -> None:
        messages = [NewMessage("assistant", " ".join(words)) for words in batch]
        self.tk.append_many(self._pick(index), messages, project=PROJECT)

    @rule(index=st.integers(0, 9))
    def pop_last_message(self, index: int) -> None:
        self.tk.pop_last_message(self._pick(index), project=PROJECT)

    @rule(index=st.integers(0, 9))
    def reset(self, index: int) -> None:
        self.tk.reset_session(self._pick(index), project=PROJECT)

    @precondition(lambda self: len(self.sessions) > 1)
    @rule(index=st.integers(0, 9))
    def delete(self, index: int) -> None:
        session_id = self._pick(index)
        self.tk.delete_session(session_id, project=PROJECT)
        self.sessions.remove(session_id)

    @rule(index=st.integers(0, 9), cut=st.integers(0, 100))
    def fork(self, index: int, cut: int) -> None:
        source = self.tk.get_session(self._pick(index), project=PROJECT)
        at_seq = cut % (source.last_seq + 1)
        self.sessions.append(self.tk.fork(source.id, at_seq, project=PROJECT).id)

    @rule()
    def new_session(self) -> None:
        self.sessions.append(self.tk.create_session(project=PROJECT).id)

    @rule(word=st.sampled_from(WORDS))
    def search(self, word: str) -> None:
        found = {(h.session_id, h.seq) for h in self.tk.search(word, project=PROJECT, limit=100)}
        expected = {
            (session_id, m.seq)
            for session_id in self.sessions
            for m in self.tk.history(session_id, project=PROJECT)
            if word in _words(m.content)
        }
        assert len(expected) < 100  # a page holds them all
        assert found == expected
        _index_agrees_with_messages(self.path)

    @invariant()
    def watermark_never_above_the_newest_row(self) -> None:
        indexed, newest = _watermark(self.path)
        assert indexed <= newest


TestLazyIndex = LazyIndexMachine.TestCase
TestLazyIndex.settings = settings(
    max_examples=30,
    stateful_step_count=40,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


def test_a_rowid_freed_by_an_undo_and_taken_again_is_indexed_with_its_new_text(
    tmp_path: Path,
) -> None:
    path = tmp_path / "reuse.db"
    with turnkeeper.open(f"sqlite:///{path}") as tk:
        session = tk.create_session()
        tk.append(session, "user", "lisbon")
        tk.append(session, "user", "porto")
        assert len(tk.search("porto")) == 1  # indexed up to the second row
        tk.pop_last_message(session)  # frees the largest rowid
        assert _watermark(path) == (1, 1)
        tk.append(session, "user", "sintra")  # takes that rowid again
        assert tk.search("porto") == []
        assert [(h.seq, h.marked()) for h in tk.search("sintra")] == [(2, "[sintra]")]
    _index_agrees_with_messages(path)


def test_messages_deleted_before_any_search_never_reach_the_index(tmp_path: Path) -> None:
    path = tmp_path / "unindexed.db"
    with turnkeeper.open(f"sqlite:///{path}") as tk:
        kept = tk.create_session()
        tk.append(kept, "user", "fado tonight")
        gone = tk.create_session()
        tk.append_many(gone, [NewMessage("user", f"fado {i}") for i in range(5)])
        tk.fork(gone.id, 3)
        tk.delete_session(gone)
        tk.reset_session(kept)
        tk.append(kept, "user", "fado again")
        assert _watermark(path)[0] == 0  # nothing indexed yet
        assert sorted(h.seq for h in tk.search("fado")) == [1, 1, 2, 3]
    _index_agrees_with_messages(path)


CATCH_UP = """
import sys
import turnkeeper
with turnkeeper.open(sys.argv[1]) as tk:
    print(len(tk.search("lisbon", limit=5)))
"""


def test_two_processes_catching_up_at_once_index_each_message_once(tmp_path: Path) -> None:
    path = tmp_path / "race.db"
    url = f"sqlite:///{path}"
    with turnkeeper.open(url) as tk:
        session = tk.create_session(key="bulk")
    count = CATCH_UP_BATCH * 2 + 500  # several catch-up steps each, to interleave
    at = datetime(2026, 1, 1, tzinfo=UTC).isoformat()
    with sqlite3.connect(path) as conn:  # what an import writes: rows, no index
        conn.executemany(
            "INSERT INTO messages (session_id, seq, id, role, content, created_at, tokens)"
            " VALUES (?, ?, ?, 'user', ?, ?, 3)",
            ((session.id, n, f"m{n}", f"lisbon {n}", at) for n in range(1, count + 1)),
        )
    searchers = [
        subprocess.Popen([sys.executable, "-c", CATCH_UP, url], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=300)[0].strip() for p in searchers]
    assert [p.returncode for p in searchers] == [0, 0]
    assert outputs == ["5", "5"]
    assert _watermark(path) == (count, count)
    _index_agrees_with_messages(path)
    with sqlite3.connect(path) as conn:
        (matched,) = conn.execute(
            "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'lisbon'"
        ).fetchone()
    assert matched == count


def test_a_v9_database_upgrades_with_the_same_search_results(tmp_path: Path) -> None:
    path = tmp_path / "v9.db"
    with sqlite3.connect(path) as conn:
        conn.executescript((FIXTURES / "sqlite_v9.sql").read_text())
    with sqlite3.connect(path) as conn:  # a new connection reads the dumped virtual table
        # what the v9 index answers, read straight from FTS5 (the v9 code had no catch-up)
        before = {
            word: sorted(
                row[0]
                for row in conn.execute(
                    "SELECT m.id FROM messages_fts JOIN messages m ON m.rowid = messages_fts.rowid"
                    " WHERE messages_fts MATCH ?",
                    (word,),
                )
            )
            for word in ("old", "question", "system", "absent")
        }
    assert before["old"] == ["m-1", "m-2"]
    with turnkeeper.open(f"sqlite:///{path}") as tk:
        assert tk.store.schema_version() == LATEST_VERSION  # type: ignore[attr-defined]
        assert _watermark(path) == (2, 2)  # everything the trigger indexed stays indexed
        after = {word: sorted(h.message_id for h in tk.search(word)) for word in before}
        assert after == before
        tk.pop_last_message("s-1")  # an old, indexed message leaves the index
        tk.append("s-1", "user", "new question")
        (hit,) = tk.search("question")
        assert (hit.seq, hit.marked()) == (2, "new [question]")
    _index_agrees_with_messages(path)
