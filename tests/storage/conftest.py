"""The service-level contract suites here run on every backend, `memory://` included, and on
both faces: `tk` is the sync `Turnkeeper`, or
an `AsyncTurnkeeper` over the same store driven through `tests.faces.Blocking` (its coroutines
awaited on an event loop of their own), so every behaviour is proven for both without a copy of
any test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Clock, open_test_store
from tests.faces import Blocking, running_loop
from turnkeeper.config import Settings
from turnkeeper.service import Turnkeeper
from turnkeeper.service.aio import AsyncTurnkeeper, Workers
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
    # As `open_async` sizes them: a dedicated thread for SQLite, a few for PostgreSQL's pool.
    workers = Workers(1 if backend in ("sqlite", "memory") else 4)
    with running_loop() as loop:
        yield Blocking(AsyncTurnkeeper(sync, workers), loop)
    workers.shutdown()
