"""The rule of a remembered history (`cache.histories.RememberedHistory`): when it may stand for
the session (the OpenAI Agents adapter's agent loop answers `get_items` from it)."""

from __future__ import annotations

import dataclasses

from tests.context.helpers import T0, msg
from turnkeeper.cache.histories import LONGEST_REMEMBERED, RememberedHistory
from turnkeeper.types import Session, SessionStatus


def session(version: int, last_seq: int) -> Session:
    return Session(
        id="s1", project="p", status=SessionStatus.ACTIVE, created_at=T0, updated_at=T0,
        version=version, last_seq=last_seq, message_count=last_seq,
    )  # fmt: skip


def read_at(version: int, last_seq: int) -> RememberedHistory:
    newest = [msg(seq, "user", f"turn {seq}") for seq in range(last_seq, 0, -1)]
    remembered = RememberedHistory.of(session(version, last_seq), newest)
    assert remembered is not None
    return remembered


def test_an_unchanged_session_is_its_history() -> None:
    remembered = read_at(7, 3)
    assert remembered.as_of(session(7, 3)) == remembered.newest


def test_the_appends_of_this_reader_continue_the_history() -> None:
    grown = read_at(7, 3).after_append([msg(4, "user", "next")])
    assert grown is not None
    now = grown.as_of(session(8, 4))
    assert now is not None and [m.seq for m in now] == [4, 3, 2, 1]


def test_a_second_append_is_a_second_write_and_ends_the_memory() -> None:
    grown = read_at(7, 3).after_append([msg(4, "user", "next")])
    assert grown is not None
    assert grown.after_append([msg(5, "user", "and next")]) is None


def test_a_retry_of_stored_messages_changes_nothing() -> None:
    remembered = read_at(7, 3)
    assert remembered.after_append([msg(2, "user", "turn 2")]) is remembered


def test_an_append_after_another_writers_is_not_its_continuation() -> None:
    assert read_at(7, 3).after_append([msg(5, "user", "after someone's seq 4")]) is None
    other = dataclasses.replace(msg(4, "user", "elsewhere"), session_id="s2")
    assert read_at(7, 3).after_append([other]) is None


def test_any_other_write_reads_from_the_store() -> None:
    remembered = read_at(7, 3)
    grown = remembered.after_append([msg(4, "user", "next")])
    assert grown is not None
    assert remembered.as_of(session(8, 3)) is None  # an edit: no append to account for it
    assert grown.as_of(session(9, 4)) is None  # the append and one more write
    assert grown.as_of(session(8, 5)) is None  # more messages than this reader added
    assert grown.as_of(session(7, 3)) is None  # an append that moved no version
    assert remembered.as_of(dataclasses.replace(session(7, 3), id="s2")) is None


def test_only_a_whole_history_that_is_not_too_long_is_remembered() -> None:
    two = [msg(2, "user", "b"), msg(1, "user", "a")]
    assert RememberedHistory.of(session(5, 3), two) is None  # it does not end at last_seq
    late = [msg(3, "user", "written after the row was read"), *two]
    held = RememberedHistory.of(session(5, 2), late)
    assert held is not None and [m.seq for m in held.newest] == [2, 1]
    long = [msg(seq, "user", "x") for seq in range(LONGEST_REMEMBERED + 1, 0, -1)]
    assert RememberedHistory.of(session(5, LONGEST_REMEMBERED + 1), long) is None
