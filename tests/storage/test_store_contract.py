"""`turnkeeper.testing` run directly against every store we ship, as a user runs it on theirs.

Backends: `InMemoryStore`; the same behind the in-process LRU (the cache wrapper over a store
with every capability); SQLite on a real file; PostgreSQL in a schema of its own; PostgreSQL
behind the LRU and Redis. A store with only the core (`CoreOnly`) runs the core suite, and the
cache over it proves the wrapper claims no capability its backend lacks.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import make_sqlite_store
from turnkeeper.assemble import open_store
from turnkeeper.cache import CachedStore, SessionLRU
from turnkeeper.config import load_settings
from turnkeeper.errors import SessionNotFound, Unsupported
from turnkeeper.storage import InMemoryStore, require
from turnkeeper.storage.base import (
    AdminStore,
    AgentStateStore,
    ApiKeyStore,
    ForkStore,
    FullStore,
    LockingStore,
    RetentionStore,
    Store,
    SummaryStore,
    TraceStore,
    TransferStore,
    TurnAttemptStore,
)
from turnkeeper.storage.sql.postgres import PostgresStore
from turnkeeper.storage.sql.sqlite import SQLiteStore
from turnkeeper.testing import FullStoreContract, LockingContract, StoreContract

CAPABILITIES = (
    AgentStateStore,
    SummaryStore,
    TraceStore,
    ApiKeyStore,
    AdminStore,
    TransferStore,
    LockingStore,
    ForkStore,
    TurnAttemptStore,
    RetentionStore,
)


def open_backend(name: str, request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A fresh, empty store of the backend `name`; the cached ones assembled by `open_store`,
    as a deployment's are."""
    if name == "memory":
        return InMemoryStore()
    if name == "memory+lru":
        return open_store("memory://", load_settings(lru_size=100))
    if name == "sqlite":
        return make_sqlite_store(tmp_path / "contract.db")
    url = request.getfixturevalue("postgres_url")
    if name == "postgres":
        from turnkeeper.storage.sql.postgres import PostgresStore

        return PostgresStore(url, min_size=1, max_size=4)
    redis_url = request.getfixturevalue("redis_server")
    return open_store(url, load_settings(redis_url=redis_url, lru_size=100))


def backend_class(name: str) -> type:
    """The class whose methods decide `name`'s capabilities (the cache has its backend's)."""
    if name.startswith("memory"):
        return InMemoryStore
    if name == "sqlite":
        return SQLiteStore
    from turnkeeper.storage.sql.postgres import PostgresStore

    return PostgresStore


BACKENDS = ["memory", "memory+lru", "sqlite", "postgres", "postgres+redis"]
# Locking is run where the store has it. The SQL backends do not have `exclusive_lock` yet;
# when they gain it, `issubclass` (which works on a methods-only protocol) adds them here.
LOCKING_BACKENDS = [name for name in BACKENDS if issubclass(backend_class(name), LockingStore)]


@pytest.fixture(params=BACKENDS)
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    store = open_backend(request.param, request, tmp_path)
    yield store
    store.close()


class TestEveryBackendKeepsTheWholeContract(FullStoreContract):
    @pytest.fixture
    def store(self, any_store: FullStore) -> FullStore:
        return any_store


class TestLockingBackendsKeepTheLockingContract(LockingContract):
    @pytest.fixture(params=LOCKING_BACKENDS)
    def store(self, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
        store = open_backend(request.param, request, tmp_path)
        assert isinstance(store, LockingStore)
        yield store
        store.close()


class CoreOnly:
    """A store with the core and nothing else: `InMemoryStore` seen through the core's names."""

    NAMES = frozenset(name for name in dir(Store) if not name.startswith("_")) - {"url"}

    def __init__(self, inner: InMemoryStore) -> None:
        self.url = "core-only://"
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name in CoreOnly.NAMES:
            return getattr(self._inner, name)
        raise AttributeError(name)


class TestACoreOnlyStoreKeepsTheCoreContract(StoreContract):
    @pytest.fixture(params=["bare", "cached"])
    def store(self, request: pytest.FixtureRequest) -> Store:
        core: Store = CoreOnly(InMemoryStore())  # type: ignore[assignment]
        return core if request.param == "bare" else CachedStore(core, lru=SessionLRU(10))


def test_the_bundled_stores_have_every_capability() -> None:
    for cls in (InMemoryStore, SQLiteStore, PostgresStore):
        assert [c.__name__ for c in CAPABILITIES if not issubclass(cls, c)] == [], cls
    assert isinstance(InMemoryStore(), FullStore)


def test_the_cache_has_exactly_its_backends_capabilities() -> None:
    full = open_store("memory://", load_settings(lru_size=10))
    assert isinstance(full, CachedStore) and isinstance(full.inner, InMemoryStore)
    assert all(isinstance(full, c) for c in CAPABILITIES)
    core = CachedStore(CoreOnly(InMemoryStore()), lru=SessionLRU(10))  # type: ignore[arg-type]
    assert isinstance(core, Store) and isinstance(core, CachedStore)
    assert [c.__name__ for c in CAPABILITIES if isinstance(core, c)] == []
    with pytest.raises(AttributeError):
        core.save_summary  # type: ignore[attr-defined]  # noqa: B018


def test_require_names_the_feature_and_the_missing_capability() -> None:
    store = InMemoryStore()
    assert require(store, SummaryStore, "summary checkpoints") is store
    core = CoreOnly(store)
    with pytest.raises(Unsupported) as raised:
        require(core, SummaryStore, "summary checkpoints")
    message = str(raised.value)
    assert "summary checkpoints" in message and "SummaryStore" in message
    assert "CoreOnly" in message and "core-only://" not in message


def test_unsupported_is_http_501() -> None:
    from turnkeeper.server.problems import status_for

    assert status_for(Unsupported("x")) == 501


def test_memory_urls_open_an_in_memory_store() -> None:
    import turnkeeper

    tk = turnkeeper.open("memory://")
    session = tk.create_session(key="k")
    tk.append(session, "user", "kept in memory")
    assert [m.content for m in tk.history(session)] == ["kept in memory"]
    with pytest.raises(SessionNotFound):
        turnkeeper.open("memory://").get_session("k")  # another store: nothing shared


def test_importing_the_suite_without_pytest_says_how_to_get_it() -> None:
    code = "import sys; sys.modules['pytest'] = None; import turnkeeper.testing"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 1
    assert "ImportError: turnkeeper.testing" in result.stderr
    assert "pip install pytest" in result.stderr
