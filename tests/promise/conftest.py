"""`turnkeeper.open()` as a user runs it, on every backend: the default configuration, cache on.

`opened` is what a new user gets: SQLite with the default in-process cache, PostgreSQL with the
same, and PostgreSQL with Redis in front, all built by `turnkeeper.open` from a URL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

import turnkeeper
from tests.postgres_schemas import MigratedSchemas
from turnkeeper.service import Turnkeeper

BACKENDS = ["sqlite", "postgres", "postgres+redis"]
EVERY_BACKEND = ["memory", *BACKENDS]
"""With `memory://` too: for tests that take `open_tk` with `indirect` parameters."""

Opener = Callable[..., AbstractContextManager[Turnkeeper]]


@pytest.fixture(params=BACKENDS)
def open_tk(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    """Opens a fresh, empty Turnkeeper on this backend each time it is entered (settings may be
    overridden by name, as with `turnkeeper.open`); on PostgreSQL, in an empty migrated schema
    only it uses (`tests/postgres_schemas.py`)."""
    backend = request.param
    servers: dict[str, str] = {}
    if backend.startswith("postgres"):
        schemas: MigratedSchemas = request.getfixturevalue("migrated_schemas")
    if backend == "postgres+redis":
        servers["redis"] = request.getfixturevalue("redis_server")
    counter = iter(range(1_000_000))

    @contextmanager
    def opener(**overrides: Any) -> Iterator[Turnkeeper]:
        with ExitStack() as stack:
            if backend == "memory":
                url = "memory://"
            elif backend == "sqlite":
                url = f"sqlite:///{tmp_path / f'tk{next(counter)}.db'}"
            else:
                url = stack.enter_context(schemas.lease())
            if "redis" in servers:
                overrides.setdefault("redis_url", servers["redis"])
            tk = turnkeeper.open(url, **overrides)
            stack.callback(tk.close)
            yield tk

    return opener


@pytest.fixture
def opened(open_tk: Opener) -> Iterator[Turnkeeper]:
    """A fresh Turnkeeper from `turnkeeper.open` on each backend, default configuration."""
    with open_tk() as tk:
        yield tk
