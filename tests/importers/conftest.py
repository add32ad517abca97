"""Fixtures for the importer tests: a turnkeeper on a SQLite file, the hand-written fixtures,
and the older conversation service's table created with its own DDL in a PostgreSQL schema of
its own."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.conftest import cli, cli_env  # noqa: F401  (the CLI tests' fixtures, shared)
from tests.conftest import Clock, make_sqlite_store
from tests.postgres_schemas import blank_schema
from turnkeeper.config import Settings
from turnkeeper.service import Turnkeeper

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def local(tmp_path: Path, settings: Settings, clock: Clock) -> Iterator[Turnkeeper]:
    """Turnkeeper on a SQLite file: the target of every import test."""
    with Turnkeeper(make_sqlite_store(tmp_path / "target.db"), settings, clock=clock) as tk:
        yield tk


@pytest.fixture
def fixture_copy(tmp_path: Path) -> Iterator[Path]:
    """A writable copy of the fixtures, for tests that change a source between runs."""
    target = tmp_path / "fixtures"
    shutil.copytree(FIXTURES, target)
    yield target


@pytest.fixture
def older_service_db(postgres_server: str) -> Iterator[str]:
    """A database URL whose schema holds the older conversation service's
    `conversation_contexts` (its DDL as
    written, with the `beads` and `projects` tables its foreign keys need) and no rows."""
    import psycopg

    with blank_schema(postgres_server) as url, psycopg.connect(url, autocommit=True) as conn:
        conn.execute((FIXTURES / "conversation_contexts_schema.sql").read_text(encoding="utf-8"))
        yield url


def run_sql(url: str, name: str) -> None:
    """Run one of the fixture SQL files against `url`."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute((FIXTURES / name).read_text(encoding="utf-8"))
