"""The service-level contract suites here run on every backend, `memory://` included: `tk` (from
tests/conftest.py) is the sync `Turnkeeper` over this `store`. The async face runs that very
`Turnkeeper` on worker threads, so it has no I/O path of its own to prove here; its own tests
are in tests/test_async_api.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import open_test_store
from turnkeeper.storage.base import Store


@pytest.fixture(params=["memory", "sqlite", "postgres", "postgres+redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A fresh, empty store of each backend."""
    backend = open_test_store(request.param, request, tmp_path)
    yield backend
    backend.close()
