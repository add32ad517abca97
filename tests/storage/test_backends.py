"""One table of URL schemes (`turnkeeper.storage.BACKENDS`): each scheme opens the store it
names, with as many threads as that store lets work at once; any other scheme is a clear error
naming `database_url`."""

from __future__ import annotations

from pathlib import Path

import pytest

from turnkeeper.config import load_settings
from turnkeeper.errors import InvalidConfig
from turnkeeper.storage import BACKENDS, InMemoryStore, backend_for, open_backend
from turnkeeper.storage.sql.postgres import PostgresStore
from turnkeeper.storage.sql.sqlite import SQLiteStore


def test_the_table_names_every_scheme_a_database_url_may_have() -> None:
    assert sorted(BACKENDS) == ["memory", "postgres", "postgresql", "sqlite"]
    assert BACKENDS["postgres"] is BACKENDS["postgresql"]


def test_a_sqlite_url_and_a_bare_path_open_a_sqlite_file_used_by_one_thread(
    tmp_path: Path,
) -> None:
    settings = load_settings(postgres_pool_size=5)
    for url in (f"sqlite:///{tmp_path / 'a.db'}", str(tmp_path / "b.db")):
        store = open_backend(url, settings)
        try:
            assert isinstance(store, SQLiteStore)
            assert store.path.parent == tmp_path
        finally:
            store.close()
        assert backend_for(url).threads(settings) == 1


def test_memory_opens_the_in_memory_store_used_by_one_thread() -> None:
    settings = load_settings(postgres_pool_size=5)
    assert isinstance(open_backend("memory://", settings), InMemoryStore)
    assert backend_for("MEMORY://").threads(settings) == 1


def test_both_postgres_schemes_open_a_pool_used_by_one_thread_per_connection(
    postgres_url: str,
) -> None:
    settings = load_settings(postgres_pool_size=3)
    for url in (postgres_url, postgres_url.replace("postgresql://", "postgres://", 1)):
        store = open_backend(url, settings)
        try:
            assert isinstance(store, PostgresStore)
        finally:
            store.close()
        assert backend_for(url).threads(settings) == 3


def test_any_other_scheme_is_invalid_config_naming_the_database_url() -> None:
    with pytest.raises(InvalidConfig, match="database_url") as raised:
        backend_for("mysql://db/app")
    assert "unsupported scheme 'mysql'" in str(raised.value)
    assert "memory://" in str(raised.value)
