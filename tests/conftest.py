"""Shared fixtures: real stores on real files and servers, a controllable clock, a Turnkeeper.

`store` is parametrized over every backend (a SQLite file; PostgreSQL in an empty schema only
this test uses, from a pool of migrated ones, `tests/postgres_schemas.py`; PostgreSQL behind the
LRU and Redis caches), so each test using it is part of the one contract suite every backend
must pass.

PostgreSQL and Redis are the real servers on 127.0.0.1 (`TURNKEEPER_TEST_POSTGRES_URL`,
`TURNKEEPER_TEST_REDIS_URL` override). Without them their tests are skipped with a one-line
reason, except with `CI=true`, where a missing server fails the run.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.postgres_schemas import MigratedSchemas, blank_schema
from turnkeeper.assemble import open_store
from turnkeeper.config import Settings, load_settings
from turnkeeper.service import Turnkeeper
from turnkeeper.storage.base import Store
from turnkeeper.storage.sql.sqlite import SQLiteStore

# Never read the developer's own config file during tests.
os.environ["TURNKEEPER_CONFIG"] = os.devnull


def share_default_tls_context() -> None:
    """One TLS context for every httpx client built with the default verification, in this
    test process: httpx reads the CA bundle anew for each client (0.1 s, more on a loaded
    machine), and the tests build thousands of them (each service's model client, each
    `openai.OpenAI`, each `httpx.get`) to speak plain HTTP on loopback. A context asked for
    with anything else (another CA, `verify=False`, a client certificate, `SSL_CERT_FILE`
    changed) is built as before."""
    import httpx._transports.default as transports

    build = transports.create_ssl_context
    built: dict[tuple[bool, str | None, str | None], ssl.SSLContext] = {}

    def create_ssl_context(
        verify: ssl.SSLContext | str | bool = True, cert: Any = None, trust_env: bool = True
    ) -> ssl.SSLContext:
        if verify is not True or cert is not None:
            return build(verify=verify, cert=cert, trust_env=trust_env)
        key = (trust_env, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
        if key not in built:
            built[key] = build(verify=verify, cert=cert, trust_env=trust_env)
        return built[key]

    transports.create_ssl_context = create_ssl_context  # type: ignore[assignment]


share_default_tls_context()


T = TypeVar("T")


def run_async(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run `coroutine` on its own event loop in a fresh thread. Not `asyncio.run` here: the
    browser tests' Playwright keeps an event loop running on the main thread for the rest of
    the session, and `asyncio.run` refuses to start inside a running loop."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


class Clock:
    """A clock tests move by hand."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        self.now += delta


@pytest.fixture
def clock() -> Clock:
    return Clock()


def make_sqlite_store(path: Path) -> SQLiteStore:
    return SQLiteStore(f"sqlite:///{path}", synchronous="NORMAL")


POSTGRES_URL = os.environ.get(
    "TURNKEEPER_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("TURNKEEPER_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def server_missing(what: str, problem: object) -> None:
    """Skip (one line saying why) — or, in CI, fail: there the servers must be up."""
    line = str(problem).strip().splitlines()[0] if str(problem).strip() else "no answer"
    if in_ci():
        pytest.fail(f"{what} is required when CI=true: {line}", pytrace=False)
    pytest.skip(f"{what} not reachable ({line}); `make test` starts it")


@pytest.fixture(scope="session")
def postgres_server() -> str:
    """The URL of the real PostgreSQL server, once it has answered."""
    try:
        import psycopg

        with psycopg.connect(POSTGRES_URL, connect_timeout=3, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        server_missing(f"PostgreSQL at {POSTGRES_URL}", exc)
    return POSTGRES_URL


@pytest.fixture(scope="session")
def redis_server() -> str:
    """The URL of the real Redis server, once it has answered."""
    try:
        import redis

        client = redis.Redis.from_url(REDIS_URL, socket_timeout=3, socket_connect_timeout=3)
        client.ping()
        client.close()
    except Exception as exc:
        server_missing(f"Redis at {REDIS_URL}", exc)
    return REDIS_URL


@pytest.fixture(scope="session")
def migrated_schemas(postgres_server: str) -> Iterator[MigratedSchemas]:
    """This test process's pool of empty, migrated schemas (`tests/postgres_schemas.py`)."""
    pool = MigratedSchemas(postgres_server)
    yield pool
    pool.close()


@pytest.fixture
def postgres_url(migrated_schemas: MigratedSchemas) -> Iterator[str]:
    """A PostgreSQL URL on an empty, migrated schema that only this test uses (one of the
    pool's: emptied and reused after the test)."""
    with migrated_schemas.lease() as url:
        yield url


@pytest.fixture
def blank_postgres_url(postgres_server: str) -> Iterator[str]:
    """A PostgreSQL URL on a blank schema of this test's own (no migration run yet), for tests
    of migrations and of a first open."""
    with blank_schema(postgres_server) as url:
        yield url


def open_test_store(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    """A fresh, empty store of `backend` (`memory`, `sqlite`, `postgres`, `postgres+redis`)."""
    if backend == "memory":
        from turnkeeper.storage import InMemoryStore

        return InMemoryStore()
    if backend == "sqlite":
        return make_sqlite_store(tmp_path / "contract.db")
    from turnkeeper.storage.sql.postgres import PostgresStore

    url = request.getfixturevalue("postgres_url")
    store: Store = PostgresStore(url, min_size=1, max_size=4)
    if backend == "postgres+redis":
        from turnkeeper.cache import CachedStore, SessionLRU
        from turnkeeper.cache.redis_cache import RedisCache

        redis_url = request.getfixturevalue("redis_server")
        store = CachedStore(store, lru=SessionLRU(100), redis=RedisCache(redis_url))
    return store


@pytest.fixture(params=["sqlite", "postgres", "postgres+redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A fresh, empty store of each backend."""
    backend = open_test_store(request.param, request, tmp_path)
    yield backend
    backend.close()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(
        database_url=f"sqlite:///{tmp_path / 'tk.db'}", sqlite_synchronous="NORMAL"
    )


@pytest.fixture
def tk(store: Store, settings: Settings, clock: Clock) -> Turnkeeper:
    """The service over each backend, with a hand-moved clock."""
    return Turnkeeper(store, settings, clock=clock)


@contextmanager
def service_over(settings: Settings, clock: Clock) -> Iterator[Turnkeeper]:
    """A service on `settings`' database with the test clock, closed after the block."""
    service = Turnkeeper(open_store(settings.database_url, settings), settings, clock=clock)
    try:
        yield service
    finally:
        service.close()


SWEEP_LOCK_HOLDER = """
    import sys
    from turnkeeper.assemble import open_store
    from turnkeeper.config import load_settings

    url = sys.argv[1]
    store = open_store(url, load_settings(database_url=url))
    with store.exclusive_lock("sweep") as held:
        print("held" if held else "refused", flush=True)
        sys.stdin.readline()
    store.close()
"""
"""A process that takes the sweeper's lock on the database URL it is given, says whether it
got it, and holds it until a line arrives on its stdin."""
