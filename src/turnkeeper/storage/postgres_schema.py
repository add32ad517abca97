"""Numbered, append-only migrations of the PostgreSQL schema.

The same approach as `sqlite_schema`: each step runs once, in order, inside one transaction,
and is recorded in `schema_migrations`. Concurrent processes opening a fresh database take a
transaction-level advisory lock first, so exactly one of them migrates and the others see the
result. Fix forward: never edit a step that has shipped; add a new one.

The tables live in whatever schema `search_path` names first, so one database can hold several
independent turnkeeper stores (the test suite gives each test its own schema).
"""

from __future__ import annotations

from turnkeeper.storage.search_sql import MIGRATION_NAME, PG_STEPS
from turnkeeper.storage.sqlite_schema import Migration

MIGRATION_LOCK = 7_301_114_225_806_337
"""The advisory-lock key migrations serialize on (any fixed number unlikely to clash)."""

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "sessions and messages",
        (
            """CREATE TABLE IF NOT EXISTS schema_migrations (
                version INTEGER PRIMARY KEY,
                name TEXT NOT NULL,
                applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
            )""",
            "CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
            """CREATE TABLE sessions (
                id TEXT PRIMARY KEY,
                key TEXT,
                project TEXT NOT NULL,
                subject TEXT,
                kind TEXT,
                title TEXT,
                phase TEXT,
                status TEXT NOT NULL DEFAULT 'active'
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
            """CREATE UNIQUE INDEX sessions_live_key ON sessions (project, key)
                WHERE status = 'active' AND key IS NOT NULL""",
            # The bead conversation service's three indexes, plus key and project lookups.
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
                session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
                seq INTEGER NOT NULL,
                id TEXT NOT NULL UNIQUE,
                role TEXT NOT NULL,
                author TEXT,
                content TEXT NOT NULL,
                internal BOOLEAN NOT NULL DEFAULT false,
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
        "api keys",
        (
            """CREATE TABLE api_keys (
                id TEXT PRIMARY KEY,
                project TEXT NOT NULL,
                name TEXT NOT NULL DEFAULT '',
                secret_hash TEXT NOT NULL,
                admin BOOLEAN NOT NULL DEFAULT false,
                created_at TIMESTAMPTZ NOT NULL,
                revoked_at TIMESTAMPTZ
            )""",
            "CREATE INDEX api_keys_by_project ON api_keys (project, created_at)",
        ),
    ),
    Migration(
        3,
        "agent states and summary checkpoints",
        (
            """CREATE TABLE agent_states (
                session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
                agent TEXT NOT NULL,
                last_processed_seq INTEGER NOT NULL DEFAULT 0,
                provider_session_id TEXT,
                execution_ms BIGINT NOT NULL DEFAULT 0,
                turns INTEGER NOT NULL DEFAULT 0,
                updated_at TIMESTAMPTZ NOT NULL,
                PRIMARY KEY (session_id, agent)
            )""",
            """CREATE TABLE summaries (
                session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
                covers_to_seq INTEGER NOT NULL,
                text TEXT NOT NULL,
                tokens INTEGER NOT NULL,
                method TEXT NOT NULL,
                created_at TIMESTAMPTZ NOT NULL,
                PRIMARY KEY (session_id, covers_to_seq)
            )""",
        ),
    ),
    Migration(
        4,
        "message ids scoped to their session",
        (
            "ALTER TABLE messages DROP CONSTRAINT messages_id_key",
            "ALTER TABLE messages ADD CONSTRAINT messages_session_id_id_key UNIQUE (session_id, id)",
        ),
    ),
    Migration(
        5,
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
    Migration(6, MIGRATION_NAME, PG_STEPS),
)

LATEST_VERSION = MIGRATIONS[-1].version
