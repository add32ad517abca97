"""Tool-call units and the newest-first view strategies select from."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from tests.context.helpers import call, chat, msg
from turnkeeper.context.history import ListHistory
from turnkeeper.context.units import Turns, Unit, group_newest_first
from turnkeeper.types import ContextMessage, Message


def as_context(message: Message) -> ContextMessage:
    return ContextMessage(
        role=message.role,
        content=message.content,
        tokens=message.tokens,
        seq=message.seq,
        message_id=message.id,
        tool_calls=message.tool_calls,
        tool_call_id=message.tool_call_id,
    )


def grouped(messages: Sequence[Message]) -> list[tuple[list[int | None], bool]]:
    stream = (as_context(m) for m in reversed(messages))
    return [([m.seq for m in unit.messages], unit.orphan) for unit in group_newest_first(stream)]


def test_assistant_call_and_its_results_form_one_unit() -> None:
    messages = [
        msg(1, "user", "weather?"),
        msg(2, "assistant", tool_calls=[call("c1"), call("c2")]),
        msg(3, "tool", "sunny", tool_call_id="c1"),
        msg(4, "tool", "warm", tool_call_id="c2"),
        msg(5, "assistant", "Sunny and warm."),
    ]
    assert grouped(messages) == [([5], False), ([2, 3, 4], False), ([1], False)]


def test_tool_result_after_a_plain_message_is_an_orphan() -> None:
    messages = [
        msg(1, "assistant", tool_calls=[call("c1")]),
        msg(2, "user", "never mind"),
        msg(3, "tool", "late", tool_call_id="c1"),
    ]
    assert grouped(messages) == [([3], True), ([2], False), ([1], False)]


def test_result_of_another_call_is_an_orphan_but_the_unit_keeps_its_later_results() -> None:
    messages = [
        msg(1, "assistant", tool_calls=[call("c1"), call("c2")]),
        msg(2, "tool", "a", tool_call_id="c1"),
        msg(3, "tool", "stray", tool_call_id="zz"),
        msg(4, "tool", "b", tool_call_id="c2"),
    ]
    assert grouped(messages) == [([1, 2, 4], False), ([3], True)]


def test_tool_results_at_the_very_start_are_orphans() -> None:
    messages = [msg(1, "tool", "x", tool_call_id="c0"), msg(2, "user", "hi")]
    assert grouped(messages) == [([2], False), ([1], True)]


def test_grouping_reads_at_most_one_message_beyond_the_units_it_yields() -> None:
    messages = chat(*[("user", f"u{i}") for i in range(50)])
    read: list[int] = []

    def stream() -> Iterator[ContextMessage]:
        for message in reversed(messages):
            read.append(message.seq)
            yield as_context(message)

    units = group_newest_first(stream())
    taken = [next(units) for _ in range(3)]
    assert [unit.messages[0].seq for unit in taken] == [50, 49, 48]
    assert len(read) == 3


def test_unit_counts_tokens_and_stored_messages() -> None:
    pending = ContextMessage(role=msg(1, "user").role, content="hi", tokens=4, kind="pending")
    unit = Unit((as_context(msg(1, "user", "hello")), pending))
    assert unit.tokens == msg(1, "user", "hello").tokens + 4
    assert unit.stored == 1


def test_pending_with_the_id_of_the_newest_stored_message_is_not_added_again() -> None:
    messages = chat(("user", "a"), ("assistant", "b"), ("user", "c"))
    pending = ContextMessage(
        role=messages[-1].role, content="c", tokens=1, kind="pending", message_id="m3"
    )
    trigger, older = Turns(ListHistory(messages), render=as_context, pending=pending).units()
    assert [m.seq for m in trigger.messages] == [3]
    assert [u.messages[0].seq for u in older] == [2, 1]


def test_total_counts_unread_messages_without_reading_them() -> None:
    history = ListHistory(chat(*[("user", f"u{i}") for i in range(100)]))
    turns = Turns(history, render=as_context)
    _, older = turns.units()
    next(older)
    assert turns.total() == 100
    assert history.messages_loaded == 2


def test_opening_is_none_when_the_only_message_is_the_trigger() -> None:
    turns = Turns(ListHistory(chat(("system", "sys"))), render=as_context)
    assert turns.opening() is None
