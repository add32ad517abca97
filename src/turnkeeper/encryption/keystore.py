"""The key store: each session's data key, wrapped by a master key, kept apart from the data.

Apart, so that deleting a session's row here (crypto-shredding) makes every copy of its data —
the database's backups, its WAL, a replica, a dump — unreadable, while the rest of a copy still
reads. Where it lives is the `key_store` setting: a SQLite file (by default beside a SQLite
database, `<database file>.keys`) or a PostgreSQL database; `memory://` beside an in-memory
database.

The SQLite key store writes in rollback-journal mode with `secure_delete` and `synchronous =
FULL`: a deleted key's bytes are overwritten in the file when the delete commits (a WAL would
keep the page that held it until a checkpoint). The PostgreSQL one leaves a deleted row to
VACUUM, as PostgreSQL does (docs/privacy.md says what that means for backups).

One small SQL dialect serves both databases (`?` placeholders, `ON CONFLICT DO NOTHING`):
these are a handful of statements run once per session, not the data path.
"""

from __future__ import annotations

import base64
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from turnkeeper.encryption.keys import DataKey, MasterKeys
from turnkeeper.errors import InvalidConfig, KeyUnavailable

__all__ = ["KeyStore", "MemoryKeyStore", "SqlKeyStore", "open_key_store"]

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS session_keys (
        session_id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        master_key_id TEXT NOT NULL,
        wrapped TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS master_key_checks (
        master_key_id TEXT PRIMARY KEY,
        wrapped TEXT NOT NULL)""",
)
_CHECK_OWNER = "turnkeeper master key check"
"""The associated data of the value each master key wraps once, so a wrong key under a known
id is found at open, not at the first read of an old session."""

Row = tuple[str, str, str]
"""(owner, master key id, wrapped key in base64)."""


class KeyStore(Protocol):
    """Wrapped data keys by session id."""

    url: str

    def find(self, session_id: str) -> Row | None: ...

    def add(self, session_id: str, row: Row) -> Row:
        """Store `row` unless the session has one; returns the stored row (first one wins)."""
        ...

    def delete(self, session_ids: Sequence[str]) -> None: ...

    def known_master_keys(self) -> dict[str, str]:
        """The check value of every master key this key store was used with, by id."""
        ...

    def check_value(self, key_id: str, wrapped: str) -> str:
        """The stored check value of master key `key_id`, storing `wrapped` if it has none."""
        ...

    def rows(self) -> list[tuple[str, Row]]: ...

    def replace(self, session_id: str, row: Row) -> None: ...

    def close(self) -> None: ...


class SqlKeyStore:
    """A key store in a SQLite file or a PostgreSQL database."""

    def __init__(self, url: str, connect: Callable[[], Any], placeholder: str) -> None:
        self.url = url
        self._connect = connect
        self._placeholder = placeholder
        self._lock = threading.Lock()
        self._conn = connect()
        with self._cursor() as cursor:
            for statement in _SCHEMA:
                cursor.execute(statement)

    @contextmanager
    def _cursor(self) -> Iterator[Any]:
        with self._lock:
            cursor = self._conn.cursor()
            try:
                yield cursor
            finally:
                cursor.close()

    def _run(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._cursor() as cursor:
            cursor.execute(sql.replace("?", self._placeholder), tuple(params))
            return list(cursor.fetchall()) if cursor.description else []

    def find(self, session_id: str) -> Row | None:
        found = self._run(
            "SELECT owner, master_key_id, wrapped FROM session_keys WHERE session_id = ?",
            (session_id,),
        )
        return (str(found[0][0]), str(found[0][1]), str(found[0][2])) if found else None

    def add(self, session_id: str, row: Row) -> Row:
        self._run(
            "INSERT INTO session_keys (session_id, owner, master_key_id, wrapped)"
            " VALUES (?, ?, ?, ?) ON CONFLICT (session_id) DO NOTHING",
            (session_id, *row),
        )
        stored = self.find(session_id)
        assert stored is not None
        return stored

    def delete(self, session_ids: Sequence[str]) -> None:
        for session_id in session_ids:
            self._run("DELETE FROM session_keys WHERE session_id = ?", (session_id,))

    def known_master_keys(self) -> dict[str, str]:
        return dict(self._run("SELECT master_key_id, wrapped FROM master_key_checks"))

    def check_value(self, key_id: str, wrapped: str) -> str:
        self._run(
            "INSERT INTO master_key_checks (master_key_id, wrapped) VALUES (?, ?)"
            " ON CONFLICT (master_key_id) DO NOTHING",
            (key_id, wrapped),
        )
        found = self._run(
            "SELECT wrapped FROM master_key_checks WHERE master_key_id = ?", (key_id,)
        )
        return str(found[0][0])

    def rows(self) -> list[tuple[str, Row]]:
        found = self._run("SELECT session_id, owner, master_key_id, wrapped FROM session_keys")
        return [(r[0], (r[1], r[2], r[3])) for r in found]

    def replace(self, session_id: str, row: Row) -> None:
        self._run(
            "UPDATE session_keys SET owner = ?, master_key_id = ?, wrapped = ?"
            " WHERE session_id = ?",
            (*row, session_id),
        )

    def close(self) -> None:
        self._conn.close()


class MemoryKeyStore:
    """The key store of a `memory://` database: gone with the process, as the data is."""

    url = "memory://"

    def __init__(self) -> None:
        self._keys: dict[str, Row] = {}
        self._checks: dict[str, str] = {}

    def find(self, session_id: str) -> Row | None:
        return self._keys.get(session_id)

    def add(self, session_id: str, row: Row) -> Row:
        return self._keys.setdefault(session_id, row)

    def delete(self, session_ids: Sequence[str]) -> None:
        for session_id in session_ids:
            self._keys.pop(session_id, None)

    def known_master_keys(self) -> dict[str, str]:
        return dict(self._checks)

    def check_value(self, key_id: str, wrapped: str) -> str:
        return self._checks.setdefault(key_id, wrapped)

    def rows(self) -> list[tuple[str, Row]]:
        return list(self._keys.items())

    def replace(self, session_id: str, row: Row) -> None:
        self._keys[session_id] = row

    def close(self) -> None:
        pass


def default_key_store(database_url: str) -> str | None:
    """Where the key store of `database_url` is when `key_store` is unset: a SQLite file
    beside a SQLite database, memory beside memory; None for a server database (it must be
    named: keys in the same database would sit in the same backups)."""
    scheme = database_url.split("://", 1)[0].lower() if "://" in database_url else "sqlite"
    if scheme == "memory":
        return "memory://"
    if scheme != "sqlite":
        return None
    from turnkeeper.storage.sql.sqlite import path_from_url

    path = path_from_url(database_url)
    return f"sqlite:///{path.with_name(path.name + '.keys')}"


def _sqlite_key_store(url: str) -> SqlKeyStore:
    from turnkeeper.storage.sql.sqlite import path_from_url

    path: Path = path_from_url(url)
    if not path.parent.is_dir():
        raise InvalidConfig("key_store", f"directory {path.parent} does not exist")

    def connect() -> sqlite3.Connection:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10)
        conn.execute("PRAGMA journal_mode = DELETE")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA secure_delete = ON")
        return conn

    return SqlKeyStore(url, connect, "?")


def _postgres_key_store(url: str) -> SqlKeyStore:
    import psycopg

    def connect() -> Any:
        return psycopg.connect(url, autocommit=True, connect_timeout=5)

    return SqlKeyStore(url.split("@")[-1], connect, "%s")


def open_key_store(key_store: str | None, database_url: str) -> KeyStore:
    """The key store `key_store` names (or the default for `database_url`); `InvalidConfig`
    naming `key_store` when there is none to use."""
    url = key_store or default_key_store(database_url)
    if url is None:
        raise InvalidConfig(
            "key_store",
            "a PostgreSQL database needs key_store set (sqlite:///path/keys.db or another"
            " PostgreSQL database): keys kept with the data would go into the same backups",
        )
    if key_store is not None and key_store == database_url:
        raise InvalidConfig("key_store", "must not be the database itself (see docs/privacy.md)")
    scheme = url.split("://", 1)[0].lower() if "://" in url else "sqlite"
    if scheme == "memory":
        return MemoryKeyStore()
    if scheme == "sqlite":
        return _sqlite_key_store(url)
    if scheme in ("postgresql", "postgres"):
        return _postgres_key_store(url)
    raise InvalidConfig(
        "key_store", f"unsupported scheme {scheme!r}; use sqlite:/// or postgresql://"
    )


def check_master_keys(keys: MasterKeys, store: KeyStore) -> None:
    """Prove at open that the configured master keys are the key store's, or `InvalidConfig`
    naming `encryption_key`: a key store used before must know at least one configured key id,
    and each known id's key must open the check value it wrapped when first used (a wrong key
    under a known id fails here, not at the first read of an old session). A configured key
    the store does not know yet (a rotation's new key) is recorded."""
    known = store.known_master_keys()
    if known and not known.keys() & keys.keys.keys():
        raise InvalidConfig(
            "encryption_key",
            f"holds none of the master keys the key store {store.url} was written with"
            f" ({', '.join(sorted(known))})",
        )
    for key_id, key in keys.keys.items():
        single = MasterKeys(current=key_id, keys={key_id: key})
        stored = known.get(key_id)
        if stored is None:
            _, sealed = single.wrap(b"check", _CHECK_OWNER)
            stored = store.check_value(key_id, base64.b64encode(sealed).decode())
        try:
            single.unwrap(key_id, base64.b64decode(stored), _CHECK_OWNER)
        except KeyUnavailable:
            raise InvalidConfig(
                "encryption_key",
                f"key {key_id!r} is not the key of that id the key store {store.url} was"
                " written with",
            ) from None


def wrap_row(keys: MasterKeys, data_key: DataKey) -> Row:
    key_id, sealed = keys.wrap(data_key.material, data_key.owner)
    return data_key.owner, key_id, base64.b64encode(sealed).decode()


def unwrap_row(keys: MasterKeys, row: Row) -> DataKey:
    owner, key_id, wrapped = row
    return DataKey(owner, keys.unwrap(key_id, base64.b64decode(wrapped), owner))


def rewrap(keys: MasterKeys, store: KeyStore) -> int:
    """Wrap every data key not wrapped by the current master key with it (a rotation's last
    step: afterwards the old master key can leave `encryption_key`). Returns how many were
    rewrapped; the data itself is not touched."""
    count = 0
    for session_id, row in store.rows():
        if row[1] != keys.current:
            store.replace(session_id, wrap_row(keys, unwrap_row(keys, row)))
            count += 1
    return count
