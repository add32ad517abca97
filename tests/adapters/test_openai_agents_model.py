"""`TurnkeeperSession` against the SDK's own `SQLiteSession` as the reference, over random
sequences of calls: the object that remembers what it read and appended (its history, and its
items as one blob) answers every call as the reference does, while a second object on the same
key and plain `tk.append` calls write behind its back, and callers change the items they got.
"""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path
from typing import Any

from agents import SQLiteSession
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import turnkeeper
from tests.adapters.test_openai_agents import ITEMS
from tests.conftest import run_async
from turnkeeper.adapters import TurnkeeperSession

KEY = "agent-loop"
items_to_add = st.lists(st.sampled_from(range(len(ITEMS))), min_size=1, max_size=4)
limits = st.one_of(st.none(), st.integers(min_value=-1, max_value=6))


def _text(items: list[Any]) -> list[str]:
    """Items as JSON text: equal items (keys in the same order) give equal text."""
    return [json.dumps(item) for item in items]


class AdapterAgainstTheSDK(RuleBasedStateMachine):
    """`ours` remembers; `other` and `tk.append` write the same session; `reference` (the
    SDK's `SQLiteSession`) is given every write, and must agree with every read of `ours`."""

    @initialize()
    def open(self) -> None:
        self.directory = tempfile.TemporaryDirectory()
        path = Path(self.directory.name)
        self.tk = turnkeeper.open(f"sqlite:///{path / 'tk.db'}")
        self.ours = TurnkeeperSession(KEY, self.tk)
        self.other = TurnkeeperSession(KEY, self.tk)
        self.reference = SQLiteSession(KEY, path / "sdk.db")
        self.handed_out: list[Any] = []

    def teardown(self) -> None:
        if hasattr(self, "tk"):
            self.reference.close()
            self.tk.close()
            self.directory.cleanup()

    def _add(self, session: Any, chosen: list[int]) -> None:
        items = [copy.deepcopy(ITEMS[n]) for n in chosen]
        run_async(session.add_items(copy.deepcopy(items)))
        run_async(self.reference.add_items(items))

    @rule(chosen=items_to_add)
    def ours_adds(self, chosen: list[int]) -> None:
        self._add(self.ours, chosen)

    @rule(chosen=items_to_add)
    def another_object_adds(self, chosen: list[int]) -> None:
        self._add(self.other, chosen)

    @rule(text=st.sampled_from(["from elsewhere", "a plain append"]))
    def a_plain_append(self, text: str) -> None:
        """A writer that is not an SDK session: its message reads as the equivalent item."""
        self.tk.get_or_create_session(KEY)
        self.tk.append(KEY, "user", text)
        run_async(self.reference.add_items([{"role": "user", "content": text}]))

    @rule(limit=limits)
    def ours_reads(self, limit: int | None) -> None:
        got = run_async(self.ours.get_items(limit))
        assert _text(got) == _text(run_async(self.reference.get_items(limit)))
        self.handed_out = got

    @rule(limit=limits)
    def the_caller_changes_what_it_got(self, limit: int | None) -> None:
        """What a caller does to the items it got never reaches what is remembered: the next
        read gives them as they were stored."""
        for item in self.handed_out:
            item["changed"] = True
            content = item.get("content")
            if isinstance(content, list) and content:
                content[0]["text"] = "changed"
                content.append({"type": "output_text", "text": "added"})
        self.ours_reads(limit)

    @rule(popper=st.sampled_from(["ours", "other"]))
    def pop(self, popper: str) -> None:
        session = self.ours if popper == "ours" else self.other
        popped = run_async(session.pop_item())
        expected = run_async(self.reference.pop_item())
        assert _text([popped]) == _text([expected])

    @rule(clearer=st.sampled_from(["ours", "other"]))
    def clear(self, clearer: str) -> None:
        run_async((self.ours if clearer == "ours" else self.other).clear_session())
        run_async(self.reference.clear_session())

    @invariant()
    def a_fresh_object_agrees(self) -> None:
        """What is stored is what the reference holds (a new object remembers nothing)."""
        if hasattr(self, "tk"):
            fresh = run_async(TurnkeeperSession(KEY, self.tk).get_items())
            assert _text(fresh) == _text(run_async(self.reference.get_items()))


AdapterAgainstTheSDK.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_the_adapter_answers_as_the_sdks_session_does = AdapterAgainstTheSDK.TestCase
