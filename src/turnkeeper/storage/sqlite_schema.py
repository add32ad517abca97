"""Numbered, append-only migrations of the SQLite schema.

Each step runs once, in order, inside one transaction, and is recorded in `schema_migrations`
(and in `PRAGMA user_version`, so opening an up-to-date database costs one pragma read).
Fix forward: never edit a step that has shipped; add a new one.
"""

from __future__ import annotations

from typing import NamedTuple

from turnkeeper.storage.search_sql import MIGRATION_NAME, SQLITE_STEPS


class Migration(NamedTuple):
    version: int
    name: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "sessions and messages",
        (
            """CREATE TABLE IF NOT EXISTS schema_migrations (
                version INTEGER PRIMARY KEY,
                name TEXT NOT NULL,
                applied_at TEXT NOT NULL
            )""",
            """CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)""",
            """CREATE TABLE sessions (
                id TEXT PRIMARY KEY,
                key TEXT,
                project TEXT NOT NULL,
                subject TEXT,
                kind TEXT,
                title TEXT,
                phase TEXT,
                status TEXT NOT NULL DEFAULT 'active',
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                expires_at TEXT,
                message_count INTEGER NOT NULL DEFAULT 0,
                last_seq INTEGER NOT NULL DEFAULT 0,
                stored_tokens INTEGER NOT NULL DEFAULT 0,
                metadata TEXT NOT NULL DEFAULT '{}',
                version INTEGER NOT NULL DEFAULT 0
            )""",
            """CREATE UNIQUE INDEX sessions_live_key ON sessions (project, key)
                WHERE status = 'active' AND key IS NOT NULL""",
            "CREATE INDEX sessions_by_subject ON sessions (subject)",
            "CREATE INDEX sessions_by_expiry ON sessions (expires_at)",
            "CREATE INDEX sessions_by_updated ON sessions (updated_at, id)",
            "CREATE INDEX sessions_by_project ON sessions (project, updated_at, id)",
            """CREATE TABLE messages (
                session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
                seq INTEGER NOT NULL,
                id TEXT NOT NULL UNIQUE,
                role TEXT NOT NULL,
                author TEXT,
                content TEXT NOT NULL,
                internal INTEGER NOT NULL DEFAULT 0,
                created_at TEXT NOT NULL,
                tokens INTEGER NOT NULL,
                metadata TEXT NOT NULL DEFAULT '{}',
                PRIMARY KEY (session_id, seq)
            )""",
        ),
    ),
    Migration(
        2,
        "usage, tool calls, user-facing index, key lookup",
        (
            "ALTER TABLE sessions ADD COLUMN usage_input_tokens INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE sessions ADD COLUMN usage_output_tokens INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE messages ADD COLUMN usage_input_tokens INTEGER",
            "ALTER TABLE messages ADD COLUMN usage_output_tokens INTEGER",
            "ALTER TABLE messages ADD COLUMN tool_calls TEXT",
            "ALTER TABLE messages ADD COLUMN tool_call_id TEXT",
            "CREATE INDEX messages_user_facing ON messages (session_id, internal, seq)",
            "CREATE INDEX sessions_by_key ON sessions (project, key, updated_at)",
        ),
    ),
    Migration(
        3,
        "api keys",
        (
            """CREATE TABLE api_keys (
                id TEXT PRIMARY KEY,
                project TEXT NOT NULL,
                name TEXT NOT NULL DEFAULT '',
                secret_hash TEXT NOT NULL,
                admin INTEGER NOT NULL DEFAULT 0,
                created_at TEXT NOT NULL,
                revoked_at TEXT
            )""",
            "CREATE INDEX api_keys_by_project ON api_keys (project, created_at)",
        ),
    ),
    Migration(
        4,
        "agent states and summary checkpoints",
        (
            """CREATE TABLE agent_states (
                session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
                agent TEXT NOT NULL,
                last_processed_seq INTEGER NOT NULL DEFAULT 0,
                provider_session_id TEXT,
                execution_ms INTEGER NOT NULL DEFAULT 0,
                turns INTEGER NOT NULL DEFAULT 0,
                updated_at TEXT NOT NULL,
                PRIMARY KEY (session_id, agent)
            )""",
            """CREATE TABLE summaries (
                session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
                covers_to_seq INTEGER NOT NULL,
                text TEXT NOT NULL,
                tokens INTEGER NOT NULL,
                method TEXT NOT NULL,
                created_at TEXT NOT NULL,
                PRIMARY KEY (session_id, covers_to_seq)
            )""",
        ),
    ),
    Migration(
        5,
        "message ids scoped to their session",
        (
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
    ),
    Migration(
        6,
        "turn traces",
        (
            """CREATE TABLE turn_traces (
                session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
                seq INTEGER NOT NULL,
                data TEXT NOT NULL,
                PRIMARY KEY (session_id, seq)
            )""",
        ),
    ),
    Migration(7, MIGRATION_NAME, SQLITE_STEPS),
)

LATEST_VERSION = MIGRATIONS[-1].version
