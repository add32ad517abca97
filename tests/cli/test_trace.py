"""`turnkeeper trace SESSION SEQ`: what the model saw for a reply, read from the database."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import turnkeeper
from tests.server.live import LiveServer
from tests.server.upstream import Upstream, make_app
from turnkeeper import ChatTurns, TurnOptions
from turnkeeper.llm import LLMClient

from .conftest import Cli, one_error_line


@pytest.fixture
def answered(cli: Cli) -> Iterator[Upstream]:
    """Session `trip` with two turns answered through the library's turn helper."""
    model = Upstream()
    with LiveServer(make_app(model)) as live, turnkeeper.open(cli.db) as tk:
        with ChatTurns(tk, LLMClient(f"{live.url}/v1")) as chat:
            tk.create_session(key="trip")
            chat.turn("trip", "Four days in Lisbon.")
            chat.turn("trip", "Where should we eat?")
        yield model


def test_trace_prints_the_window_and_what_entered(cli: Cli, answered: Upstream) -> None:
    out = cli.ok("trace", "trip", "4").stdout
    assert "Where should we eat?" in out and "reply 1 to: Four days in Lisbon." in out
    assert "since reply #2: 2 entered, 0 left, 1 stayed" in out
    assert "+ #3 user: Where should we eat?" in out


def test_trace_json_is_the_trace_and_the_diff(cli: Cli, answered: Upstream) -> None:
    trace = cli.json("trace", "trip", "4")
    assert trace["kept_seqs"] == [1, 2, 3] and trace["previous_seq"] == 2
    sent = answered.requests[1]["messages"]
    assert [(e["role"], e["content"]) for e in trace["window"]] == [
        (m["role"], m["content"]) for m in sent
    ]
    assert [e["seq"] for e in trace["entered"]] == [2, 3]


def test_a_message_without_a_trace_is_one_error_line(cli: Cli, answered: Upstream) -> None:
    result = cli("trace", "trip", "3")
    assert result.exit_code == 1
    assert "has no trace" in one_error_line(result)


def test_traces_survive_export_and_import_into_another_database(
    cli: Cli, answered: Upstream, tmp_path: Path
) -> None:
    out = tmp_path / "trip.jsonl"
    cli.ok("export", "trip", "-o", str(out))
    copy = f"sqlite:///{tmp_path / 'copy.db'}"
    cli.ok("import", str(out), db=copy)
    assert cli.json("trace", "trip", "4", db=copy) == cli.json("trace", "trip", "4")
    cli.ok("import", str(out), db=copy)  # idempotent: nothing added, traces unchanged
    assert cli.json("trace", "trip", "2", db=copy) == cli.json("trace", "trip", "2")


@pytest.fixture
def cached(cli: Cli) -> Iterator[Upstream]:
    """Session `warm`: two turns whose upstream says 7 prompt tokens came from its cache, then
    one that asks for a budget too small for the history (older turns leave: a new start)."""
    model = Upstream(cached_tokens=7)
    with LiveServer(make_app(model)) as live, turnkeeper.open(cli.db) as tk:
        with ChatTurns(tk, LLMClient(f"{live.url}/v1")) as chat:
            tk.create_session(key="warm")
            chat.turn("warm", "Four days in Lisbon. " + "padding " * 40)
            chat.turn("warm", "Where should we eat? " + "padding " * 40)
            chat.turn(
                "warm",
                "And on Sunday?",
                options=TurnOptions(strategy="sliding_window", budget_tokens=120),
            )
        yield model


def test_trace_says_whether_the_previous_window_stayed_its_prefix(
    cli: Cli, cached: Upstream
) -> None:
    appended = cli.ok("trace", "warm", "4").stdout
    assert "prefix: matched the previous turn's window" in appended
    assert "(7 read from the prompt cache, 0 written to it)" in appended
    rewritten = cli.json("trace", "warm", "6")
    assert (rewritten["prefix_matched"], rewritten["prefix_broken_at"]) == (False, 0)
    assert rewritten["window"][0]["kind"] == "marker"  # the marker now opens the window
    assert "prefix: broken at message 0 (marker" in cli.ok("trace", "warm", "6").stdout
    assert rewritten["usage"]["cache_read_input_tokens"] == 7


def test_stats_sum_what_the_prompt_cache_served(cli: Cli, cached: Upstream) -> None:
    assert cli.json("stats", "warm")["usage_cache_read_tokens"] == 21
    assert "21 read / 0 written" in cli.ok("stats", "warm").stdout
    (project,) = cli.json("stats")["projects"]
    assert project["usage_cache_read_tokens"] == 21
