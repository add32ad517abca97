"""One numbered, append-only migration history for every SQL backend.

Each step has one number and one name on every backend, and the DDL each dialect spells it
in. A store runs the steps it has not recorded, in order, inside one transaction, and records
each in `schema_migrations` (SQLite also in `PRAGMA user_version`, so opening an up-to-date
database costs one pragma read). Fix forward: never edit a step that has shipped (a test pins
a checksum of every step's text); add a new one at the end.

Adding a migration: append `Migration(LATEST_VERSION + 1, "what it adds", sqlite=(...),
postgres=(...))` below, with the statements of both dialects (an empty tuple where a dialect
has nothing to do) — or `Migration.written_once(...)` where they differ only in column types —
then check in the frozen schema dumps of the new version
(tests/storage/fixtures, see the README there) and pin its checksum in
tests/storage/test_migration_history.py.

The numbering is SQLite's history, the older one. PostgreSQL's first step already had the
columns and indexes of step 2, so its step 2 is empty. On PostgreSQL the steps run under an
advisory lock (`MIGRATION_LOCK`), so processes opening one new schema together migrate it once.
"""

from __future__ import annotations

from dataclasses import dataclass

_SQLITE_TYPES = {"time": "TEXT", "flag": "INTEGER", "false": "0", "bigint": "INTEGER"}
"""SQLite keeps times as ISO-8601 text and flags as 0/1 (its integers are 64-bit already)."""
_POSTGRES_TYPES = {"time": "TIMESTAMPTZ", "flag": "BOOLEAN", "false": "false", "bigint": "BIGINT"}


@dataclass(frozen=True)
class Migration:
    """One step of the schema history: its number, its name, and its DDL in each dialect."""

    version: int
    name: str
    sqlite: tuple[str, ...]
    postgres: tuple[str, ...]

    @classmethod
    def written_once(cls, version: int, name: str, *statements: str) -> Migration:
        """A step whose statements differ between dialects only in column types, written once
        with `{time}`, `{flag}`, `{false}` and `{bigint}` where the types go."""
        sqlite, postgres = (
            tuple(statement.format(**types) for statement in statements)
            for types in (_SQLITE_TYPES, _POSTGRES_TYPES)
        )
        return cls(version, name, sqlite=sqlite, postgres=postgres)

    def statements(self, dialect: str) -> tuple[str, ...]:
        """The step's DDL in `dialect` ("sqlite" or "postgres")."""
        statements: tuple[str, ...] = getattr(self, dialect)
        return statements


