"""`turnkeeper search QUERY`: hits as a table for people, as JSON for scripts, filters as
options, and a bad query as one error line."""

from __future__ import annotations

import pytest

from tests.cli.conftest import Cli, one_error_line


@pytest.fixture
def trips(cli: Cli) -> Cli:
    cli.session("--key", "lisbon", "--project", "travel")
    cli.add("lisbon", "user", "Where should I eat in Lisbon?", "--project", "travel")
    cli.add(
        "lisbon", "assistant", "Try the pastel de nata in Lisbon.", "--author", "guide",
        "--project", "travel",
    )  # fmt: skip
    cli.session("--key", "work", "--project", "office")
    cli.add("work", "user", "Book the Lisbon offsite", "--project", "office")
    return cli


def test_search_prints_matching_messages_with_their_session(trips: Cli) -> None:
    out = trips.ok("search", "nata").stdout
    assert "lisbon" in out and "pastel de nata in Lisbon" in out and "Where" not in out


def test_search_json_gives_hits_with_snippets_and_plain_text(trips: Cli) -> None:
    hits = trips.json("search", "lisbon", "--project", "travel")["hits"]
    assert sorted(h["seq"] for h in hits) == [1, 2]
    assert {h["session_key"] for h in hits} == {"lisbon"}
    (answer,) = [h for h in hits if h["seq"] == 2]
    assert answer["snippet_text"] == "Try the pastel de nata in Lisbon."
    assert {"text": "Lisbon", "match": True} in answer["snippet"]


def test_search_without_project_searches_every_project(trips: Cli) -> None:
    hits = trips.json("search", "lisbon")["hits"]
    assert sorted(h["project"] for h in hits) == ["office", "travel", "travel"]


def test_search_options_filter(trips: Cli) -> None:
    def seqs(*options: str) -> list[tuple[str, int]]:
        hits = trips.json("search", "lisbon", *options)["hits"]
        return sorted((h["session_key"], h["seq"]) for h in hits)

    assert seqs("--author", "guide") == [("lisbon", 2)]
    assert seqs("--role", "user", "--project", "travel") == [("lisbon", 1)]
    assert seqs("--session", "work", "--project", "office") == [("work", 1)]
    assert seqs("--until", "2000-01-01") == []
    assert len(seqs("--limit", "1")) == 1


def test_nothing_found_says_so(trips: Cli) -> None:
    assert "No messages found." in trips.ok("search", "porto").stdout


def test_a_malformed_query_is_one_error_line_naming_q(trips: Cli) -> None:
    result = trips("search", '"unclosed')
    assert result.exit_code == 1
    assert one_error_line(result).startswith("error: q: has an unclosed quote")
    result = trips("search", "lisbon", "--limit", "0")
    assert result.exit_code == 1 and "limit" in one_error_line(result)
