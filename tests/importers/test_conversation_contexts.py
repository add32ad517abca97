"""An older conversation service's `conversation_contexts` table, created with its DDL on the
real PostgreSQL, imports row by row: its subject column as subject, project, expiry, token
counts, idempotently."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.cli.conftest import Cli
from tests.importers.conftest import run_sql
from turnkeeper.importers import SourceKind, import_from
from turnkeeper.service import Turnkeeper
from turnkeeper.types import Role, Usage

SRE = "3f2b8c1e-4d5a-4e6f-8a7b-9c0d1e2f3a4b"
TABLE = "conversation_contexts"


def _import(tk: Turnkeeper, url: str, *, dry_run: bool = False) -> tuple[int, int, list[str]]:
    report = import_from(tk, SourceKind.CONVERSATION_CONTEXTS, url, dry_run=dry_run)
    return report.sessions_created, report.messages_added, report.errors


def test_a_row_becomes_a_session_with_subject_project_expiry_and_token_counts(
    local: Turnkeeper, older_service_db: str
) -> None:
    run_sql(older_service_db, "conversation_contexts_rows.sql")
    assert _import(local, older_service_db) == (2, 7, [])
    session = local.get_session(SRE)  # the row's UUID is kept as the id …
    assert local.get_session(SRE, project="loom").id == SRE  # … and is the key in its project
    assert (session.project, session.subject, session.key) == ("loom", "bd-101", SRE)
    assert session.expires_at == datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
    assert session.created_at == datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    assert session.metadata == {
        "agent_id": "agent-sre", "provider_id": "openai", "token_count": 1234, "source": TABLE,
    }  # fmt: skip
    history = local.history(session)
    assert [m.role for m in history] == [
        Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.USER, Role.ASSISTANT,
    ]  # fmt: skip
    assert history[0].created_at == datetime(2026, 3, 1, 10, 0, 0, 123456, tzinfo=UTC)
    assert (history[2].usage, history[2].metadata) == (Usage(0, 42), {"token_count": 42})
    assert session.usage_output_tokens == 59


def test_a_session_id_that_is_not_a_uuid_is_the_key_of_a_derived_id(
    local: Turnkeeper, older_service_db: str
) -> None:
    run_sql(older_service_db, "conversation_contexts_rows.sql")
    _import(local, older_service_db)
    legacy = local.get_session("ctx-bd-201-legacy", project="weave")
    assert legacy.id != legacy.key and legacy.subject == "bd-201"
    system = local.history(legacy)[0]
    assert system.created_at == legacy.created_at  # Go's zero time: the row's own time instead


def test_importing_twice_adds_nothing_and_a_dry_run_writes_nothing(
    local: Turnkeeper, older_service_db: str
) -> None:
    run_sql(older_service_db, "conversation_contexts_rows.sql")
    assert _import(local, older_service_db, dry_run=True) == (2, 7, [])
    assert local.list_sessions(project="loom").items == ()
    assert _import(local, older_service_db) == (2, 7, [])
    assert _import(local, older_service_db) == (0, 0, [])
    assert _import(local, older_service_db, dry_run=True) == (0, 0, [])


def test_malformed_messages_are_named_by_row_and_index_and_the_rest_imports(
    local: Turnkeeper, older_service_db: str
) -> None:
    run_sql(older_service_db, "conversation_contexts_rows.sql")
    run_sql(older_service_db, "conversation_contexts_malformed.sql")
    created, added, errors = _import(local, older_service_db)
    row = f"{TABLE}[session_id=7a7a7a7a-1111-4222-8333-944444444444]"
    assert errors == [
        f"{row}.messages[1]: a message must be a JSON object",
        f"{row}.messages[2]: content must be text",
        f"{row}.messages[3]: token_count must be a non-negative integer",
        f"{TABLE}[session_id=ctx-not-an-array]: messages must be a JSON array",
    ]
    assert (created, added) == (3, 9)
    contents = [m.content for m in local.history("7a7a7a7a-1111-4222-8333-944444444444")]
    assert contents == ["A good question.", "Another good answer."]


def test_the_cli_reads_the_table_from_source_db(cli: Cli, older_service_db: str) -> None:
    run_sql(older_service_db, "conversation_contexts_rows.sql")
    dry = cli.json("import", "--source-db", older_service_db, "--dry-run")
    assert (dry["dry_run"], dry["sessions_created"], dry["messages_added"]) == (True, 2, 7)
    assert cli.json("sessions", "list", "--project", "loom")["sessions"] == []
    done = cli.ok("import", "--from", "conversation-contexts", "--source-db", older_service_db)
    assert "Imported 2 new sessions and 7 new messages" in done.stdout
    shown = cli.json("sessions", "show", SRE)["session"]
    assert shown["subject"] == "bd-101"


def test_an_unreachable_source_database_is_one_error_line(cli: Cli) -> None:
    result = cli("import", "--source-db", "postgresql://nobody@127.0.0.1:1/none")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: cannot connect to the source database")
