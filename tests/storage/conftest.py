"""The service-level contract suites here run on every backend, `memory://` included, and on
both faces: `tk` is the sync `Turnkeeper`, or
an `AsyncTurnkeeper` over the same store driven through `tests.faces.Blocking` (its coroutines
awaited on an event loop of their own), so every behaviour is proven for both without a copy of
any test. On PostgreSQL (cached or not) the async face is the native one: its runner is the
greenlet `Bridge`, and the fixture checks that the store's statements went through the loop's
async pool (tests/test_async_native.py shows the same for the Redis cache's client)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Clock, open_test_store
from tests.faces import Blocking, running_loop
from turnkeeper.config import Settings
from turnkeeper.service import Turnkeeper
from turnkeeper.service.aio import AsyncTurnkeeper, Bridge, Workers
from turnkeeper.storage.base import Store


@pytest.fixture(params=["memory", "sqlite", "postgres", "postgres+redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A fresh, empty store of each backend."""
    backend = open_test_store(request.param, request, tmp_path)
    yield backend
    backend.close()


@pytest.fixture(params=["sync", "async"])
def tk(
    request: pytest.FixtureRequest, store: Store, settings: Settings, clock: Clock
) -> Iterator[Any]:
    """The service over each backend, with a hand-moved clock, through each face."""
    sync = Turnkeeper(store, settings, clock=clock)
    if request.param == "sync":
        yield sync
        return
    backend = request.node.callspec.params["store"]
    # As `open_async` chooses: a dedicated thread for SQLite, native drivers for PostgreSQL.
    face = AsyncTurnkeeper(sync, Workers(1) if backend in ("sqlite", "memory") else None)
    assert isinstance(face._workers, Bridge) == backend.startswith("postgres")
    with running_loop() as loop:
        yield Blocking(face, loop)
        if backend.startswith("postgres"):
            _assert_native(store, loop)
            # The loop's async pool belongs to it: close the store there (a second close,
            # by the `store` fixture, is a no-op).
            asyncio.run_coroutine_threadsafe(face.close(), loop).result()
    face._workers.shutdown()


def _assert_native(store: Any, loop: Any) -> None:
    """The store's I/O ran on `loop`'s async pool, if the test reached it through the face."""
    opening = store._async_pools.get(loop)
    if opening is not None:
        assert opening.result().get_stats().get("requests_num", 0) > 0
