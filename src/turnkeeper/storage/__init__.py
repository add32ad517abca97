"""Storage backends behind one contract (`Store`), chosen by database URL through one table of
URL schemes (`BACKENDS`).

The contract and its optional capabilities are in `turnkeeper.storage.base` (`Store`,
`FullStore` and `require` are here too). Only bare backends are made here; the caches in front
of one are put there by `turnkeeper.assemble` (storage is the layer below the caches and never
imports them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from turnkeeper.config import Settings, default_database_url, demo_database_url
from turnkeeper.errors import InvalidConfig
from turnkeeper.storage.base import FullStore, Store, require
from turnkeeper.storage.memory import InMemoryStore

__all__ = [
    "BACKENDS",
    "Backend",
    "FullStore",
    "InMemoryStore",
    "Store",
    "backend_for",
    "open_backend",
    "require",
]


@dataclass(frozen=True)
class Backend:
    """What one URL scheme names: how to open its store, and how many threads may use it at
    once (the async face gives it that many workers)."""

    open: Callable[[str, Settings], Store]
    threads: Callable[[Settings], int]


def _open_sqlite(url: str, settings: Settings) -> Store:
    from turnkeeper.storage.sql.sqlite import SQLiteStore, path_from_url

    # The embedded default (and the demo's own file beside it) live in the user's data
    # directory, made on first use; any other path is the user's own, and a missing directory
    # there is a typo to report. (Asked only when the directory is missing: the default paths
    # cost more to work out than the rest of an open's Python.)
    missing = not path_from_url(url).parent.is_dir()
    return SQLiteStore(
        url,
        synchronous=settings.sqlite_synchronous,
        writer_lock_file=settings.sqlite_writer_lock_file,
        create_directory=missing and url in (default_database_url(), demo_database_url()),
        search_timeout=settings.search_timeout.total_seconds(),
    )


def _open_postgres(url: str, settings: Settings) -> Store:
    from turnkeeper.storage.sql.postgres import PostgresStore

    return PostgresStore(
        url,
        max_size=settings.postgres_pool_size,
        connect_timeout=settings.postgres_connect_timeout.total_seconds(),
        pool_timeout=settings.postgres_acquire_timeout.total_seconds(),
        statement_timeout=settings.postgres_statement_timeout.total_seconds(),
        socket_timeout=settings.postgres_socket_timeout.total_seconds(),
        search_timeout=settings.search_timeout.total_seconds(),
    )


def _one_thread(settings: Settings) -> int:
    """SQLite admits one writer at a time, and the in-memory store is one process's dict."""
    return 1


def _pooled(settings: Settings) -> int:
    """One thread per pooled connection."""
    return settings.postgres_pool_size


_POSTGRES = Backend(_open_postgres, _pooled)

BACKENDS: dict[str, Backend] = {
    "sqlite": Backend(_open_sqlite, _one_thread),
    "postgresql": _POSTGRES,
    "postgres": _POSTGRES,
    "memory": Backend(lambda url, settings: InMemoryStore(url), _one_thread),
}
"""Every URL scheme a database URL may have, and its backend. A URL without a scheme is a
SQLite file's path. The drivers are imported when a store is opened, so PostgreSQL's is needed
only by those who use it."""


def backend_for(url: str) -> Backend:
    """The backend a database URL names: `sqlite:///path` (or a bare file path),
    `postgresql://user@host:port/db` (`postgres://` too), or `memory://` (an `InMemoryStore`:
    nothing is kept after the process ends); `InvalidConfig` naming `database_url` for any
    other scheme."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else "sqlite"
    backend = BACKENDS.get(scheme)
    if backend is None:
        raise InvalidConfig(
            "database_url",
            f"unsupported scheme {scheme!r}; use sqlite:///path/to/file.db,"
            " postgresql://user@host/db or memory://",
        )
    return backend


def open_backend(url: str, settings: Settings) -> Store:
    """The bare backend a URL names (see `backend_for`), opened with `settings`."""
    return backend_for(url).open(url, settings)
