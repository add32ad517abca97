"""Storage backends behind one contract (`Store`), chosen by database URL.

Only bare backends are made here; the caches in front of one are put there by
`turnkeeper.assemble` (storage is the layer below the caches and never imports them).
"""

from __future__ import annotations

from turnkeeper.config import Settings, default_database_url, demo_database_url
from turnkeeper.errors import InvalidConfig
from turnkeeper.storage.base import (
    AdminStore,
    AgentStateStore,
    ApiKeyStore,
    ForkStore,
    FullStore,
    LockingStore,
    SeqRunStore,
    SessionLookupStore,
    Store,
    SummaryStore,
    TraceStore,
    TransferStore,
    TurnAttemptStore,
    require,
)
from turnkeeper.storage.memory import InMemoryStore

__all__ = [
    "AdminStore",
    "AgentStateStore",
    "ApiKeyStore",
    "ForkStore",
    "FullStore",
    "InMemoryStore",
    "LockingStore",
    "SeqRunStore",
    "SessionLookupStore",
    "Store",
    "SummaryStore",
    "TraceStore",
    "TransferStore",
    "TurnAttemptStore",
    "open_backend",
    "require",
]

POSTGRES_SCHEMES = ("postgresql", "postgres")


def open_backend(url: str, settings: Settings) -> Store:
    """The bare backend a URL names: `sqlite:///path` (or a bare file path), or
    `postgresql://user@host:port/db` (`postgres://` too), or `memory://` (an `InMemoryStore`:
    nothing is kept after the process ends). Imported lazily, so the PostgreSQL driver is
    needed only by those who use it."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else "sqlite"
    if scheme == "sqlite":
        from turnkeeper.storage.sqlite import SQLiteStore, path_from_url

        # The embedded default (and the demo's own file beside it) live in the user's data
        # directory, made on first use; any other path is the user's own, and a missing
        # directory there is a typo to report. (Asked only when the directory is missing:
        # the default paths cost more to work out than the rest of an open's Python.)
        missing = not path_from_url(url).parent.is_dir()
        return SQLiteStore(
            url,
            synchronous=settings.sqlite_synchronous,
            writer_lock_file=settings.sqlite_writer_lock_file,
            create_directory=missing and url in (default_database_url(), demo_database_url()),
            search_timeout=settings.search_timeout.total_seconds(),
        )
    if scheme == "memory":
        return InMemoryStore(url)
    if scheme in POSTGRES_SCHEMES:
        from turnkeeper.storage.postgres import PostgresStore

        return PostgresStore(
            url,
            max_size=settings.postgres_pool_size,
            connect_timeout=settings.postgres_connect_timeout.total_seconds(),
            pool_timeout=settings.postgres_acquire_timeout.total_seconds(),
            statement_timeout=settings.postgres_statement_timeout.total_seconds(),
            socket_timeout=settings.postgres_socket_timeout.total_seconds(),
            search_timeout=settings.search_timeout.total_seconds(),
        )
    raise InvalidConfig(
        "database_url",
        f"unsupported scheme {scheme!r}; use sqlite:///path/to/file.db,"
        " postgresql://user@host/db or memory://",
    )
