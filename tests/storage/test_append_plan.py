"""`MessageDraft.stored_as` names every field of a `Message` by hand (one constructor call, no
loop over the fields: it runs once per appended message). A field added to both types and
left out of it would be stored as its default: every field the two share must arrive, for a
draft with every field set to something other than its default, through `plan_append` as
every store appends."""

from __future__ import annotations

from dataclasses import fields
from datetime import timedelta

from turnkeeper.storage.appends import AppendTarget, plan_append
from turnkeeper.testing.values import NOW, draft
from turnkeeper.types import Message, MessageDraft, Role, SessionStatus, Usage

SHARED = sorted({f.name for f in fields(Message)} & {f.name for f in fields(MessageDraft)})


def test_a_planned_message_carries_every_field_of_its_draft() -> None:
    full = draft(
        "",
        role=Role.ASSISTANT,
        tokens=7,
        author="helper",
        internal=True,
        usage=Usage(3, 4, 2, 1),
        tool_calls=(
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        ),
        metadata={"k": ["v", 1]},
        tool_call_id="call-1",
        created_at=NOW + timedelta(seconds=1),
        trace='{"window": []}',
    )
    defaults = MessageDraft(id="d", role=Role.USER, content="x", created_at=NOW, tokens=0)
    assert all(getattr(full, name) != getattr(defaults, name) for name in SHARED if name != "id")
    target = AppendTarget(
        id="s", status=SessionStatus.ACTIVE, expires_at=None, last_seq=4, version=5
    )
    plan = plan_append(target, [full, draft("plain")], {}, expected_last_seq=None, now=NOW)
    (message, _) = plan.added
    assert {name: getattr(message, name) for name in SHARED} == {
        name: getattr(full, name) for name in SHARED
    }
    assert (message.session_id, message.seq) == ("s", 5)
    assert [m.seq for m in plan.added] == [5, 6]
    assert plan.traces == [(5, '{"window": []}')]
