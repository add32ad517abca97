"""`turnkeeper sessions create|list|show|update|reset|archive|delete`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.cli.conftest import Cli, ids, one_error_line


def _ts(text: str) -> datetime:
    return datetime.fromisoformat(text)


# -- create ---------------------------------------------------------------------------------


def test_create_stores_every_field_given(cli: Cli) -> None:
    before = datetime.now(UTC)
    out = cli.json(
        "sessions", "create", "--key", "k1", "--project", "acme", "--subject", "ticket-7",
        "--kind", "dev-task", "--title", "Fix login", "--phase", "plan",
        "--metadata", '{"team": "web", "n": [1, 2]}', "--ttl", "90m",
    )  # fmt: skip
    session = out["session"]
    assert out["created"] is True
    assert {k: session[k] for k in ("key", "project", "subject", "kind", "title", "phase")} == {
        "key": "k1", "project": "acme", "subject": "ticket-7", "kind": "dev-task",
        "title": "Fix login", "phase": "plan",
    }  # fmt: skip
    assert session["metadata"] == {"team": "web", "n": [1, 2]}
    assert session["status"] == "active"
    lifetime = _ts(session["expires_at"]) - before
    assert timedelta(minutes=89) < lifetime < timedelta(minutes=91)


def test_create_with_ttl_never_has_no_expiry(cli: Cli) -> None:
    assert cli.session("--ttl", "never")["expires_at"] is None


def test_create_without_ttl_never_expires_by_default(cli: Cli) -> None:
    assert cli.session()["expires_at"] is None


def test_create_without_ttl_uses_the_configured_lifetime(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TURNKEEPER_SESSION_EXPIRATION", "24h")
    expires = _ts(cli.session()["expires_at"])
    assert timedelta(hours=23) < expires - datetime.now(UTC) <= timedelta(hours=24)


def test_create_prints_the_session_for_people(cli: Cli) -> None:
    result = cli.ok("sessions", "create", "--key", "people-key", "--title", "Hello there")
    assert "Created" in result.stdout
    assert "people-key" in result.stdout and "Hello there" in result.stdout


def test_create_with_a_key_held_by_a_live_session_fails(cli: Cli) -> None:
    cli.session("--key", "taken")
    result = cli("sessions", "create", "--key", "taken")
    assert result.exit_code == 1
    assert "taken" in one_error_line(result)


def test_get_or_create_returns_the_live_session_holding_the_key(cli: Cli) -> None:
    first = cli.json("sessions", "create", "--key", "k", "--get-or-create", "--title", "A")
    again = cli.json("sessions", "create", "--key", "k", "--get-or-create", "--title", "B")
    assert first["created"] is True and again["created"] is False
    assert again["session"]["id"] == first["session"]["id"]
    assert again["session"]["title"] == "A"


def test_get_or_create_without_a_key_is_a_usage_error(cli: Cli) -> None:
    result = cli("sessions", "create", "--get-or-create")
    assert result.exit_code == 2
    assert "--key" in one_error_line(result)


def test_metadata_that_is_not_json_is_a_usage_error(cli: Cli) -> None:
    result = cli("sessions", "create", "--metadata", "{oops")
    assert result.exit_code == 2
    assert "--metadata" in one_error_line(result)


def test_metadata_that_is_not_an_object_is_a_usage_error(cli: Cli) -> None:
    result = cli("sessions", "create", "--metadata", "[1, 2]")
    assert result.exit_code == 2
    assert "JSON object" in one_error_line(result)


def test_a_bad_duration_is_a_usage_error(cli: Cli) -> None:
    result = cli("sessions", "create", "--ttl", "soon")
    assert result.exit_code == 2
    assert "--ttl" in one_error_line(result)


def test_an_invalid_key_is_an_error_naming_the_key(cli: Cli) -> None:
    result = cli("sessions", "create", "--key", "has space")
    assert result.exit_code == 1
    assert one_error_line(result).startswith("error: key:")


# -- list -----------------------------------------------------------------------------------


def test_list_shows_most_recently_updated_first(cli: Cli) -> None:
    a, b = cli.session("--key", "a"), cli.session("--key", "b")
    cli.add(a["id"], "user", "touch a")
    out = cli.json("sessions", "list")
    assert ids(out["sessions"]) == [a["id"], b["id"]]
    assert out["next_cursor"] is None


def test_list_filters_by_project_subject_kind_key_and_status(cli: Cli) -> None:
    a = cli.session("--key", "a", "--project", "p1", "--subject", "s1", "--kind", "k1")
    b = cli.session("--key", "b", "--project", "p2", "--subject", "s2", "--kind", "k2")
    c = cli.session("--key", "c", "--project", "p1")
    cli.ok("sessions", "archive", c["id"])

    def listed(*options: str) -> list[str]:
        return ids(cli.json("sessions", "list", *options)["sessions"])

    assert sorted(listed("--project", "p1")) == sorted([a["id"], c["id"]])
    assert listed("--subject", "s2") == [b["id"]]
    assert listed("--kind", "k1") == [a["id"]]
    assert listed("--key", "b") == [b["id"]]
    assert listed("--status", "archived") == [c["id"]]
    assert sorted(listed("--status", "active")) == sorted([a["id"], b["id"]])


def test_list_filters_by_updated_since(cli: Cli) -> None:
    old = cli.session()
    since = datetime.now(UTC).isoformat()
    new = cli.session()
    listed = ids(cli.json("sessions", "list", "--updated-since", since)["sessions"])
    assert new["id"] in listed and old["id"] not in listed


def test_list_pages_with_the_cursor_it_prints(cli: Cli) -> None:
    made = [cli.session()["id"] for _ in range(3)]
    first = cli.json("sessions", "list", "--limit", "2")
    assert len(first["sessions"]) == 2 and first["next_cursor"]
    rest = cli.json("sessions", "list", "--limit", "2", "--cursor", first["next_cursor"])
    assert rest["next_cursor"] is None
    assert sorted(ids(first["sessions"]) + ids(rest["sessions"])) == sorted(made)
    people = cli.ok("sessions", "list", "--limit", "2").stdout
    assert f"--cursor {first['next_cursor']}" in people


def test_list_prints_a_table_for_people(cli: Cli) -> None:
    a = cli.session("--key", "alpha", "--project", "p1", "--ttl", "never")
    cli.session("--key", "beta", "--project", "p2")
    cli.add(a["id"], "user", "hello")
    out = cli.ok("sessions", "list").stdout
    for header in ("id", "key", "project", "status", "msgs", "tokens", "updated", "expires"):
        assert header in out
    row = next(line for line in out.splitlines() if a["id"] in line)
    assert "alpha" in row and "p1" in row and "active" in row and "never" in row


def test_list_with_a_bad_limit_is_an_error_naming_limit(cli: Cli) -> None:
    result = cli("sessions", "list", "--limit", "0")
    assert result.exit_code == 1
    assert one_error_line(result).startswith("error: limit:")


def test_list_with_an_unknown_status_is_a_usage_error(cli: Cli) -> None:
    result = cli("sessions", "list", "--status", "sleeping")
    assert result.exit_code == 2
    assert "--status" in one_error_line(result)


def test_list_of_an_empty_database_says_so(cli: Cli) -> None:
    assert "No sessions" in cli.ok("sessions", "list").stdout
    assert cli.json("sessions", "list") == {"sessions": [], "next_cursor": None}


# -- show, update ---------------------------------------------------------------------------


def test_show_finds_a_session_by_key_and_includes_its_stats(cli: Cli) -> None:
    s = cli.session("--key", "k", "--project", "acme")
    cli.add(s["id"], "system", "be brief")
    cli.add(s["id"], "user", "hi", "--internal")
    out = cli.json("sessions", "show", "k", "--project", "acme")
    assert out["session"]["id"] == s["id"]
    assert out["session"]["message_count"] == 2
    assert out["stats"]["messages_by_role"] == {"system": 1, "user": 1}
    assert out["stats"]["internal_messages"] == 1
    people = cli.ok("sessions", "show", s["id"]).stdout
    assert s["id"] in people and "by role" in people


def test_show_by_key_does_not_see_another_projects_session(cli: Cli) -> None:
    cli.session("--key", "k", "--project", "acme")
    result = cli("sessions", "show", "k", "--project", "other")
    assert result.exit_code == 1
    assert one_error_line(result).startswith("error: session 'k' not found")


def test_update_changes_title_phase_and_metadata(cli: Cli) -> None:
    s = cli.session("--title", "old", "--metadata", '{"a": 1}')
    out = cli.json(
        "sessions", "update", s["id"], "--title", "new", "--phase", "verification",
        "--metadata", '{"b": 2}',
    )  # fmt: skip
    assert (out["session"]["title"], out["session"]["phase"]) == ("new", "verification")
    assert out["session"]["metadata"] == {"b": 2}


def test_update_with_nothing_to_change_is_a_usage_error(cli: Cli) -> None:
    s = cli.session()
    result = cli("sessions", "update", s["id"])
    assert result.exit_code == 2
    one_error_line(result)


# -- reset, archive, delete -----------------------------------------------------------------


def test_reset_clears_messages(cli: Cli) -> None:
    s = cli.session()
    cli.add(s["id"], "system", "be brief")
    cli.add(s["id"], "user", "hi")
    out = cli.json("sessions", "reset", s["id"])
    assert out["session"]["message_count"] == 0
    assert cli.json("history", s["id"])["messages"] == []


def test_reset_can_keep_the_system_message(cli: Cli) -> None:
    s = cli.session()
    cli.add(s["id"], "system", "be brief")
    cli.add(s["id"], "user", "hi")
    cli.ok("sessions", "reset", s["id"], "--keep-system-message")
    history = cli.json("history", s["id"])["messages"]
    assert [(m["role"], m["content"]) for m in history] == [("system", "be brief")]


def test_archive_keeps_the_session_readable_and_frees_its_key(cli: Cli) -> None:
    s = cli.session("--key", "k")
    cli.add(s["id"], "user", "hi")
    assert cli.json("sessions", "archive", "k")["session"]["status"] == "archived"
    assert len(cli.json("history", s["id"])["messages"]) == 1
    assert cli.session("--key", "k")["id"] != s["id"]


def test_delete_with_yes_deletes_the_session_and_its_messages(cli: Cli) -> None:
    s = cli.session("--key", "k")
    cli.add(s["id"], "user", "hi")
    result = cli.ok("sessions", "delete", "k", "--yes")
    assert "Deleted" in result.stdout
    missing = cli("sessions", "show", s["id"])
    assert missing.exit_code == 1


def test_delete_with_json_does_not_ask(cli: Cli) -> None:
    s = cli.session()
    assert cli.json("sessions", "delete", s["id"]) == {"deleted": s["id"]}


def test_delete_without_yes_is_refused_when_not_interactive(cli: Cli) -> None:
    s = cli.session()
    result = cli("sessions", "delete", s["id"], input="y\n")
    assert result.exit_code == 2
    assert "--yes" in one_error_line(result)
    assert cli.json("sessions", "show", s["id"])["session"]["id"] == s["id"]


def test_every_session_command_reports_an_unknown_session_as_not_found(cli: Cli) -> None:
    for command in (
        ["sessions", "show", "ghost"],
        ["sessions", "update", "ghost", "--title", "x"],
        ["sessions", "reset", "ghost"],
        ["sessions", "archive", "ghost"],
        ["sessions", "delete", "ghost", "--yes"],
    ):
        result = cli(*command)
        assert result.exit_code == 1, command
        assert one_error_line(result).startswith("error: session 'ghost' not found"), command
