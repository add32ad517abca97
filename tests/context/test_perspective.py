"""An agent's perspective (multi-agent): every "Testing considerations" scenario, each asserting
the exact message list an agent is given, through the service on a real SQLite file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Clock, make_sqlite_store
from tests.context.helpers import Failing
from turnkeeper.config import Settings
from turnkeeper.context.perspective import AWAY_HEADER, NEW_INTERACTION
from turnkeeper.context.selection import SUMMARY_PREFIX
from turnkeeper.context.summarizer import ExtractiveSummarizer
from turnkeeper.errors import InvalidInput
from turnkeeper.service import Turnkeeper
from turnkeeper.types import ContextWindow, NewMessage, StrategyName

View = list[tuple[str, str]]


@pytest.fixture
def tk(tmp_path: Path, settings: Settings, clock: Clock) -> Turnkeeper:
    return Turnkeeper(make_sqlite_store(tmp_path / "agents.db"), settings, clock=clock)


def view(window: ContextWindow) -> View:
    return [(m.role.value, m.content) for m in window.messages]


def away(*lines: str) -> tuple[str, str]:
    return ("system", AWAY_HEADER + "\n\n" + "\n\n".join(lines))


NEW = ("system", NEW_INTERACTION)


def test_single_agent_sees_its_own_turns_as_assistant_and_no_block(tk: Turnkeeper) -> None:
    s = tk.create_session(key="solo")
    tk.append(s, "user", "@pm plan the launch")
    assert view(tk.context(s, agent="pm")) == [("user", "@pm plan the launch")]
    tk.agents.responded(s, "pm", "Step one: pick a date.")
    tk.append(s, "user", "What about step two?")
    assert view(tk.context(s, agent="pm")) == [
        ("user", "@pm plan the launch"),
        ("assistant", "Step one: pick a date."),
        ("user", "What about step two?"),
    ]
    tk.agents.responded(s, "pm", "Step two: invite people.")
    tk.append(s, "user", "Thanks")
    assert view(tk.context(s, agent="pm")) == [
        ("user", "@pm plan the launch"),
        ("assistant", "Step one: pick a date."),
        ("user", "What about step two?"),
        ("assistant", "Step two: invite people."),
        ("user", "Thanks"),
    ]


def test_agent_tagged_in_the_first_message_starts_at_zero_with_nothing_else(
    tk: Turnkeeper,
) -> None:
    s = tk.create_session(key="first")
    tk.append(s, "user", "@pm hello")
    assert tk.agents.state(s, "pm").last_processed_seq == 0
    assert view(tk.context(s, agent="pm")) == [("user", "@pm hello")]
    assert tk.agents.responded(s, "pm", "Hi!").last_processed_seq == 2


def test_agent_tagged_mid_conversation_gets_the_full_history_without_a_block(
    tk: Turnkeeper,
) -> None:
    s = tk.create_session(key="mid")
    tk.append(s, "user", "@pm we need a login page")
    tk.agents.responded(s, "pm", "I will plan it.")
    tk.append(s, "user", "@dev please join and build it")
    assert view(tk.context(s, agent="dev")) == [
        ("user", "@pm we need a login page"),
        ("system", "[pm]: I will plan it."),
        ("user", "@dev please join and build it"),
    ]


def test_other_agents_are_attributed_and_own_turns_are_assistant(tk: Turnkeeper) -> None:
    s = tk.create_session(key="multi")
    tk.append(s, "user", "@pm @dev build a login page")
    tk.agents.responded(s, "pm", "Plan: form, API, tests.")
    tk.agents.responded(s, "dev", "Form done.")
    tk.append(s, "user", "@pm status?")
    expected_history = [("user", "@pm @dev build a login page")]
    assert view(tk.context(s, agent="pm")) == [
        *expected_history,
        ("assistant", "Plan: form, API, tests."),
        ("system", "[dev]: Form done."),
        away("[dev]: Form done."),
        NEW,
        ("user", "@pm status?"),
    ]
    assert view(tk.context(s, agent="dev")) == [
        *expected_history,
        ("system", "[pm]: Plan: form, API, tests."),
        ("assistant", "Form done."),
        ("user", "@pm status?"),
    ]


def test_provider_session_id_is_kept_across_turns_and_replaced_when_a_new_one_comes(
    tk: Turnkeeper, tmp_path: Path, settings: Settings, clock: Clock
) -> None:
    s = tk.create_session(key="ids")
    tk.append(s, "user", "@pm hi")
    tk.agents.responded(s, "pm", "hello", provider_session_id="claude-1")
    tk.append(s, "user", "again")
    assert tk.agents.responded(s, "pm", "yes").provider_session_id == "claude-1"
    assert tk.agents.responded(s, "pm", provider_session_id="claude-2").provider_session_id == (
        "claude-2"
    )
    reopened = Turnkeeper(make_sqlite_store(tmp_path / "agents.db"), settings, clock=clock)
    state = reopened.agents.state(s.id, "pm")
    assert (state.provider_session_id, state.last_processed_seq, state.turns) == ("claude-2", 4, 3)


def test_a_phase_transition_is_a_system_event_every_agent_sees_in_order(tk: Turnkeeper) -> None:
    s = tk.create_session(key="phases", phase="chat")
    tk.append(s, "user", "@pm let's plan")
    tk.agents.responded(s, "pm", "Agreed.")
    event = tk.agents.set_phase(s, "plan", by="pm", summary="Scope agreed: login page.")
    tk.append(s, "user", "@dev go")
    assert tk.get_session(s.id).phase == "plan"
    assert event.metadata["event"]["kind"] == "phase_transition"
    transition = "Phase changed from chat to plan by pm.\nSummary: Scope agreed: login page."
    assert view(tk.context(s, agent="dev")) == [
        ("user", "@pm let's plan"),
        ("system", "[pm]: Agreed."),
        ("system", transition),
        ("user", "@dev go"),
    ]
    with pytest.raises(InvalidInput, match="phase"):
        tk.agents.set_phase(s, "lunch")


def test_a_handoff_reaches_the_returning_agent_in_history_and_in_the_block(
    tk: Turnkeeper,
) -> None:
    s = tk.create_session(key="handoff")
    tk.append(s, "user", "@dev fix the bug")
    tk.agents.responded(s, "dev", "Looking.")
    tk.append(s, "user", "@qa verify instead")
    tk.agents.responded(s, "qa", "Bug reproduced.")
    tk.agents.handoff(s, "qa", "dev", "Repro: log in twice.")
    tk.append(s, "user", "@dev over to you")
    handoff = "Hand-off from qa to dev.\nSummary: Repro: log in twice."
    assert view(tk.context(s, agent="dev")) == [
        ("user", "@dev fix the bug"),
        ("assistant", "Looking."),
        ("user", "@qa verify instead"),
        ("system", "[qa]: Bug reproduced."),
        ("system", handoff),
        away("[user]: @qa verify instead", "[qa]: Bug reproduced.", f"[qa]: {handoff}"),
        NEW,
        ("user", "@dev over to you"),
    ]


def test_events_an_agent_recorded_itself_are_not_news_to_it(tk: Turnkeeper) -> None:
    s = tk.create_session(key="own-events", phase="chat")
    tk.append(s, "user", "@pm plan it")
    tk.agents.responded(s, "pm", "Planned.")
    tk.agents.set_phase(s, "execute", by="pm")
    tk.agents.handoff(s, "pm", "dev", "Go.")
    tk.append(s, "user", "@pm ready?")
    assert view(tk.context(s, agent="pm")) == [
        ("user", "@pm plan it"),
        ("assistant", "Planned."),
        ("system", "Phase changed from chat to execute by pm."),
        ("system", "Hand-off from pm to dev.\nSummary: Go."),
        ("user", "@pm ready?"),
    ]


def test_new_interaction_marker_appears_only_with_the_away_block(tk: Turnkeeper) -> None:
    s = tk.create_session(key="marker")
    tk.append(s, "user", "@pm hi")
    tk.agents.responded(s, "pm", "Hello.")
    tk.append(s, "user", "@pm next")  # only the trigger is new: no block, no marker
    window = view(tk.context(s, agent="pm"))
    assert window == [("user", "@pm hi"), ("assistant", "Hello."), ("user", "@pm next")]
    tk.agents.responded(s, "pm", "Sure.")
    tk.agents.responded(s, "pm", "And more.")  # its own messages never make a block
    tk.append(s, "user", "@pm done?")
    assert AWAY_HEADER not in str(view(tk.context(s, agent="pm")))
    assert NEW not in view(tk.context(s, agent="pm"))


def test_own_tool_calls_stay_a_unit_and_others_become_attributed_text(tk: Turnkeeper) -> None:
    s = tk.create_session(key="tools")
    tk.append(s, "user", "@pm @dev check the build")
    call = {"id": "c1", "type": "function", "function": {"name": "ci_status", "arguments": "{}"}}
    tk.append(s, "assistant", "", author="dev", tool_calls=[call])
    tk.append(s, "tool", "green", tool_call_id="c1")
    tk.append(s, "assistant", "The build is green.", author="dev")
    tk.append(s, "user", "@pm ship it?")
    assert view(tk.context(s, agent="pm")) == [
        ("user", "@pm @dev check the build"),
        ("system", "[dev]: called ci_status"),
        ("system", "[dev] tool result: green"),
        ("system", "[dev]: The build is green."),
        ("user", "@pm ship it?"),
    ]
    dev = tk.context(s, agent="dev").messages
    assert [(m.role.value, m.tool_call_id) for m in dev[1:3]] == [
        ("assistant", None),
        ("tool", "c1"),
    ]
    assert dev[1].tool_calls == (call,)


def test_history_before_an_earlier_trigger_is_complete_and_the_trigger_appears_once(
    tk: Turnkeeper,
) -> None:
    s = tk.create_session(key="trigger")
    tk.append_many(s, [NewMessage("user", f"m{i}") for i in range(1, 5)])
    assert view(tk.context(s, agent="pm", trigger=3)) == [
        ("user", "m1"),
        ("user", "m2"),
        ("user", "m3"),
    ]
    pending = NewMessage("user", "m5", id="m5")
    before = view(tk.context(s, agent="pm", new_message=pending))
    tk.append(s, "user", "m5", id="m5")
    after = view(tk.context(s, agent="pm", new_message=pending))
    assert before == after == [("user", f"m{i}") for i in range(1, 6)]


def test_responding_moves_the_agent_to_the_end_of_the_history(tk: Turnkeeper) -> None:
    s = tk.create_session(key="advance")
    tk.append_many(s, [NewMessage("user", "a"), NewMessage("user", "b")])
    assert tk.agents.responded(s, "pm", execution_ms=1500).last_processed_seq == 2
    tk.agents.responded(s, "dev", "done", execution_ms=500)
    assert tk.session_stats(s).execution_ms == 2000
    assert [st.agent for st in tk.agents.states(s)] == ["dev", "pm"]


def test_a_reset_moves_every_agent_back_to_the_start(tk: Turnkeeper) -> None:
    s = tk.create_session(key="reset")
    tk.append(s, "user", "hi")
    tk.agents.responded(s, "pm", "hello", provider_session_id="c-1")
    tk.reset_session(s)
    state = tk.agents.state(s, "pm")
    assert (state.last_processed_seq, state.provider_session_id) == (0, "c-1")


# -- under a token budget -------------------------------------------------------------------


def _long_multiagent(tk: Turnkeeper) -> str:
    s = tk.create_session(key="long")
    tk.append(s, "system", "You are one of several agents.")
    tk.append(s, "user", "@pm kick off")
    tk.agents.responded(s, "pm", "Kicked off.")
    tk.append_many(
        s,
        [
            NewMessage("assistant", f"dev note {i}: " + "detail " * 30, author="dev")
            for i in range(30)
        ],
    )
    tk.append(s, "user", "@pm where are we?")
    return s.id


def test_when_history_does_not_fit_the_older_part_is_summarized_and_block_is_kept(
    tk: Turnkeeper,
) -> None:
    s = _long_multiagent(tk)
    window = tk.context(s, agent="pm", budget_tokens=2500)
    entries = view(window)
    assert entries[0] == ("system", "You are one of several agents.")
    assert entries[1][1].startswith(SUMMARY_PREFIX)
    assert entries[-1] == ("user", "@pm where are we?")
    assert entries[-2] == NEW and entries[-3][1].startswith(AWAY_HEADER)
    assert window.report.strategy is StrategyName.SUMMARIZE
    assert window.report.messages_summarized > 0
    assert window.report.tokens_used <= 2500
    assert tk.summaries(s), "the summary is kept as a checkpoint"


def test_a_failing_summarizer_leaves_a_note_instead_of_failing_the_turn(
    tmp_path: Path, settings: Settings, clock: Clock
) -> None:
    tk = Turnkeeper(
        make_sqlite_store(tmp_path / "b.db"),
        settings,
        clock=clock,
        summarizer=Failing(ConnectionError("model down")),
    )
    s = _long_multiagent(tk)
    window = tk.context(s, agent="pm", budget_tokens=2500)
    entries = view(window)
    assert "older messages truncated" in entries[1][1]
    assert entries[-1] == ("user", "@pm where are we?")
    report = window.report  # the note's count, and every message it counts named
    assert f"[Note: {report.messages_dropped} older" in entries[1][1]
    assert len(report.dropped_seqs) == report.messages_dropped > 0


def test_extractive_is_the_default_summarizer_without_a_model(tk: Turnkeeper) -> None:
    assert isinstance(tk._core.summarizer, ExtractiveSummarizer)
