"""Shared fixtures: real stores on real files, a controllable clock, a Turnkeeper over them.

`store` is parametrized over every backend, so each test using it is part of the one contract
suite every backend must pass.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from turnkeeper.config import Settings, load_settings
from turnkeeper.service import Turnkeeper
from turnkeeper.storage.base import Store
from turnkeeper.storage.sqlite import SQLiteStore

# Never read the developer's own config file during tests.
os.environ["TURNKEEPER_CONFIG"] = os.devnull


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


@pytest.fixture(params=["sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A fresh, empty store of each backend."""
    backend: Store
    if request.param == "sqlite":
        backend = make_sqlite_store(tmp_path / "contract.db")
    else:  # pragma: no cover - future backends register here
        raise AssertionError(request.param)
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
