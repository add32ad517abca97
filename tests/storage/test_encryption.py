"""Encryption at rest and crypto-shredding (docs/privacy.md), on real SQLite, PostgreSQL and
Redis: the whole store contract through the encrypting store, no user content in the clear in
the SQLite file and its WAL, a `pg_dump` of the schema or any Redis value, a deleted session's
key gone so a copy of the data taken before cannot yield it, and one clear error for every
wrong key."""

from __future__ import annotations

import base64
import re
import shutil
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import turnkeeper
from tests.conftest import POSTGRES_URL
from tests.postgres_schemas import blank_schema
from turnkeeper.assemble import open_store
from turnkeeper.config import load_settings
from turnkeeper.encryption.keys import generate_master_key
from turnkeeper.encryption.store import EncryptedStore
from turnkeeper.errors import InvalidConfig, KeyDestroyed, KeyUnavailable, Unsupported
from turnkeeper.storage.base import FullStore
from turnkeeper.testing import NOW, EncryptionContract, FullStoreContract, draft, new_session
from turnkeeper.testing.encryption import CANARIES

KEY = generate_master_key("k1")
FIXED_KEY = "k1:" + base64.b64encode(bytes(range(32))).decode()
"""A key that is the same in every test process (parameters must be: xdist compares them)."""


def _sqlite_url(tmp_path: Path, name: str = "enc.db") -> str:
    return f"sqlite:///{tmp_path / name}"


