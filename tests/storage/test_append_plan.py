"""`plan_append` writes out `MessageDraft.stored_as` field by field (the `getattr` loop of
`stored_as` was a measurable share of a large append): the two must make the same message, for
a draft with every field set to something other than its default (so a field the plan
left out would show) and for one with the defaults."""

from __future__ import annotations

from turnkeeper.storage.appends import AppendTarget, plan_append
from turnkeeper.testing.values import NOW, draft
from turnkeeper.types import Role, SessionStatus, Usage


def test_planned_messages_are_the_drafts_stored_as() -> None:
    full = draft(
        "",
        role=Role.ASSISTANT,
        tokens=7,
        author="helper",
        internal=True,
        usage=Usage(3, 4),
        tool_calls=(
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        ),
        metadata={"k": ["v", 1]},
        trace='{"window": []}',
    )
    plain = draft("plain")
    target = AppendTarget(id="s", status=SessionStatus.ACTIVE, expires_at=None, last_seq=4)
    plan = plan_append(target, [full, plain], {}, expected_last_seq=None, now=NOW)
    assert plan.added == [full.stored_as("s", 5), plain.stored_as("s", 6)]
    assert plan.traces == [(5, '{"window": []}')]
