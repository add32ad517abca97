"""`turnkeeper fork SESSION --at SEQ` and `turnkeeper branches SESSION`."""

from __future__ import annotations

from tests.cli.conftest import Cli, one_error_line


def _source(cli: Cli) -> dict[str, object]:
    session = cli.session("--key", "trip", "--title", "Trip")
    for n in range(1, 4):
        cli.add("trip", "user", f"turn {n}")
    return session


def _contents(cli: Cli, session: str) -> list[str]:
    return [m["content"] for m in cli.json("history", session)["messages"]]


def test_fork_makes_a_branch_with_the_prefix_that_grows_on_its_own(cli: Cli) -> None:
    source = _source(cli)
    out = cli.json("fork", "trip", "--at", "2", "--key", "trip-b")
    branch = out["session"]
    assert (branch["key"], branch["title"], branch["message_count"]) == ("trip-b", "Trip", 2)
    assert out["forked_from"]["parent_id"] == source["id"]
    assert out["forked_from"]["forked_at_seq"] == 2
    cli.add("trip-b", "user", "another way")
    assert _contents(cli, "trip-b") == ["turn 1", "turn 2", "another way"]
    assert _contents(cli, "trip") == ["turn 1", "turn 2", "turn 3"]


def test_branches_lists_forks_and_the_origin_in_words(cli: Cli) -> None:
    source = _source(cli)
    branch = cli.json("fork", "trip", "--at", "1")["session"]
    listed = cli.json("branches", "trip")
    assert listed["forked_from"] is None
    assert [(b["session_id"], b["forked_at_seq"]) for b in listed["branches"]] == [
        (branch["id"], 1)
    ]
    text = cli.ok("branches", branch["id"]).stdout
    assert f"Forked from session {source['id']} at seq 1" in text
    assert "No branches forked from this session." in text
    assert branch["id"] in cli.ok("branches", "trip").stdout


def test_a_fork_point_past_the_end_is_one_error_line_naming_at_seq(cli: Cli) -> None:
    _source(cli)
    result = cli("fork", "trip", "--at", "9")
    assert result.exit_code != 0
    line = one_error_line(result)
    assert "at_seq" in line and "between 0 and 3" in line


def test_a_negative_fork_point_is_a_usage_error_naming_at(cli: Cli) -> None:
    _source(cli)
    result = cli("fork", "trip", "--at", "-1")
    assert result.exit_code == 2
    assert "--at" in result.stderr


def test_forking_a_missing_session_is_one_error_line(cli: Cli) -> None:
    result = cli("fork", "nowhere", "--at", "0")
    assert result.exit_code != 0
    assert "nowhere" in one_error_line(result)


def test_history_of_a_branch_says_where_it_came_from(cli: Cli) -> None:
    source = _source(cli)
    branch = cli.json("fork", "trip", "--at", "2")["session"]
    text = cli.ok("history", branch["id"]).stdout
    assert f"A branch of session {source['id']}" in text and "#2" in text
    assert "A branch of" not in cli.ok("history", "trip").stdout
