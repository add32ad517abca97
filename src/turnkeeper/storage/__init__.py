"""Storage backends behind one contract (`Store`), chosen by database URL."""

from __future__ import annotations

from turnkeeper.config import Settings
from turnkeeper.errors import InvalidConfig
from turnkeeper.storage.base import Store

__all__ = ["Store", "open_store"]


def open_store(url: str, settings: Settings) -> Store:
    """Open the backend a URL names: `sqlite:///path` (or a bare file path)."""
    scheme = url.split("://", 1)[0] if "://" in url else "sqlite"
    if scheme == "sqlite":
        from turnkeeper.storage.sqlite import SQLiteStore

        return SQLiteStore(url, synchronous=settings.sqlite_synchronous)
    raise InvalidConfig(
        "database_url", f"unsupported scheme {scheme!r}; use sqlite:///path/to/file.db"
    )
