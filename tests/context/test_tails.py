"""The rule of a remembered tail (`context.tails.Tail`): when it may stand for the session."""

from __future__ import annotations

import dataclasses

from tests.context.helpers import T0, msg
from turnkeeper.context.tails import Tail
from turnkeeper.types import Session, SessionStatus


def tail_at(version: int, last_seq: int, *, include_internal: bool = True) -> Tail:
    newest = tuple(msg(seq, "user", f"turn {seq}") for seq in range(last_seq, 0, -1))
    return Tail(
        version=version, last_seq=last_seq, include_internal=include_internal, newest=newest,
        reaches_start=True, head=newest[-1] if newest else None, encoding="o200k_base",
        rendered={},
    )  # fmt: skip


def session(version: int, last_seq: int) -> Session:
    return Session(
        id="s1", project="p", status=SessionStatus.ACTIVE, created_at=T0, updated_at=T0,
        version=version, last_seq=last_seq, message_count=last_seq,
    )  # fmt: skip


def test_an_unchanged_session_is_its_tail() -> None:
    tail = tail_at(7, 3)
    assert tail.view(session(7, 3), True) == tail.newest


def test_the_appends_of_this_service_continue_the_tail() -> None:
    tail = tail_at(7, 3).after_append([msg(4, "user", "next")])
    assert tail is not None
    view = tail.view(session(8, 4), True)
    assert view is not None and [m.seq for m in view] == [4, 3, 2, 1]


def test_internal_appends_stay_out_of_a_view_without_them() -> None:
    tail = tail_at(7, 3, include_internal=False).after_append(
        [dataclasses.replace(msg(4, "system", "note"), internal=True), msg(5, "user", "next")]
    )
    assert tail is not None
    view = tail.view(session(8, 5), False)
    assert view is not None and [m.seq for m in view] == [5, 3, 2, 1]
    assert tail.view(session(8, 5), True) is None  # the other view was not read


def test_a_second_append_is_a_second_write_and_ends_the_tail() -> None:
    grown = tail_at(7, 3).after_append([msg(4, "user", "next")])
    assert grown is not None
    assert grown.after_append([msg(5, "user", "and next")]) is None


def test_a_retry_of_stored_messages_changes_nothing() -> None:
    tail = tail_at(7, 3)
    assert tail.after_append([msg(2, "user", "turn 2")]) is tail


def test_an_append_after_another_writers_is_not_the_tails_continuation() -> None:
    assert tail_at(7, 3).after_append([msg(5, "user", "after someone's seq 4")]) is None


def test_any_other_write_reads_from_the_store() -> None:
    tail = tail_at(7, 3)
    grown = tail.after_append([msg(4, "user", "next")])
    assert grown is not None
    assert tail.view(session(8, 3), True) is None  # an edit: no append to account for it
    assert grown.view(session(9, 4), True) is None  # the append and one more write
    assert grown.view(session(8, 5), True) is None  # more messages than this service added
    assert grown.view(session(7, 3), True) is None  # an append that moved no version
