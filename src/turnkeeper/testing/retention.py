"""The contract of `RetentionStore`: a session that lives on loses its old messages and what
holds their text, keeps its seqs, and is left as it is under a legal hold.

Its store fixture needs the capabilities whose rows hold a message's text (summary checkpoints,
traces) and `ErasureStore` (the holds).
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Protocol

import pytest

from turnkeeper.errors import SessionNotFound
from turnkeeper.storage.base import (
    CutPointStore,
    ErasureStore,
    RetentionStore,
    Store,
    SummaryStore,
    TraceStore,
)
from turnkeeper.testing.values import MISSING, NOW, draft, new_session
from turnkeeper.types import MessageDraft, Role, Session, SummaryCheckpoint, Usage


class _Retaining(
    Store, RetentionStore, SummaryStore, TraceStore, ErasureStore, CutPointStore, Protocol
): ...


OLD = NOW - timedelta(days=400)
CUTOFF = NOW - timedelta(days=365)
RECENT = NOW - timedelta(days=2)


def _old_reply(content: str, seq: int, *, tokens: int) -> MessageDraft:
    trace = f'{{"w": "canary {seq}"}}'
    return draft(
        content, role=Role.ASSISTANT, created_at=OLD, usage=Usage(100, 10), tokens=tokens,
        trace=trace,
    )  # fmt: skip


def _long_session(store: _Retaining) -> Session:
    """Seqs 1-4 written long ago (2 and 4 replies with traces and usage), seqs 5-6 lately (6 a
    reply with its trace); checkpoints covering 2 and 5; the cut point at 3."""
    session = store.create_session(new_session(f"retention-{uuid.uuid4().hex[:8]}"), now=OLD)
    store.append_messages(
        session.id,
        [
            draft("canary old question", created_at=OLD, tokens=4),
            _old_reply("canary old answer", 2, tokens=5),
            draft("canary old follow-up", created_at=OLD, tokens=6),
            _old_reply("canary old reply", 4, tokens=7),
        ],
        now=OLD,
    )
    store.append_messages(
        session.id,
        [
            draft("recent question", created_at=RECENT, tokens=8),
            draft(
                "recent answer",
                role=Role.ASSISTANT,
                created_at=RECENT,
                tokens=9,
                usage=Usage(40, 4),
                trace='{"w": "holds a summary of canary"}',
            ),
        ],
        now=RECENT,
    )
    for covers, text in ((2, "canary summary to 2"), (5, "canary summary to 5")):
        store.save_summary(SummaryCheckpoint(session.id, covers, text, 3, "extractive", RECENT))
    current = store.get_session(session.id)
    assert store.move_cut_point(session.id, 3, version=current.version)
    return store.get_session(session.id)


class RetentionContract:
    """`RetentionStore`: old messages go with their checkpoints and traces; seqs stay."""

    def test_old_messages_go_and_the_newer_stay_with_their_seqs(self, store: _Retaining) -> None:
        session = _long_session(store)
        assert store.count_messages_before(session.id, CUTOFF) == 4
        assert store.delete_messages_before(session.id, CUTOFF) == 4
        left = store.read_messages(session.id)
        assert [(m.seq, m.content) for m in left] == [
            (5, "recent question"),
            (6, "recent answer"),
        ]
        assert store.count_messages_before(session.id, CUTOFF) == 0
        assert store.find_messages(session.id, [m.id for m in left]).keys() == {m.id for m in left}
        assert store.count_messages(session.id) == 2

    def test_checkpoints_and_traces_that_may_hold_old_text_go(self, store: _Retaining) -> None:
        session = _long_session(store)
        store.delete_messages_before(session.id, CUTOFF)
        assert store.list_summaries(session.id) == []
        assert store.latest_summary(session.id) is None
        assert store.read_traces(session.id, upto_seq=10, limit=10) == []

    def test_totals_and_version_move_while_seq_cut_point_and_last_change_stay(
        self, store: _Retaining
    ) -> None:
        session = _long_session(store)
        store.delete_messages_before(session.id, CUTOFF)
        after = store.get_session(session.id)
        assert (after.message_count, after.stored_tokens) == (2, 17)
        assert (after.usage_input_tokens, after.usage_output_tokens) == (40, 4)
        assert after.version > session.version
        assert (after.last_seq, after.cut_seq, after.updated_at) == (
            session.last_seq,
            session.cut_seq,
            session.updated_at,
        )

    def test_an_append_after_goes_after_the_last_seq_and_the_last_can_be_taken_back(
        self, store: _Retaining
    ) -> None:
        session = _long_session(store)
        store.delete_messages_before(session.id, NOW)  # every message
        emptied = store.get_session(session.id)
        assert (emptied.message_count, emptied.last_seq, emptied.stored_tokens) == (0, 6, 0)
        assert store.delete_last_message(session.id, now=NOW) is None
        [added] = store.append_messages(session.id, [draft("new", created_at=NOW)], now=NOW)
        assert added.seq == 7
        taken = store.delete_last_message(session.id, now=NOW)
        assert taken is not None and taken.seq == 7
        assert store.read_messages(session.id) == []

    def test_nothing_old_changes_nothing(self, store: _Retaining) -> None:
        session = _long_session(store)
        assert store.delete_messages_before(session.id, OLD - timedelta(days=1)) == 0
        assert store.get_session(session.id) == session
        assert len(store.list_summaries(session.id)) == 2

    def test_a_legal_hold_on_the_session_or_its_project_keeps_everything(
        self, store: _Retaining
    ) -> None:
        held = _long_session(store)
        store.set_session_hold(held.id, True, now=NOW)
        in_held_project = _long_session(store)
        store.set_project_hold(in_held_project.project, True, now=NOW)
        try:
            for session in (held, in_held_project):
                assert store.delete_messages_before(session.id, CUTOFF) is None
                assert len(store.read_messages(session.id)) == 6
                assert len(store.list_summaries(session.id)) == 2
                assert store.get_session(session.id).version == session.version
        finally:
            store.set_project_hold(in_held_project.project, False, now=NOW)
        assert store.delete_messages_before(in_held_project.id, CUTOFF) == 4

    def test_a_missing_session_is_not_found_and_has_no_old_messages(
        self, store: _Retaining
    ) -> None:
        with pytest.raises(SessionNotFound):
            store.delete_messages_before(MISSING, CUTOFF)
        assert store.count_messages_before(MISSING, CUTOFF) == 0