def open_encrypted(name: str, request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A fresh encrypted store of the backend `name`, assembled as a deployment's is."""
    if name == "memory":
        return open_store("memory://", load_settings(encryption_key=KEY, lru_size=100))
    if name == "sqlite":
        return open_store(_sqlite_url(tmp_path), load_settings(encryption_key=KEY, lru_size=100))
    url = request.getfixturevalue("postgres_url")
    redis_url = request.getfixturevalue("redis_server")
    settings = load_settings(
        encryption_key=KEY,
        key_store=_sqlite_url(tmp_path, "keys.db"),
        redis_url=redis_url,
        lru_size=100,
    )
    return open_store(url, settings)


@pytest.fixture(params=["memory", "sqlite", "postgres+redis"])
def encrypted(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    store = open_encrypted(request.param, request, tmp_path)
    assert isinstance(store, EncryptedStore)
    yield store
    store.close()


class TestEncryptedStoresKeepTheWholeContract(FullStoreContract):
    @pytest.fixture
    def store(self, encrypted: FullStore) -> FullStore:
        return encrypted


# -- nothing in the clear at rest ----------------------------------------------------------------


def _sqlite_files(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())


def _redis_values(redis_url: str) -> bytes:
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        return b"".join(client.get(key) or b"" for key in client.scan_iter(count=1000))
    finally:
        client.close()


def _pg_dump(url: str) -> bytes:
    schema = re.search(r"tk_[0-9a-f]{16}", url)
    assert schema is not None
    dump = subprocess.run(
        ["pg_dump", "--data-only", f"--schema={schema.group()}", POSTGRES_URL],
        capture_output=True,
        check=True,
    )
    return dump.stdout


class TestSQLiteHoldsNoPlaintext(EncryptionContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[Any]:
        store = open_store(_sqlite_url(tmp_path), load_settings(encryption_key=KEY))
        yield store
        store.close()

    @pytest.fixture
    def at_rest(self, tmp_path: Path) -> Callable[[], bytes]:
        return lambda: _sqlite_files(tmp_path / "enc.db")


class TestPostgresAndRedisHoldNoPlaintext(EncryptionContract):
    @pytest.fixture
    def store(self, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
        store = open_encrypted("postgres+redis", request, tmp_path)
        yield store
        store.close()

    @pytest.fixture
    def at_rest(self, postgres_url: str, redis_server: str) -> Callable[[], bytes]:
        def everything() -> bytes:
            cached = _redis_values(redis_server)
            assert b"tkenc1:" in cached, "Redis holds none of the session's pages"
            return _pg_dump(postgres_url) + cached

        return everything


def _write_canaries(store: Any, key: str = "s") -> str:
    session = store.create_session(new_session(key=key), now=NOW)
    store.append_messages(
        session.id,
        [draft(CANARIES["content"], metadata={"m": CANARIES["metadata"]})],
        now=NOW,
    )
    return str(session.id)


def test_the_full_text_index_holds_no_plaintext_even_when_brought_up_to_date(
    tmp_path: Path,
) -> None:
    """Search through the encrypting store is refused; the backend's own index, forced to catch
    up underneath it, indexes ciphertext only."""
    from turnkeeper.storage.search import SearchFilter, parse_query

    store = open_store(_sqlite_url(tmp_path), load_settings(encryption_key=KEY, lru_size=0))
    _write_canaries(store)
    with pytest.raises(Unsupported, match="encryption_key"):
        store.search_messages(parse_query("canary"), SearchFilter(project=None), limit=5)
    hits = store.inner.search_messages(
        parse_query(CANARIES["content"]), SearchFilter(project=None), limit=5
    )
    assert hits == []
    store.close()
    assert CANARIES["content"].encode() not in _sqlite_files(tmp_path / "enc.db")


def test_the_postgres_tsvector_holds_no_plaintext(postgres_url: str, tmp_path: Path) -> None:
    settings = load_settings(encryption_key=KEY, key_store=_sqlite_url(tmp_path, "keys.db"))
    store = open_store(postgres_url, settings)
    _write_canaries(store)
    store.close()
    import psycopg

    with psycopg.connect(postgres_url) as conn:
        vectors = conn.execute("SELECT search_vector::text, content FROM messages").fetchall()
    assert vectors and all(content.startswith("tkenc1:") for _, content in vectors)
    assert not any("canary" in vector.lower() for vector, _ in vectors)


# -- crypto-shredding ---------------------------------------------------------------------------


def _checkpointed(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def test_a_copy_taken_before_a_delete_cannot_yield_the_deleted_session(tmp_path: Path) -> None:
    live = tmp_path / "live"
    live.mkdir()
    url = _sqlite_url(live, "data.db")
    with turnkeeper.open(url, encryption_key=KEY) as tk:
        gone, _ = tk.get_or_create_session("gone")
        kept, _ = tk.get_or_create_session("kept")
        tk.append(gone, "user", "the deleted one said CANARY-shredded")
        tk.append(kept, "user", "the kept one said hello")
    _checkpointed(live / "data.db")
    backup = tmp_path / "backup"
    backup.mkdir()
    shutil.copy(live / "data.db", backup / "data.db")  # the data only, as a backup takes it
    wrapped = sqlite3.connect(live / "data.db.keys").execute(
        "SELECT wrapped FROM session_keys WHERE session_id = ?", (gone.id,)
    )
    gone_key = wrapped.fetchone()[0]
    with turnkeeper.open(url, encryption_key=KEY) as tk:
        tk.delete_session(gone)
    assert gone_key.encode() not in (live / "data.db.keys").read_bytes()  # secure_delete

    # The backup, opened with the current key store: the deleted session's rows are there,
    # and cannot be read; the other session reads.
    copy_url = _sqlite_url(backup, "data.db")
    with turnkeeper.open(
        copy_url, encryption_key=KEY, key_store=_sqlite_url(live, "data.db.keys")
    ) as tk:
        assert [m.content for m in tk.history(kept.id)] == ["the kept one said hello"]
        with pytest.raises(KeyUnavailable, match="deleted"):
            tk.history(gone.id)
    raw = (backup / "data.db").read_bytes()
    assert b"CANARY-shredded" not in raw and gone.id.encode() in raw


def test_a_branch_keeps_reading_after_its_source_is_deleted(tmp_path: Path) -> None:
    with turnkeeper.open(_sqlite_url(tmp_path), encryption_key=KEY) as tk:
        source, _ = tk.get_or_create_session("source")
        tk.append(source, "user", "before the fork")
        branch = tk.fork(source, at_seq=1)
        tk.append(branch, "user", "after the fork")
        tk.delete_session(source)
        assert [m.content for m in tk.history(branch)] == ["before the fork", "after the fork"]


def test_a_session_written_before_encryption_was_turned_on_takes_sealed_messages(
    tmp_path: Path,
) -> None:
    """No key, and clear messages: not a shredded session (whose appends are refused,
    `KeyDestroyed`), so its first sealed write makes its key."""
    url = _sqlite_url(tmp_path)
    with turnkeeper.open(url) as tk:
        tk.append(tk.create_session(key="early"), "user", "said in the clear")
    with turnkeeper.open(url, encryption_key=KEY) as tk:
        tk.append("early", "user", "CANARY-said-sealed")
        assert [m.content for m in tk.history("early")] == [
            "said in the clear",
            "CANARY-said-sealed",
        ]
    _checkpointed(tmp_path / "enc.db")
    assert b"CANARY-said-sealed" not in _sqlite_files(tmp_path / "enc.db")


def test_expiry_deletes_the_keys_of_the_sessions_it_deletes(tmp_path: Path) -> None:
    from datetime import timedelta

    store = open_store(_sqlite_url(tmp_path), load_settings(encryption_key=KEY))
    session_id = _write_canaries(store)
    store.set_status(session_id, turnkeeper.SessionStatus.EXPIRED, now=NOW)
    report = store.expire_sessions(now=NOW + timedelta(days=1), delete=True)
    assert report.deleted == (session_id,)
    assert store.keys.store.find(session_id) is None
    store.close()


# -- bad input: one clear error ------------------------------------------------------------------


def test_a_database_with_encrypted_sessions_does_not_open_without_its_key(tmp_path: Path) -> None:
    url = _sqlite_url(tmp_path)
    with turnkeeper.open(url, encryption_key=KEY) as tk:
        tk.append(tk.create_session(key="s"), "user", "secret")
    with pytest.raises(InvalidConfig, match=r"encryption_key.*encrypted at rest"):
        turnkeeper.open(url)
    with pytest.raises(InvalidConfig, match="key_store is set but no encryption_key"):
        turnkeeper.open(url, key_store=_sqlite_url(tmp_path, "enc.db.keys"))


def test_a_wrong_key_is_refused_at_open(tmp_path: Path) -> None:
    url = _sqlite_url(tmp_path)
    turnkeeper.open(url, encryption_key=KEY).close()
    with pytest.raises(InvalidConfig, match="'k1' is not the key of that id"):
        turnkeeper.open(url, encryption_key=generate_master_key("k1"))
    with pytest.raises(InvalidConfig, match=r"none of the master keys .* \(k1\)"):
        turnkeeper.open(url, encryption_key=generate_master_key("k9"))


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("k1", "must be id:base64key"),
        ("k1:not base64!", "'k1' is not base64"),
        ("k1:AAAA", "'k1' is 3 bytes; a key is 32 bytes"),
        (f"{FIXED_KEY},{FIXED_KEY}", "'k1' is given twice"),
        ("", "must be id:base64key"),
    ],
)
def test_a_malformed_key_names_the_setting(tmp_path: Path, value: str, says: str) -> None:
    with pytest.raises(InvalidConfig) as raised:
        turnkeeper.open(_sqlite_url(tmp_path), encryption_key=value)
    assert raised.value.field == "encryption_key" and says in str(raised.value)
    assert KEY.split(":")[1] not in str(raised.value)


def test_the_key_file_and_its_errors(tmp_path: Path) -> None:
    key_file = tmp_path / "master.key"
    key_file.write_text(KEY + "\n")
    with turnkeeper.open(_sqlite_url(tmp_path), encryption_key_file=key_file) as tk:
        assert isinstance(tk.store, EncryptedStore)
    with pytest.raises(InvalidConfig, match="not both"):
        turnkeeper.open(_sqlite_url(tmp_path), encryption_key=KEY, encryption_key_file=key_file)
    with pytest.raises(InvalidConfig, match="encryption_key_file"):
        turnkeeper.open(_sqlite_url(tmp_path), encryption_key_file=tmp_path / "missing")


def test_a_postgres_database_needs_a_key_store_named(postgres_url: str) -> None:
    with pytest.raises(InvalidConfig) as raised:
        open_store(postgres_url, load_settings(encryption_key=KEY))
    assert raised.value.field == "key_store"


def test_rotation_reads_old_sessions_until_rewrapped(tmp_path: Path) -> None:
    from turnkeeper.encryption.keys import parse_master_keys
    from turnkeeper.encryption.keystore import open_key_store, rewrap

    url = _sqlite_url(tmp_path)
    new_key = generate_master_key("k2")
    with turnkeeper.open(url, encryption_key=KEY) as tk:
        old, _ = tk.get_or_create_session("old")
        tk.append(old, "user", "under k1")
    with turnkeeper.open(url, encryption_key=f"{new_key},{KEY}") as tk:
        young, _ = tk.get_or_create_session("young")
        tk.append(young, "user", "under k2")
        assert [m.content for m in tk.history(old)] == ["under k1"]
    with turnkeeper.open(url, encryption_key=new_key) as tk:  # k1 dropped too early
        assert [m.content for m in tk.history(young)] == ["under k2"]
        with pytest.raises(KeyUnavailable, match="master key 'k1'"):
            tk.history(old)
    key_store = open_key_store(None, url)
    assert rewrap(parse_master_keys(f"{new_key},{KEY}"), key_store) == 1
    key_store.close()
    with turnkeeper.open(url, encryption_key=new_key) as tk:
        assert [m.content for m in tk.history(old)] == ["under k1"]


def test_a_key_store_in_postgresql(postgres_url: str) -> None:
    with blank_schema(POSTGRES_URL) as keys_url:
        settings = load_settings(encryption_key=KEY, key_store=keys_url)
        store = open_store(postgres_url, settings)
        session_id = _write_canaries(store)
        assert store.read_messages(session_id)[0].content == CANARIES["content"]
        store.delete_session(session_id)
        assert store.keys.store.find(session_id) is None
        store.close()


# -- through the HTTP service --------------------------------------------------------------------


def test_the_http_service_encrypts_and_refuses_search(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from turnkeeper.server.app import create_app

    settings = load_settings(
        database_url=_sqlite_url(tmp_path), encryption_key=KEY, auth=False, lru_size=100
    )
    with TestClient(create_app(settings, sweep=False), base_url="http://127.0.0.1") as client:
        client.post("/v1/sessions", json={"key": "web"}).raise_for_status()
        sent = {"role": "user", "content": CANARIES["content"], "metadata": {"m": "CANARY-web"}}
        client.post("/v1/sessions/web/messages", json=sent).raise_for_status()
        listed = client.get("/v1/sessions/web/messages").json()
        refused = client.get("/v1/search", params={"q": "canary"})
    assert CANARIES["content"] in str(listed) and "CANARY-web" in str(listed)
    assert refused.status_code == 501 and "encryption_key" in refused.text
    stored = _sqlite_files(tmp_path / "enc.db")
    assert CANARIES["content"].encode() not in stored and b"CANARY-web" not in stored


def test_sealing_keeps_every_other_field_of_a_draft_and_a_message() -> None:
    """`seal_draft` and `open_message` build their values field by field: a field added to
    `MessageDraft` or `Message` and not carried over fails here."""
    import dataclasses

    from turnkeeper.encryption.keys import DataKey, parse_master_keys
    from turnkeeper.encryption.keystore import MemoryKeyStore
    from turnkeeper.encryption.store import SessionKeys, open_message, seal_draft
    from turnkeeper.types import Message, Role, Usage

    keys = SessionKeys(parse_master_keys(KEY), MemoryKeyStore())
    key: DataKey = keys.for_write("s-1")
    full = draft(
        "words",
        role=Role.ASSISTANT,
        author="bot",
        internal=True,
        usage=Usage(1, 2, 3, 4),
        tool_calls=({"id": "c", "function": {"name": "f", "arguments": "{}"}},),
        tool_call_id="t",
        metadata={"a": [1, 2]},
        trace='{"t": 1}',
    )
    unset = [name for name, value in vars_of(full).items() if value in (None, False, {})]
    assert unset == [], "set every field, so that each one is checked"
    sealed = seal_draft(key, full)
    clear = {"content", "metadata", "tool_calls", "trace"}
    for field in dataclasses.fields(full):
        same = getattr(sealed, field.name) == getattr(full, field.name)
        assert same is (field.name not in clear), field.name
    stored = Message(
        session_id="s-1",
        seq=1,
        **{
            f.name: getattr(sealed, f.name) for f in dataclasses.fields(sealed) if f.name != "trace"
        },
    )
    fresh = SessionKeys(keys.master, keys.store)  # nothing remembered: decrypts for real
    opened = open_message(fresh, stored)
    for field in dataclasses.fields(opened):
        expected = getattr(full, field.name, getattr(stored, field.name))
        assert getattr(opened, field.name) == expected, field.name


def test_a_writer_racing_the_first_sealed_append_takes_its_key_not_a_destroyed_one() -> None:
    """Two writers append to a new session at once: one finds no key, and by the time it looks
    at the messages the other has stored its key and sealed a message with it. That is the
    other writer's key, not a destroyed one (this raised `KeyDestroyed` under a loaded
    suite's concurrent appenders)."""
    from turnkeeper.encryption.keys import parse_master_keys
    from turnkeeper.encryption.keystore import MemoryKeyStore
    from turnkeeper.encryption.store import SessionKeys

    store = MemoryKeyStore()
    slow = SessionKeys(parse_master_keys(KEY), store)
    fast = SessionKeys(slow.master, store)  # another process over the same key store

    def sealed_meanwhile(session_id: str) -> bool:
        fast.for_write(session_id)  # the other writer stores its key, then seals with it
        return True

    assert slow.for_write("s-1", sealed_meanwhile).material == fast.for_write("s-1").material
    destroyed = SessionKeys(slow.master, MemoryKeyStore())  # no key, and none coming
    with pytest.raises(KeyDestroyed):
        destroyed.for_write("s-2", lambda session_id: True)


def vars_of(value: Any) -> dict[str, Any]:
    import dataclasses

    return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}


def test_a_postgres_dump_taken_before_a_delete_cannot_yield_the_deleted_session(
    postgres_url: str, tmp_path: Path
) -> None:
    """The same on PostgreSQL: a `pg_dump` of the schema taken before the delete, restored into
    a schema of its own, opened with the current key store."""
    import psycopg

    settings = load_settings(encryption_key=KEY, key_store=_sqlite_url(tmp_path, "keys.db"))
    store = open_store(postgres_url, settings)
    gone = _write_canaries(store, key="gone")
    kept = _write_canaries(store, key="kept")
    schema = re.search(r"tk_[0-9a-f]{16}", postgres_url)
    assert schema is not None
    dump = subprocess.run(
        ["pg_dump", "--no-owner", f"--schema={schema.group()}", POSTGRES_URL],
        capture_output=True,
        check=True,
        text=True,
    ).stdout
    store.delete_session(gone)
    store.close()
    with blank_schema(POSTGRES_URL) as copy_url:
        copy = re.search(r"tk_[0-9a-f]{16}", copy_url)
        assert copy is not None
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {copy.group()}")  # the dump makes it
        subprocess.run(
            ["psql", "-q", "-v", "ON_ERROR_STOP=1", POSTGRES_URL],
            input=dump.replace(schema.group(), copy.group()),
            capture_output=True,
            check=True,
            text=True,
        )
        restored = open_store(copy_url, settings)
        try:
            assert restored.read_messages(kept)[0].content == CANARIES["content"]
            with pytest.raises(KeyUnavailable, match="deleted"):
                restored.read_messages(gone)
        finally:
            restored.close()


def test_the_cli_generates_a_key_and_rewraps(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from turnkeeper.cli import app
    from turnkeeper.encryption.keys import parse_master_keys

    made = CliRunner().invoke(app, ["encryption", "generate-key", "--id", "k2", "--json"])
    assert made.exit_code == 0, made.output
    new_key = json.loads(made.stdout)["encryption_key"]
    assert parse_master_keys(new_key).current == "k2"
    url = _sqlite_url(tmp_path)
    with turnkeeper.open(url, encryption_key=KEY) as tk:
        tk.append(tk.create_session(key="s"), "user", "kept through a rotation")
    env = {"TURNKEEPER_ENCRYPTION_KEY": f"{new_key},{KEY}"}
    done = CliRunner(env=env).invoke(app, ["encryption", "rewrap", "--db", url, "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout) == {"rewrapped": 1, "master_key_id": "k2"}
    with turnkeeper.open(url, encryption_key=new_key) as tk:
        assert [m.content for m in tk.history("s")] == ["kept through a rotation"]
    bad = CliRunner().invoke(app, ["encryption", "generate-key", "--id", "a b"])
    assert bad.exit_code == 1 and "encryption_key" in bad.output


def test_the_relevant_strategy_is_refused_naming_the_setting(tmp_path: Path) -> None:
    with turnkeeper.open(_sqlite_url(tmp_path), encryption_key=KEY) as tk:
        session = tk.create_session(key="s")
        for turn in range(40):
            tk.append(session, "user", f"Turn {turn}: tell me more about the trip to Lisbon.")
            tk.append(session, "assistant", f"Answer {turn}: the hotel is near the river.")
        tk.append(session, "user", "Where did we book the hotel in Lisbon?")
        with pytest.raises(Unsupported, match=r"relevant strategy.*encryption_key"):
            tk.context(session, strategy="relevant", budget_tokens=300)
        assert tk.context(session, strategy="sliding_window", budget_tokens=300).messages
