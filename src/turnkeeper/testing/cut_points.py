"""The contract of `CutPointStore`: a session's cut point, kept with it, moved by compare-and-set.

Its store fixture needs `ForkStore` too: a branch starts at its source's cut point.
"""

from __future__ import annotations

from typing import Protocol

from turnkeeper.storage.base import CutPointStore, ForkStore, Store
from turnkeeper.testing.values import LATER, MISSING, NOW, draft, new_session
from turnkeeper.types import Session


class _CutPoints(Store, CutPointStore, ForkStore, Protocol): ...


def _session_of(store: _CutPoints, messages: int) -> Session:
    session = store.create_session(new_session(), now=NOW)
    store.append_messages(session.id, [draft(f"m{i}") for i in range(messages)], now=NOW)
    return store.get_session(session.id)


class CutPointContract:
    """`CutPointStore`: the cut point is read with the session and moved only from the
    version a window was built at; deletions under it and branches past it start over."""

    def test_a_new_session_has_no_cut_point(self, store: _CutPoints) -> None:
        assert store.create_session(new_session(), now=NOW).cut_seq == 0

    def test_a_move_at_the_current_version_is_kept_without_bumping_it(
        self, store: _CutPoints
    ) -> None:
        session = _session_of(store, 6)
        assert store.move_cut_point(session.id, 4, version=session.version)
        moved = store.get_session(session.id)
        assert moved.cut_seq == 4
        assert (moved.version, moved.updated_at) == (session.version, session.updated_at)
        assert store.move_cut_point(session.id, 5, version=session.version)
        assert store.get_session(session.id).cut_seq == 5

    def test_a_move_from_an_older_version_or_of_a_missing_session_changes_nothing(
        self, store: _CutPoints
    ) -> None:
        session = _session_of(store, 3)
        store.append_messages(session.id, [draft("newer")], now=LATER)
        assert not store.move_cut_point(session.id, 2, version=session.version)
        assert store.get_session(session.id).cut_seq == 0
        assert not store.move_cut_point(MISSING, 2, version=0)

    def test_reset_and_undo_past_the_cut_point_put_it_back_to_none(self, store: _CutPoints) -> None:
        session = _session_of(store, 6)
        assert store.move_cut_point(session.id, 5, version=session.version)
        store.delete_last_message(session.id, now=LATER)  # seq 6: the cut stays
        undone = store.get_session(session.id)
        assert undone.cut_seq == 5
        store.delete_last_message(session.id, now=LATER)  # seq 5: the cut is gone with it
        assert store.get_session(session.id).cut_seq == 0
        again = store.get_session(session.id)
        assert store.move_cut_point(session.id, 3, version=again.version)
        reset = store.reset_session(session.id, keep_system_message=False, now=LATER)
        assert reset.cut_seq == 0 == store.get_session(session.id).cut_seq

    def test_a_branch_starts_at_its_sources_cut_point_unless_it_forks_before_it(
        self, store: _CutPoints
    ) -> None:
        source = _session_of(store, 8)
        assert store.move_cut_point(source.id, 5, version=source.version)
        after = store.fork_session(source.id, 6, new_session(), now=LATER)
        before = store.fork_session(source.id, 4, new_session(), now=LATER)
        assert after.cut_seq == 5 == store.get_session(after.id).cut_seq
        assert before.cut_seq == 0 == store.get_session(before.id).cut_seq
        assert store.get_session(source.id).cut_seq == 5
