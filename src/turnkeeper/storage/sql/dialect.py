"""What differs between the SQL dialects, as data the one store reads.

SQLite and PostgreSQL store the same tables and take the same statements (written once, with
`?` placeholders, in `queries`); a `Dialect` says the rest: how times and JSON cross the
boundary (SQLite keeps times as fixed-width UTC text and JSON as text; PostgreSQL has
`timestamptz` and `jsonb`, which its driver converts), which DDL of each migration step runs
(`name`, see `schema`), what locks a selected row, and how an append claims its seqs.

Both dialects are here, side by side (PostgreSQL's JSON adapter is psycopg's, imported when a
value is first sent, so a SQLite user need not install it). The full-text index differs too
much to be data: each dialect's search is a class of its own in `sql/search.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from turnkeeper.storage.codec import dump_json, from_ts, load_json, to_ts


class Row(Protocol):
    """A result row addressable by column name (`sqlite3.Row`, a psycopg `dict_row`)."""

    def __getitem__(self, key: str, /) -> Any: ...


@dataclass(frozen=True)
class Dialect:
    """How one backend encodes times and JSON on the way in, and decodes them on the way out;
    which migration DDL it runs (`name`), what locks a selected row (`row_lock`), and how an
    append claims its seqs (`claims_by_update`)."""

    name: str
    encode_ts: Callable[[datetime], Any]
    decode_ts: Callable[[Any], datetime]
    encode_json: Callable[[Any], Any]
    decode_json: Callable[[Any], Any]
    row_lock: str = ""
    claims_by_update: bool = False
    """Whether an append's fast path claims its seqs (and adds its totals) with one
    `CLAIM_SEQS … RETURNING` rather than `SELECT_APPEND_TARGET` now and `ADD_TOTALS` after the
    insert. Over a network (PostgreSQL) a statement fewer is a round trip fewer; in process
    (SQLite) the UPDATE with RETURNING was measured slower than the two plain statements."""

    def encode_ts_or_none(self, value: datetime | None) -> Any:
        return None if value is None else self.encode_ts(value)

    def decode_ts_or_none(self, value: Any) -> datetime | None:
        return None if value is None else self.decode_ts(value)


SQLITE = Dialect(
    name="sqlite", encode_ts=to_ts, decode_ts=from_ts, encode_json=dump_json, decode_json=load_json
)
"""SQLite keeps times as fixed-width UTC text (which sorts in time order) and JSON as text."""


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _as_utc(value: Any) -> datetime:
    return _aware(value).astimezone(UTC)


def _jsonb(value: Any) -> Any:
    """A `jsonb` parameter: psycopg's adapter (psycopg is loaded by then: the driver uses it)."""
    from psycopg.types.json import Jsonb

    return Jsonb(value)


def _same(value: Any) -> Any:
    return value


POSTGRES = Dialect(
    name="postgres",
    encode_ts=_aware,
    decode_ts=_as_utc,
    encode_json=_jsonb,
    decode_json=_same,
    row_lock=" FOR UPDATE",
    claims_by_update=True,
)
"""PostgreSQL has `timestamptz` and `jsonb`; the driver converts both, so little is left to do
(its `jsonb` loader reads as `load_json` does: `sql/postgres.py`)."""


def format_placeholders(query: str) -> str:
    """The shared `?`-placeholder SQL in psycopg's `%s` style (a literal `%` doubled)."""
    return query.replace("%", "%%").replace("?", "%s")
