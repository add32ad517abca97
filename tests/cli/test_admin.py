"""`turnkeeper gc`, `stats` and `demo`."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from pathlib import Path

from typer.testing import CliRunner

from tests.cli.conftest import Cli, one_error_line
from tests.conftest import Clock
from turnkeeper.assemble import open_store
from turnkeeper.cli import app
from turnkeeper.config import load_settings
from turnkeeper.service import Turnkeeper

# -- gc -------------------------------------------------------------------------------------


def _short_lived(cli: Cli) -> str:
    """A session that expires 0.2s from now (waited out)."""
    session_id: str = cli.session("--ttl", "0.2s")["id"]
    time.sleep(0.3)
    return session_id


def test_gc_marks_sessions_past_their_expiry_expired(cli: Cli) -> None:
    keeper = cli.session("--ttl", "never")["id"]
    gone = _short_lived(cli)
    assert cli.json("gc") == {
        "expired": [gone], "deleted": [], "archive_path": None, "dry_run": False,
        "retention_deleted": [], "held": [], "messages_deleted": {},
    }  # fmt: skip
    assert cli.json("sessions", "show", gone)["session"]["status"] == "expired"
    assert cli.json("sessions", "show", keeper)["session"]["status"] == "active"


def test_gc_delete_deletes_expired_sessions(cli: Cli) -> None:
    gone = _short_lived(cli)
    out = cli.ok("gc", "--delete").stdout
    assert out == "Expired 1 session, deleted 1 session.\n"
    assert cli("sessions", "show", gone).exit_code == 1


def test_gc_summarises_in_one_line_and_lists_ids_only_in_json(cli: Cli) -> None:
    cli.session("--ttl", "0.2s")
    cli.session("--ttl", "0.2s")
    time.sleep(0.3)
    assert cli.ok("gc").stdout == "Expired 2 sessions.\n"


def test_gc_dry_run_reports_the_plan_and_changes_nothing(cli: Cli) -> None:
    keeper = cli.session("--ttl", "never")["id"]
    old = _short_lived(cli)
    cli.ok("gc")  # `old` is expired now; `due` is still active but past its expiry
    due = _short_lived(cli)
    before = cli.json("sessions", "list")
    plan = cli.json("gc", "--delete", "--grace", "0s", "--dry-run")
    assert plan == {
        "expired": [due], "deleted": sorted([old, due]), "archive_path": None, "dry_run": True,
        "retention_deleted": [], "held": [], "messages_deleted": {},
    }  # fmt: skip
    assert cli.json("gc", "--dry-run")["deleted"] == []  # without --delete nothing is deleted
    people = cli.ok("gc", "--delete", "--grace", "0s", "--dry-run").stdout
    assert (
        people
        == "Would expire 1 session and delete 2 sessions; nothing was changed (--json lists them).\n"
    )
    assert cli.json("sessions", "list") == before  # not a field changed
    assert {s["id"] for s in before["sessions"]} == {keeper, old, due}
    done = cli.json("gc", "--delete", "--grace", "0s")
    assert (done["expired"], done["deleted"]) == (plan["expired"], plan["deleted"])


def test_gc_delete_keeps_expired_sessions_within_the_grace_period(cli: Cli) -> None:
    gone = _short_lived(cli)
    assert cli.json("gc", "--delete", "--grace", "1h") == {
        "expired": [gone],
        "deleted": [],
        "archive_path": None,
        "dry_run": False,
        "retention_deleted": [],
        "held": [],
        "messages_deleted": {},
    }
    assert cli.json("sessions", "show", gone)["session"]["status"] == "expired"


def test_gc_with_a_bad_grace_is_a_usage_error(cli: Cli) -> None:
    result = cli("gc", "--delete", "--grace", "a while")
    assert result.exit_code == 2
    assert "--grace" in one_error_line(result)


def test_context_of_an_expired_session_is_an_error(cli: Cli) -> None:
    settings = load_settings(database_url=cli.db)
    past = Clock()  # 2026-01-01: long before the real clock the CLI runs on (no race with it)
    with Turnkeeper(open_store(cli.db, settings), settings, clock=past) as tk:
        gone = tk.create_session(ttl=timedelta(hours=1)).id
        tk.append(gone, "user", "hi")
    result = cli("context", gone)
    assert result.exit_code == 1
    assert "expired" in one_error_line(result)


# -- stats ----------------------------------------------------------------------------------


def test_stats_of_one_session(cli: Cli) -> None:
    s = cli.session("--key", "k", "--project", "acme")
    cli.add(s["id"], "user", "hi")
    cli.add(s["id"], "assistant", "hello", "--internal")
    out = cli.json("stats", "k", "--project", "acme")
    assert out["session_id"] == s["id"]
    assert (out["message_count"], out["internal_messages"], out["user_facing_messages"]) == (
        2,
        1,
        1,
    )
    assert out["messages_by_role"] == {"user": 1, "assistant": 1}
    assert "stored tokens" in cli.ok("stats", s["id"]).stdout


def test_stats_per_project(cli: Cli) -> None:
    a = cli.session("--project", "p1")
    cli.add(a["id"], "user", "hi")
    b = cli.session("--project", "p1")
    cli.ok("sessions", "archive", b["id"])
    cli.session("--project", "p2")
    projects = {p["project"]: p for p in cli.json("stats")["projects"]}
    assert projects["p1"]["sessions_by_status"] == {"active": 1, "archived": 1}
    assert projects["p1"]["message_count"] == 1
    assert projects["p2"]["sessions_by_status"] == {"active": 1}
    only = cli.json("stats", "--project", "p2")["projects"]
    assert [p["project"] for p in only] == ["p2"]
    people = cli.ok("stats").stdout
    assert "p1" in people and "archived" in people


# -- demo -----------------------------------------------------------------------------------


def test_demo_teaches_the_commands_and_shows_truncation(cli: Cli) -> None:
    out = cli.ok("demo").stdout
    context = "context demo-trip-planner --strategy sliding_window --budget 120"
    assert f"$ turnkeeper {context} --db {cli.db}" in out
    for command in ("history", "stats", "sessions create", "add"):
        assert f"$ turnkeeper {command} " in out
    assert "truncated" in out and "summary" in out
    assert "Lisbon" in out


def test_demo_run_twice_adds_no_messages_the_second_time(cli: Cli) -> None:
    first = cli.json("demo")
    second = cli.json("demo")
    assert first["messages_added"] == 7 and second["messages_added"] == 0
    assert second["session"]["id"] == first["session"]["id"]
    assert second["session"]["message_count"] == 7
    cli.ok("demo")
    assert len(cli.json("history", "demo-trip-planner")["messages"]) == 7


def test_demo_keeps_its_own_database_and_says_where(
    tmp_path: Path, cli_env: dict[str, str | None]
) -> None:
    runner = CliRunner(env={**cli_env, "XDG_DATA_HOME": str(tmp_path / "data")})
    result = runner.invoke(app, ["demo"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    demo_db = tmp_path / "data" / "turnkeeper" / "demo.db"
    assert demo_db.exists()
    assert f"The demo keeps its own database: sqlite:///{demo_db}" in result.stdout
    assert f"$ turnkeeper history demo-trip-planner --db sqlite:///{demo_db}" in result.stdout
    assert not (tmp_path / "data" / "turnkeeper" / "turnkeeper.db").exists()
    listed = runner.invoke(app, ["sessions", "list", "--json"], catch_exceptions=False)
    assert json.loads(listed.stdout)["sessions"] == []
