"""Putting the parts together, at the edge: a backend, the caches in front of it, the service.

The layers below never assemble themselves: storage knows nothing of caches, caches nothing of
where their settings come from. `turnkeeper.open()` (and `turnkeeper serve`, and the CLI) come
here, the one module that knows which parts a configuration asks for.
"""

from __future__ import annotations

from typing import Any

from turnkeeper import telemetry
from turnkeeper.cache.store import cached
from turnkeeper.config import Settings, load_settings
from turnkeeper.encryption import encrypted_at_rest
from turnkeeper.service import Turnkeeper
from turnkeeper.storage import open_backend
from turnkeeper.storage.base import Store

__all__ = ["open_service", "open_store", "settings_for"]


def open_store(url: str, settings: Settings) -> Store:
    """The backend a URL names, behind the configured caches (`lru_size` sessions in process,
    and Redis when `redis_url` is set). The caches implement the same contract, including the
    backend's `exclusive_lock`. When something is traced, each call of the backend is a span
    (`turnkeeper.telemetry`). With `encryption_key`, user content is encrypted in front of
    all of them (`turnkeeper.encryption`)."""
    store = telemetry.traced_store(open_backend(url, settings))
    try:
        if settings.lru_size or settings.redis_url is not None:
            store = cached(store, settings)
        # Outermost, so the caches (in process and in Redis) hold only what the backend does.
        return encrypted_at_rest(store, url, settings)
    except BaseException:
        store.close()
        raise


def settings_for(url: str | None, settings: Settings | None, overrides: dict[str, Any]) -> Settings:
    """The settings `turnkeeper.open(url, settings=…, **overrides)` means."""
    if settings is None:
        return load_settings(database_url=url, **overrides)
    if url is not None or overrides:
        return settings.model_copy(
            update={"database_url": url or settings.database_url, **overrides}
        )
    return settings


def open_service(
    url: str | None = None, *, settings: Settings | None = None, **overrides: Any
) -> Turnkeeper:
    """The service on the store the settings name (what `turnkeeper.open()` returns)."""
    settings = settings_for(url, settings, overrides)
    return Turnkeeper(open_store(settings.database_url, settings), settings)
