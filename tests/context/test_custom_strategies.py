"""Strategies are objects: a caller passes one or registers it by name, and a strategy's own
declarations (budget rule, default view, checkpoints) decide the build, not `context()`."""

from __future__ import annotations

from typing import Any

import pytest

import turnkeeper
from turnkeeper.config import Settings
from turnkeeper.context import Build, Selection, Turns, newest_that_fit
from turnkeeper.errors import InvalidInput
from turnkeeper.service import Turnkeeper
from turnkeeper.types import StrategyName


class Newest(turnkeeper.Strategy):
    """The newest `count` messages that fit, with a note of its own."""

    name = "newest"

    def __init__(self, count: int = 2, **declared: Any) -> None:
        self.count = count
        for attribute, value in declared.items():
            setattr(self, attribute, value)

    def select(self, turns: Turns, budget: int, build: Build) -> Selection:
        return newest_that_fit(
            turns, budget, build.counter, limit=self.count, marker=lambda n: f"[{n} skipped]"
        )


class FixedBudget(Newest):
    """A strategy whose budget rule ignores the settings: always 300 tokens, 100 reserved."""

    name = "fixed_budget"

    def budget_rule(
        self,
        settings: Settings,
        *,
        budget_tokens: int | None,
        reserved_tokens: int | None,
        model: str,
    ) -> tuple[int, int]:
        return 300, 100


def _chat(tk: Turnkeeper) -> str:
    session = tk.create_session(key="chat")
    tk.append(session, "system", "Be brief.")
    for n in range(3):
        tk.append(session, "user", f"q{n}")
        tk.append(session, "assistant", f"a{n}")
    tk.append(session, "assistant", "private note", internal=True)
    return session.id


def _contents(window: turnkeeper.ContextWindow) -> list[str]:
    return [message.content for message in window.messages]


def test_a_registered_strategy_is_chosen_by_name_and_named_in_the_report(tk: Turnkeeper) -> None:
    session = _chat(tk)
    tk.strategies.register(Newest())
    window = tk.context(session, strategy="newest", budget_tokens=500)
    assert _contents(window) == ["[6 skipped]", "a2", "private note"]
    assert window.report.strategy == "newest"
    assert window.report.messages_dropped == 6 and "newest window" in str(window.report)


def test_a_strategy_object_is_used_without_registering_it(tk: Turnkeeper) -> None:
    session = _chat(tk)
    window = tk.context(session, strategy=Newest(count=3), budget_tokens=500)
    assert _contents(window) == ["[5 skipped]", "q2", "a2", "private note"]
    assert "newest" not in tk.strategies  # passing an object registers nothing


def test_the_strategys_default_view_decides_unless_the_caller_says(tk: Turnkeeper) -> None:
    session = _chat(tk)
    public = Newest(count=2, include_internal=False)
    assert _contents(tk.context(session, strategy=public, budget_tokens=500))[1:] == ["q2", "a2"]
    told = tk.context(session, strategy=public, budget_tokens=500, include_internal=True)
    assert _contents(told)[1:] == ["a2", "private note"]


def test_the_strategys_budget_rule_gives_the_budget(tk: Turnkeeper) -> None:
    session = _chat(tk)
    strategy = FixedBudget()
    assert tk.context(session, strategy=strategy).report.budget == 200
    assert tk.budget_for(strategy, budget_tokens=None, reserved_tokens=None, model="x") == 200
    assert tk.budget_for("truncate", budget_tokens=400, reserved_tokens=None, model="x") == 400


def test_names_are_checked_when_registered_and_when_asked_for(tk: Turnkeeper) -> None:
    with pytest.raises(InvalidInput, match="registered already") as taken:
        tk.strategies.register(Newest(name=StrategyName.FULL))
    assert taken.value.field == "strategy"
    with pytest.raises(InvalidInput, match="needs a name"):
        tk.strategies.register(Newest(name=""))
    with pytest.raises(InvalidInput, match=r"must be a turnkeeper\.Strategy"):
        tk.strategies.register(object())  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="unknown strategy 'newest'; choose one of full, "):
        tk.context(_chat(tk), strategy="newest")


def test_a_strategy_without_select_says_so(tk: Turnkeeper) -> None:
    class Unfinished(turnkeeper.Strategy):
        name = "unfinished"

    with pytest.raises(NotImplementedError, match="Unfinished must implement select"):
        tk.context(_chat(tk), strategy=Unfinished(), budget_tokens=500)


def test_each_service_has_its_own_registry(tk: Turnkeeper, settings: Settings) -> None:
    tk.strategies.register(Newest())
    with turnkeeper.open("memory://") as other:
        assert "newest" in tk.strategies and "newest" not in other.strategies
        assert [s.name for s in other.strategies] == [name.value for name in StrategyName]


def test_only_a_strategy_that_declares_it_uses_checkpoints(tk: Turnkeeper) -> None:
    session = _chat(tk)
    for n in range(20):
        tk.append(session, "user", f"more {n} " + "word " * 20)
    tk.context(session, strategy="summarize", budget_tokens=300)
    assert tk.summaries(session) != []  # summarize may remember its summaries
    before = tk.summaries(session)
    tk.context(session, strategy=Newest(count=3), budget_tokens=300)
    assert tk.summaries(session) == before  # a strategy that does not declare it writes none
