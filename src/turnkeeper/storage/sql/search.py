"""The full-text index on the SQL backends: its queries, per dialect.

SQLite keeps an FTS5 external-content table over `messages` (the text is not stored twice),
indexed under the message row's rowid. Since migration step 10 an append does not touch it (the
index's pages in every commit halved the append rate): `search_watermark` holds the highest
rowid indexed, and every search first indexes the rows above it (`SQLiteSearch._catch_up`), in
short write transactions of its own. A new row always takes a rowid above the watermark, so
appends, imports and fork copies are all caught up the same way, with no code path to forget;
deletes (resets, undo, session deletes through the foreign-key cascade, expiry) go through a
trigger that removes from the index only rows at or below the watermark, and brings the
watermark down when the largest rowids go (see step 10 in `sql/schema.py`).

PostgreSQL keeps a generated `tsvector` column (computed by the INSERT itself) under a GIN index.
A `tsvector` holds at most 1 MB, so it is made from the first `PG_INDEXED_CHARS` characters of
a message: longer messages are found by their beginning.

A search runs at most `search_timeout` seconds (each store's `_read_within`: PostgreSQL's own
statement timeout, SQLite's progress handler); past it, it fails with `SearchTooSlow`, a
problem asking for a narrower query, rather than holding a connection and the CPU that other
requests need.

Both use the language-neutral word splitter (lower-cased words, no stemming, no stop words), so
a query finds the same messages on either backend; ranks differ in scale (BM25 on SQLite, cover
density on PostgreSQL). The index itself is step 7 of the migration history
(`sql/schema.py`), which also fills it from the messages already stored.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from turnkeeper.storage.search import (
    HIGHLIGHT_END,
    HIGHLIGHT_START,
    Clause,
    SearchFilter,
    SearchHit,
    SearchQuery,
    Term,
    snippet_parts,
)
from turnkeeper.storage.sql.dialect import Dialect, Row
from turnkeeper.storage.sql.rows import value_from_row
from turnkeeper.storage.sql.store import Executor
from turnkeeper.types import Role

SNIPPET_WORDS = 24
PG_INDEXED_CHARS = 100_000
"""How much of a message PostgreSQL indexes: the `left(content, 100000)` of the generated
column in `schema` (a tsvector holds at most 1 MB)."""

HIT_COLUMNS = (
    "m.session_id, s.key AS session_key, s.title AS session_title, s.project,"
    " m.id AS message_id, m.seq, m.role, m.author, m.created_at"
)
FROM_MESSAGES = "messages m JOIN sessions s ON s.id = m.session_id"


def filter_clauses(where: SearchFilter, d: Dialect) -> tuple[list[str], list[Any]]:
    """The WHERE conditions (on `m` messages and `s` sessions) and parameters of a filter."""
    clauses: list[str] = []
    params: list[Any] = []
    for condition, value in (
        ("s.project = ?", where.project),
        ("m.session_id = ?", where.session_id),
        ("m.role = ?", where.role.value if where.role else None),
        ("m.author = ?", where.author),
        ("s.kind = ?", where.kind),
        ("m.created_at >= ?", d.encode_ts_or_none(where.since)),
        ("m.created_at < ?", d.encode_ts_or_none(where.until)),
    ):
        if value is not None:
            clauses.append(condition)
            params.append(value)
    if not where.include_internal:
        clauses.append("NOT m.internal")
    return clauses or ["1 = 1"], params


def hit_from_row(row: Row, d: Dialect) -> SearchHit:
    return value_from_row(
        SearchHit,
        row,
        seq=int(row["seq"]),
        role=Role(row["role"]),
        created_at=d.decode_ts(row["created_at"]),
        snippet=snippet_parts(str(row["snippet"] or "")),
        rank=float(row["score"]),
    )


def seqs_by_word(
    words: Sequence[str], read: Callable[[str], Sequence[Row]]
) -> dict[str, list[int]]:
    """`WordMatchStore.messages_with_words` over a dialect's query: each distinct word's seqs,
    as `read(word)` returns them (rows with a `seq`, newest first)."""
    return {word: [int(row["seq"]) for row in read(word)] for word in dict.fromkeys(words)}


# -- SQLite: an FTS5 MATCH expression ---------------------------------------------------------


def _quoted(words: str) -> str:
    """Words as an FTS5 string (nothing in them read as FTS5 syntax)."""
    return '"' + words.replace('"', '""') + '"'


def fts5_expression(query: SearchQuery) -> str:
    """The FTS5 MATCH text of a parsed query. Every word is a quoted FTS5 string, so nothing a
    user typed is read as FTS5 syntax (`AND`, `NEAR`, `col:`, `^`…)."""

    def term(t: Term) -> str:
        return _quoted(t.words) + ("*" if t.prefix else "")

    def clause(c: Clause) -> str:
        return "(" + " OR ".join(term(t) for t in c.terms) + ")"

    expression = "(" + " AND ".join(clause(c) for c in query.included) + ")"
    for excluded in query.excluded:
        expression += " NOT " + clause(excluded)
    return expression


CATCH_UP_BATCH = 20_000
"""Messages indexed per write transaction when a search catches the index up: a large import
is indexed in steps, so appends of other sessions wait for one step, not the whole backlog."""
BEHIND = (
    "SELECT indexed_to, (SELECT coalesce(max(rowid), 0) FROM messages) AS newest"
    " FROM search_watermark"
)
INDEX_ABOVE = (
    "INSERT INTO messages_fts (rowid, content)"
    " SELECT rowid, content FROM messages WHERE rowid > ? AND rowid <= ?"
)
MOVE_WATERMARK = "UPDATE search_watermark SET indexed_to = ?"


class SQLiteSearch:
    """`SearchStore` for a SQLite store (one that can `_read` and write in its `dialect`)."""

    dialect: Dialect
    search_timeout: float

    def _read(self, query: str, params: Sequence[Any] = ()) -> Sequence[Row]:
        raise NotImplementedError

    def _read_within(self, seconds: float, query: str, params: Sequence[Any]) -> Sequence[Row]:
        raise NotImplementedError

    def _transaction(self) -> AbstractContextManager[Executor]:
        raise NotImplementedError

    def _catch_up(self) -> None:
        """Index the messages stored since the last search, up to the newest one now.

        One read says whether anything is behind (the common case of a search: nothing is).
        Each step runs under the write lock (`BEGIN IMMEDIATE`) and reads the watermark again
        there, so two processes searching at once never index a row twice: the second finds
        the first's work done. Messages appended while this runs are left for the next search.
        """
        (row,) = self._read(BEHIND)
        indexed, target = int(row["indexed_to"]), int(row["newest"])
        while indexed < target:
            with self._transaction() as tx:
                indexed, newest = tx.execute(BEHIND).fetchone()
                upto = min(newest, target, indexed + CATCH_UP_BATCH)
                if upto <= indexed:  # caught up by another process, or the rows were deleted
                    return
                tx.execute(INDEX_ABOVE, (indexed, upto))
                tx.execute(MOVE_WATERMARK, (upto,))
            indexed = upto

    def search_messages(
        self, query: SearchQuery, where: SearchFilter, *, limit: int, offset: int = 0
    ) -> list[SearchHit]:
        self._catch_up()
        clauses, params = filter_clauses(where, self.dialect)
        sql = (
            f"SELECT {HIT_COLUMNS}, snippet(messages_fts, 0, ?, ?, '…', {SNIPPET_WORDS})"
            " AS snippet, -bm25(messages_fts) AS score"
            " FROM messages_fts JOIN messages m ON m.rowid = messages_fts.rowid"
            " JOIN sessions s ON s.id = m.session_id"
            f" WHERE messages_fts MATCH ? AND {' AND '.join(clauses)}"
            " ORDER BY score DESC, m.created_at DESC, m.session_id, m.seq LIMIT ? OFFSET ?"
        )
        rows = self._read_within(
            self.search_timeout,
            sql,
            [HIGHLIGHT_START, HIGHLIGHT_END, fts5_expression(query), *params, limit, offset],
        )
        return [hit_from_row(row, self.dialect) for row in rows]

    def messages_with_words(
        self, session_id: str, words: Sequence[str], *, limit: int
    ) -> dict[str, list[int]]:
        """`WordMatchStore`: the index read in rowid order, newest first (a session's rows
        are inserted in seq order), so a word the session uses often stops at `limit`."""
        self._catch_up()
        return seqs_by_word(
            words,
            lambda word: self._read_within(
                self.search_timeout, SQLITE_WORD_MATCHES, [_quoted(word), session_id, limit]
            ),
        )


SQLITE_WORD_MATCHES = (
    "SELECT m.seq FROM messages_fts JOIN messages m ON m.rowid = messages_fts.rowid"
    " WHERE messages_fts MATCH ? AND m.session_id = ?"
    " ORDER BY messages_fts.rowid DESC LIMIT ?"
)


# -- PostgreSQL: a tsquery built from per-term functions --------------------------------------


def tsquery_expression(query: SearchQuery) -> tuple[str, list[Any]]:
    """SQL computing the `tsquery` of a parsed query, and its parameters. Each word or phrase
    goes through `phraseto_tsquery` (which cannot fail on any text) and a prefix word, checked
    to be letters and digits by the parser, through `to_tsquery` as `word:*`."""
    params: list[Any] = []

    def term(t: Term) -> str:
        if t.prefix:
            params.append(f"{t.words}:*")
            return "to_tsquery('simple'::regconfig, ?)"
        params.append(t.words)
        return "phraseto_tsquery('simple'::regconfig, ?)"

    def clause(c: Clause) -> str:
        return "(" + " || ".join(term(t) for t in c.terms) + ")"

    parts = [clause(c) for c in query.included]
    parts += ["!!" + clause(c) for c in query.excluded]
    return " && ".join(parts), params


WHOLE_TEXT_CHARS = 240
"""A message this short is its own snippet (ts_headline would trim short words at its ends,
where SQLite's snippet returns the whole text)."""
_MARKS = f"StartSel={HIGHLIGHT_START}, StopSel={HIGHLIGHT_END}"
HEADLINE = (
    f"CASE WHEN length(hits.content) <= {WHOLE_TEXT_CHARS}"
    f" THEN ts_headline('simple'::regconfig, hits.content, search.q, '{_MARKS}, HighlightAll=true')"
    f" ELSE ts_headline('simple'::regconfig, left(hits.content, {PG_INDEXED_CHARS}), search.q,"
    f" '{_MARKS}, MaxWords={SNIPPET_WORDS}, MinWords=8, MaxFragments=2,"
    ' FragmentDelimiter=" … "\') END'
)


class PostgresSearch:
    """`SearchStore` for a PostgreSQL store (one that can `_read_within` in its `dialect`)."""

    dialect: Dialect
    search_timeout: float

    def _read_within(self, seconds: float, query: str, params: Sequence[Any]) -> Sequence[Row]:
        raise NotImplementedError

    def search_messages(
        self, query: SearchQuery, where: SearchFilter, *, limit: int, offset: int = 0
    ) -> list[SearchHit]:
        expression, query_params = tsquery_expression(query)
        clauses, params = filter_clauses(where, self.dialect)
        # Rank and cut first, then make headlines (which re-read each text) for the page only.
        sql = (
            f"WITH search AS (SELECT {expression} AS q)"
            f" SELECT hits.*, {HEADLINE} AS snippet"
            f" FROM (SELECT {HIT_COLUMNS}, m.content,"
            " ts_rank_cd(m.search_vector, search.q, 1) AS score"
            f" FROM search, {FROM_MESSAGES}"
            f" WHERE m.search_vector @@ search.q AND {' AND '.join(clauses)}"
            " ORDER BY score DESC, m.created_at DESC, m.session_id, m.seq LIMIT ? OFFSET ?"
            ") hits, search"
            " ORDER BY hits.score DESC, hits.created_at DESC, hits.session_id, hits.seq"
        )
        rows = self._read_within(self.search_timeout, sql, [*query_params, *params, limit, offset])
        return [hit_from_row(row, self.dialect) for row in rows]

    def messages_with_words(
        self, session_id: str, words: Sequence[str], *, limit: int
    ) -> dict[str, list[int]]:
        """`WordMatchStore`: each word through `phraseto_tsquery` (which cannot fail on any
        text), against the GIN-indexed `search_vector`."""
        return seqs_by_word(
            words,
            lambda word: self._read_within(
                self.search_timeout, POSTGRES_WORD_MATCHES, [session_id, word, limit]
            ),
        )


POSTGRES_WORD_MATCHES = (
    "SELECT seq FROM messages WHERE session_id = ?"
    " AND search_vector @@ phraseto_tsquery('simple'::regconfig, ?)"
    " ORDER BY seq DESC LIMIT ?"
)