_SESSION_NAMING = """                id TEXT PRIMARY KEY,
                key TEXT,
                project TEXT NOT NULL,
                subject TEXT,
                kind TEXT,
                title TEXT,
                phase TEXT,
"""
"""The session columns both dialects' first step spell alike (their text is frozen)."""
_MESSAGE_HEAD = """                session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
                seq INTEGER NOT NULL,
                id TEXT NOT NULL UNIQUE,
                role TEXT NOT NULL,
                author TEXT,
                content TEXT NOT NULL,
"""
_LIVE_KEY = """CREATE UNIQUE INDEX sessions_live_key ON sessions (project, key)
                WHERE status = 'active' AND key IS NOT NULL"""


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "sessions and messages",
        sqlite=(
            """CREATE TABLE IF NOT EXISTS schema_migrations (
                version INTEGER PRIMARY KEY,
                name TEXT NOT NULL,
                applied_at TEXT NOT NULL
            )""",
            """CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)""",
            """CREATE TABLE sessions (
"""
            + _SESSION_NAMING
            + """                status TEXT NOT NULL DEFAULT 'active',
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                expires_at TEXT,
                message_count INTEGER NOT NULL DEFAULT 0,
                last_seq INTEGER NOT NULL DEFAULT 0,
                stored_tokens INTEGER NOT NULL DEFAULT 0,
                metadata TEXT NOT NULL DEFAULT '{}',
                version INTEGER NOT NULL DEFAULT 0
            )""",
            _LIVE_KEY,
            "CREATE INDEX sessions_by_subject ON sessions (subject)",
            "CREATE INDEX sessions_by_expiry ON sessions (expires_at)",
            "CREATE INDEX sessions_by_updated ON sessions (updated_at, id)",
            "CREATE INDEX sessions_by_project ON sessions (project, updated_at, id)",
            """CREATE TABLE messages (
"""
            + _MESSAGE_HEAD
            + """                internal INTEGER NOT NULL DEFAULT 0,
                created_at TEXT NOT NULL,
                tokens INTEGER NOT NULL,
                metadata TEXT NOT NULL DEFAULT '{}',
                PRIMARY KEY (session_id, seq)
            )""",
        ),
        postgres=(
            """CREATE TABLE IF NOT EXISTS schema_migrations (
                version INTEGER PRIMARY KEY,
                name TEXT NOT NULL,
                applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
            )""",
            "CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
            """CREATE TABLE sessions (
"""
            + _SESSION_NAMING
            + """                status TEXT NOT NULL DEFAULT 'active'
                    CHECK (status IN ('active', 'archived', 'expired')),
                created_at TIMESTAMPTZ NOT NULL,
                updated_at TIMESTAMPTZ NOT NULL,
                expires_at TIMESTAMPTZ,
                message_count INTEGER NOT NULL DEFAULT 0,
                last_seq INTEGER NOT NULL DEFAULT 0,
                stored_tokens BIGINT NOT NULL DEFAULT 0,
                usage_input_tokens BIGINT NOT NULL DEFAULT 0,
                usage_output_tokens BIGINT NOT NULL DEFAULT 0,
                metadata JSONB NOT NULL DEFAULT '{}',
                version BIGINT NOT NULL DEFAULT 0
            )""",
            # A key names one live session per project; archived and expired holders keep it.
            _LIVE_KEY,
            # The older conversation service's three indexes, plus key and project lookups.
            "CREATE INDEX sessions_by_subject ON sessions (subject)",
            "CREATE INDEX sessions_by_expiry ON sessions (expires_at) WHERE status = 'active'",
            "CREATE INDEX sessions_by_status ON sessions (status, updated_at, id)",
            "CREATE INDEX sessions_by_updated ON sessions (updated_at, id)",
            "CREATE INDEX sessions_by_key ON sessions (project, key, updated_at)",
            "CREATE INDEX sessions_by_project ON sessions (project, updated_at, id)",
            # Project statistics read only this index (an index-only scan of the totals).
            """CREATE INDEX sessions_project_totals ON sessions (project, status)
                INCLUDE (message_count, stored_tokens, usage_input_tokens, usage_output_tokens)""",
            """CREATE TABLE messages (
"""
            + _MESSAGE_HEAD
            + """                internal BOOLEAN NOT NULL DEFAULT false,
                created_at TIMESTAMPTZ NOT NULL,
                tokens INTEGER NOT NULL,
                usage_input_tokens INTEGER,
                usage_output_tokens INTEGER,
                tool_calls JSONB,
                tool_call_id TEXT,
                metadata JSONB NOT NULL DEFAULT '{}',
                PRIMARY KEY (session_id, seq)
            )""",
            "CREATE INDEX messages_user_facing ON messages (session_id, seq) WHERE NOT internal",
        ),
    ),
    Migration(
        2,
        "usage, tool calls, user-facing index, key lookup",
        sqlite=(
            "ALTER TABLE sessions ADD COLUMN usage_input_tokens INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE sessions ADD COLUMN usage_output_tokens INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE messages ADD COLUMN usage_input_tokens INTEGER",
            "ALTER TABLE messages ADD COLUMN usage_output_tokens INTEGER",
            "ALTER TABLE messages ADD COLUMN tool_calls TEXT",
            "ALTER TABLE messages ADD COLUMN tool_call_id TEXT",
            "CREATE INDEX messages_user_facing ON messages (session_id, internal, seq)",
            "CREATE INDEX sessions_by_key ON sessions (project, key, updated_at)",
        ),
        postgres=(),
    ),
    Migration.written_once(
        3,
        "api keys",
        """CREATE TABLE api_keys (
                id TEXT PRIMARY KEY,
                project TEXT NOT NULL,
                name TEXT NOT NULL DEFAULT '',
                secret_hash TEXT NOT NULL,
                admin {flag} NOT NULL DEFAULT {false},
                created_at {time} NOT NULL,
                revoked_at {time}
            )""",
        "CREATE INDEX api_keys_by_project ON api_keys (project, created_at)",
    ),
    Migration.written_once(
        4,
        "agent states and summary checkpoints",
        """CREATE TABLE agent_states (
                session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
                agent TEXT NOT NULL,
                last_processed_seq INTEGER NOT NULL DEFAULT 0,
                provider_session_id TEXT,
                execution_ms {bigint} NOT NULL DEFAULT 0,
                turns INTEGER NOT NULL DEFAULT 0,
                updated_at {time} NOT NULL,
                PRIMARY KEY (session_id, agent)
            )""",
        """CREATE TABLE summaries (
                session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
                covers_to_seq INTEGER NOT NULL,
                text TEXT NOT NULL,
                tokens INTEGER NOT NULL,
                method TEXT NOT NULL,
                created_at {time} NOT NULL,
                PRIMARY KEY (session_id, covers_to_seq)
            )""",
    ),
    Migration(
        5,
        "message ids scoped to their session",
        sqlite=(
            # SQLite cannot drop a column's UNIQUE: the table is rebuilt with the pair instead.
            """CREATE TABLE messages_v5 (
                session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
                seq INTEGER NOT NULL,
                id TEXT NOT NULL,
                role TEXT NOT NULL,
                author TEXT,
                content TEXT NOT NULL,
                internal INTEGER NOT NULL DEFAULT 0,
                created_at TEXT NOT NULL,
                tokens INTEGER NOT NULL,
                metadata TEXT NOT NULL DEFAULT '{}',
                usage_input_tokens INTEGER,
                usage_output_tokens INTEGER,
                tool_calls TEXT,
                tool_call_id TEXT,
                PRIMARY KEY (session_id, seq),
                UNIQUE (session_id, id)
            )""",
            """INSERT INTO messages_v5 SELECT session_id, seq, id, role, author, content,
                internal, created_at, tokens, metadata, usage_input_tokens, usage_output_tokens,
                tool_calls, tool_call_id FROM messages""",
            "DROP TABLE messages",
            "ALTER TABLE messages_v5 RENAME TO messages",
            "CREATE INDEX messages_user_facing ON messages (session_id, internal, seq)",
        ),
        postgres=(
            "ALTER TABLE messages DROP CONSTRAINT messages_id_key",
            "ALTER TABLE messages ADD CONSTRAINT messages_session_id_id_key UNIQUE (session_id, id)",
        ),
    ),
    Migration.written_once(
        6,
        "turn traces",
        """CREATE TABLE turn_traces (
                session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
                seq INTEGER NOT NULL,
                data TEXT NOT NULL,
                PRIMARY KEY (session_id, seq)
            )""",
    ),
    Migration(
        7,
        "full-text search of message content",
        # An FTS5 index over `messages` by rowid (the text is not stored twice), kept in step by
        # triggers — so every write, the foreign-key cascade of a session delete included,
        # updates it in its own transaction — and filled from the messages stored so far. A
        # later step that rebuilds `messages` must end with the 'rebuild' statement again.
        sqlite=(
            """CREATE VIRTUAL TABLE messages_fts USING fts5(
                content, content='messages', content_rowid='rowid',
                tokenize='unicode61 remove_diacritics 0'
            )""",
            """CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
                INSERT INTO messages_fts (rowid, content) VALUES (new.rowid, new.content);
            END""",
            """CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
                INSERT INTO messages_fts (messages_fts, rowid, content)
                    VALUES ('delete', old.rowid, old.content);
            END""",
            """CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
                INSERT INTO messages_fts (messages_fts, rowid, content)
                    VALUES ('delete', old.rowid, old.content);
                INSERT INTO messages_fts (rowid, content) VALUES (new.rowid, new.content);
            END""",
            "INSERT INTO messages_fts (messages_fts) VALUES ('rebuild')",
        ),
        # A generated column, computed by every INSERT, under a GIN index; adding it rewrites
        # the table, which indexes the messages stored so far. A tsvector holds at most 1 MB,
        # so it is made from a message's first 100,000 characters (`sql/search.py`'s headlines
        # read the same prefix).
        postgres=(
            """ALTER TABLE messages ADD COLUMN search_vector tsvector GENERATED ALWAYS AS
                (to_tsvector('simple'::regconfig, left(content, 100000))) STORED""",
            "CREATE INDEX messages_search ON messages USING GIN (search_vector)",
        ),
    ),
    # No foreign key on `parent_id`: deleting the
    # source must leave its branches (whose rows are their own) and where they came from.
    Migration.written_once(
        8,
        "session branches",
        """CREATE TABLE session_forks (
                session_id TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
                parent_id TEXT NOT NULL,
                forked_at_seq INTEGER NOT NULL,
                created_at {time} NOT NULL
            )""",
        "CREATE INDEX session_forks_by_parent ON session_forks (parent_id, created_at)",
    ),
    # Every append rewrites the session row's totals and `updated_at`, and every index holding
    # a rewritten column is rewritten with it: a page each in the write-ahead log per commit.
    # A key lookup needs only (project, key): a key has a handful of sessions, sorted in memory.
    # SQLite's planner never used `messages_user_facing` (the primary key (session_id, seq)
    # serves the user-facing reads, filtering the rare internal rows), yet each message wrote it.
    Migration(
        9,
        "leaner append: key index without updated_at, no unused message index",
        sqlite=(
            "DROP INDEX messages_user_facing",
            "DROP INDEX sessions_by_key",
            "CREATE INDEX sessions_by_key ON sessions (project, key)",
        ),
        postgres=(
            "DROP INDEX sessions_by_key",
            "CREATE INDEX sessions_by_key ON sessions (project, key)",
        ),
    ),
    # The FTS5 insert trigger halved SQLite's append rate (the index's pages written in every
    # append's commit). The index now catches up lazily: `search_watermark` holds the highest
    # message rowid indexed, and a search first indexes the rows above it (`sql/search.py`).
    # A row above the watermark was never indexed, so only rows at or below it are sent to
    # FTS5's 'delete' (a delete of an unindexed row corrupts an external-content index). A new
    # row takes rowid max(rowid) + 1, so after a delete the watermark comes down to the largest
    # rowid left: a rowid freed above it must not be taken again by a row it claims is indexed.
    # Everything stored so far was indexed by the old trigger. PostgreSQL's generated column
    # costs its append little (bench/bench_search.py), so it stays.
    Migration(
        10,
        "full-text index catches up at search, not in every append",
        sqlite=(
            "DROP TRIGGER messages_fts_insert",
            "DROP TRIGGER messages_fts_delete",
            "DROP TRIGGER messages_fts_update",
            "CREATE TABLE search_watermark (indexed_to INTEGER NOT NULL)",
            "INSERT INTO search_watermark (indexed_to) SELECT coalesce(max(rowid), 0) FROM messages",
            """CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
                INSERT INTO messages_fts (messages_fts, rowid, content)
                    SELECT 'delete', old.rowid, old.content FROM search_watermark
                    WHERE old.rowid <= indexed_to;
                UPDATE search_watermark SET indexed_to = (SELECT coalesce(max(rowid), 0) FROM messages)
                    WHERE indexed_to > (SELECT coalesce(max(rowid), 0) FROM messages);
            END""",
            """CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages
                WHEN old.rowid <= (SELECT indexed_to FROM search_watermark) BEGIN
                INSERT INTO messages_fts (messages_fts, rowid, content)
                    VALUES ('delete', old.rowid, old.content);
                INSERT INTO messages_fts (rowid, content) VALUES (new.rowid, new.content);
            END""",
        ),
        postgres=(),
    ),
    # A chat turn's model call is made by one attempt at a time across processes and replicas:
    # the attempt holding the turn, its lease, and a failure left for the retries that waited.
    Migration.written_once(
        11,
        "turn attempts",
        """CREATE TABLE turn_attempts (
                session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
                turn_id TEXT NOT NULL,
                attempt_id TEXT NOT NULL,
                lease_until {time} NOT NULL,
                error TEXT,
                PRIMARY KEY (session_id, turn_id)
            )""",
    ),
    # What the upstream's prompt cache served (reads) and took (writes) of each reply's input,
    # summed per session like the usage before it. PostgreSQL's project statistics read the
    # totals from one index (an index-only scan): it is made again with the new totals in it.
    Migration(
        12,
        "prompt-cache usage",
        sqlite=(
            "ALTER TABLE sessions ADD COLUMN usage_cache_read_tokens INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE sessions ADD COLUMN usage_cache_creation_tokens INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE messages ADD COLUMN usage_cache_read_tokens INTEGER",
            "ALTER TABLE messages ADD COLUMN usage_cache_creation_tokens INTEGER",
        ),
        postgres=(
            "ALTER TABLE sessions ADD COLUMN usage_cache_read_tokens BIGINT NOT NULL DEFAULT 0",
            "ALTER TABLE sessions ADD COLUMN usage_cache_creation_tokens BIGINT NOT NULL DEFAULT 0",
            "ALTER TABLE messages ADD COLUMN usage_cache_read_tokens INTEGER",
            "ALTER TABLE messages ADD COLUMN usage_cache_creation_tokens INTEGER",
            "DROP INDEX sessions_project_totals",
            """CREATE INDEX sessions_project_totals ON sessions (project, status)
                INCLUDE (message_count, stored_tokens, usage_input_tokens, usage_output_tokens,
                usage_cache_read_tokens, usage_cache_creation_tokens)""",
        ),
    ),
    # Where the windows of a strategy that leaves older turns out start (`CutPointStore`): kept
    # with the session, so that every process builds the same window and its prefix stays
    # cacheable from turn to turn.
    Migration.written_once(
        13, "cut points", "ALTER TABLE sessions ADD COLUMN cut_seq INTEGER NOT NULL DEFAULT 0"
    ),
    # Erasure (`ErasureStore`): a legal hold on one session (its `legal_hold_at`, gone with it)
    # or on a whole project, and the tombstones of erased sessions — id, project and time,
    # nothing a person wrote — so that an erased id never comes back.
    Migration.written_once(
        14,
        "legal holds and tombstones",
        "ALTER TABLE sessions ADD COLUMN legal_hold_at {time}",
        """CREATE TABLE project_holds (
                project TEXT PRIMARY KEY,
                held_at {time} NOT NULL
            )""",
        """CREATE TABLE erased_sessions (
                id TEXT PRIMARY KEY,
                project TEXT NOT NULL,
                erased_at {time} NOT NULL
            )""",
    ),
)

LATEST_VERSION = MIGRATIONS[-1].version

MIGRATION_LOCK = 7_301_114_225_806_337
"""The PostgreSQL advisory-lock key migrations serialize on (any fixed number unlikely to clash)."""
