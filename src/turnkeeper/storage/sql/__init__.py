"""The SQL store: one `SQLStore` over two thin drivers.

    dialect.py   what differs between SQLite and PostgreSQL, as data (`Dialect`)
    schema.py    the numbered migration history, each step's DDL per dialect
    queries.py   the statements, written once with `?` placeholders
    rows.py      rows to domain values, domain values to statement parameters
    store.py     `SQLStore`: every read, write and migration of the `Store` contract
    search.py    the full-text index, one class per dialect
    sqlite.py    `SQLiteStore`: connections per thread, `BEGIN IMMEDIATE`, the writer queue
    postgres.py  `PostgresStore`: the pool, statement bounds, the watchdog, the migration lock

The drivers are imported by name (`turnkeeper.storage.sql.sqlite`), never here: PostgreSQL's
needs psycopg, which only its users install. `turnkeeper.storage.open_backend` picks one by URL.
"""

from __future__ import annotations

from turnkeeper.storage.sql.dialect import Dialect
from turnkeeper.storage.sql.schema import LATEST_VERSION, MIGRATIONS, Migration
from turnkeeper.storage.sql.store import SQLStore

__all__ = ["LATEST_VERSION", "MIGRATIONS", "Dialect", "Migration", "SQLStore"]
