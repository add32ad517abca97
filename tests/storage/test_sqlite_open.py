"""Opening a SQLite store does the least it can (`PRAGMA user_version`), so what it puts off must
still happen: each connection's pragmas are in force from its first use, and the `meta` values
remembered from an earlier open are not trusted for a file that has changed since (replaced,
rewritten, migrated by another process)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import turnkeeper
from turnkeeper.errors import BackendUnavailable
from turnkeeper.storage.sql.schema import LATEST_VERSION
from turnkeeper.storage.sql.sqlite import SQLiteStore, _examine

SYNCHRONOUS_LEVELS = {"OFF": 0, "NORMAL": 1, "FULL": 2, "EXTRA": 3}


def _pragmas(conn: sqlite3.Connection) -> tuple[str, int, int]:
    (journal,) = conn.execute("PRAGMA journal_mode").fetchone()
    (synchronous,) = conn.execute("PRAGMA synchronous").fetchone()
    (foreign_keys,) = conn.execute("PRAGMA foreign_keys").fetchone()
    return str(journal), int(synchronous), int(foreign_keys)


@pytest.mark.parametrize("synchronous", ["OFF", "NORMAL", "FULL"])
def test_a_connection_has_its_pragmas_from_its_first_use(tmp_path: Path, synchronous: str) -> None:
    url = f"sqlite:///{tmp_path / 'pragmas.db'}"
    SQLiteStore(url).close()  # made (and migrated) before: this open only reads the version
    store = SQLiteStore(url, synchronous=synchronous)
    try:
        store._read("SELECT count(*) FROM sessions")  # the first use of this thread's connection
        expected = ("wal", SYNCHRONOUS_LEVELS[synchronous], 1)
        assert _pragmas(store._conn()) == expected
        seen_by_thread: list[tuple[str, int, int]] = []

        def first_use_in_a_thread() -> None:
            store._read("SELECT count(*) FROM sessions")  # opens the thread's own connection
            seen_by_thread.append(_pragmas(store._conn()))

        thread = threading.Thread(target=first_use_in_a_thread)
        thread.start()
        thread.join()
        assert seen_by_thread == [expected]
        with pytest.raises(sqlite3.IntegrityError):  # foreign keys are enforced
            store._conn().execute(
                "INSERT INTO messages (session_id, seq, id, role, content, internal, created_at,"
                " tokens, metadata) VALUES ('no-such-session', 1, 'm-1', 'user', 'x', 0,"
                " '2026-01-01T00:00:00.000000+00:00', 1, '{}')"
            )
    finally:
        store.close()


def test_a_new_file_is_made_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    with turnkeeper.open(f"sqlite:///{path}") as tk:
        tk.create_session()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def _made_with(path: Path, encoding: str) -> None:
    with turnkeeper.open(f"sqlite:///{path}", token_encoding=encoding) as tk:
        tk.create_session(key=encoding)


def _encoding_of(path: Path) -> str:
    with turnkeeper.open(f"sqlite:///{path}") as tk:
        return tk.encoding


def test_a_file_put_in_place_of_an_opened_one_is_read_afresh(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    _made_with(path, "cl100k_base")
    assert _encoding_of(path) == "cl100k_base"
    assert _encoding_of(path) == "cl100k_base"  # the second open: remembered
    other = tmp_path / "other.db"
    _made_with(other, "o200k_base")
    os.replace(other, path)  # another file (a restored backup) in its place
    assert _encoding_of(path) == "o200k_base"
    with turnkeeper.open(f"sqlite:///{path}") as tk:
        assert tk.get_session("o200k_base").key == "o200k_base"


def test_a_file_rewritten_in_place_is_read_afresh(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    _made_with(path, "o200k_base")
    assert _encoding_of(path) == "o200k_base"
    other = tmp_path / "other.db"
    _made_with(other, "cl100k_base")
    shutil.copyfile(other, path)  # the same inode, other contents
    assert _encoding_of(path) == "cl100k_base"


MIGRATE_IN_ANOTHER_PROCESS = """
import sys
from turnkeeper.storage.sql.sqlite import SQLiteStore
SQLiteStore(sys.argv[1]).close()
"""


def test_a_file_migrated_by_another_process_is_seen_migrated(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    old = SQLiteStore(url, target_version=1)
    assert old.meta("token_encoding", "cl100k_base") == "cl100k_base"
    old.close()
    again = SQLiteStore(url, target_version=1)  # the version it was left at: nothing to do
    assert again.schema_version() == 1
    again.close()
    subprocess.run([sys.executable, "-c", MIGRATE_IN_ANOTHER_PROCESS, url], check=True)
    store = SQLiteStore(url, target_version=1)
    try:
        assert store.schema_version() == LATEST_VERSION
        assert store.meta("token_encoding", "o200k_base") == "cl100k_base"
    finally:
        store.close()


def test_a_migration_by_a_store_still_open_elsewhere_is_seen(tmp_path: Path) -> None:
    """The other writer keeps its connection, so its migration may sit in the WAL with the
    database file itself untouched: the version is read at every open, never remembered."""
    url = f"sqlite:///{tmp_path / 'old.db'}"
    SQLiteStore(url, target_version=1).close()
    reader = SQLiteStore(url, target_version=1)
    migrator = SQLiteStore(url)
    try:
        assert migrator.schema_version() == LATEST_VERSION
        assert reader.schema_version() == LATEST_VERSION
        late = SQLiteStore(url, target_version=1)
        assert late.schema_version() == LATEST_VERSION
        late.close()
    finally:
        migrator.close()
        reader.close()


def test_the_header_gives_the_version_only_when_no_log_is_pending(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    url = f"sqlite:///{path}"
    SQLiteStore(url, target_version=1).close()
    assert _examine(path)[1] == 1  # closed cleanly: the file holds everything
    migrator = SQLiteStore(url)  # kept open: its migration may sit in the write-ahead log
    try:
        pending = os.path.exists(f"{path}-wal") and os.stat(f"{path}-wal").st_size > 0
        assert _examine(path)[1] == (None if pending else LATEST_VERSION)
    finally:
        migrator.close()
    assert _examine(path)[1] == LATEST_VERSION
    assert _examine(tmp_path / "missing.db") == (None, None)


def test_a_file_that_is_no_database_is_refused_at_open(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes, not a database" * 100)
    with pytest.raises(BackendUnavailable):
        turnkeeper.open(f"sqlite:///{path}")
    assert _examine(path)[1] is None


def test_a_copy_with_its_log_still_pending_opens_migrated(tmp_path: Path) -> None:
    """A crash leaves the migration in the log: the copy (file and log, as a crashed
    process left them) opens at the latest version, with its data."""
    path = tmp_path / "old.db"
    url = f"sqlite:///{path}"
    _made_with(path, "cl100k_base")
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    with turnkeeper.open(url) as tk:
        tk.create_session(key="after")
        for suffix in ("", "-wal"):  # as it is on disk while the store is open
            if os.path.exists(f"{path}{suffix}"):
                shutil.copyfile(f"{path}{suffix}", crashed / f"old.db{suffix}")
    with turnkeeper.open(f"sqlite:///{crashed / 'old.db'}") as tk:
        assert tk.encoding == "cl100k_base"
        assert tk.get_session("after").key == "after"
