"""`StoreContract`: what every `Store` keeps — sessions and their ordered message logs."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest

from turnkeeper.errors import Conflict, InvalidInput, SeqConflict, SessionExpired, SessionNotFound
from turnkeeper.storage.base import Store
from turnkeeper.testing.values import LATER, MISSING, NOW, draft, new_session
from turnkeeper.types import MessageQuery, Role, SessionFilter, SessionPatch, SessionStatus, Usage


class StoreContract:
    """The core contract. Subclass it and provide a `store` fixture yielding a fresh store."""

    # -- sessions ---------------------------------------------------------------------------

    def test_a_new_session_is_active_with_a_uuid_zero_totals_and_the_fields_given(
        self, store: Store
    ) -> None:
        session = store.create_session(
            new_session(
                "acme",
                key="k-1",
                title="Fix it",
                subject="ticket-7",
                kind="dev-task",
                phase="plan",
                expires_at=NOW + timedelta(hours=1),
                metadata={"agent": {"id": "a1"}},
            ),
            now=NOW,
        )
        assert len(session.id) == 36 and session.id.count("-") == 4
        assert (session.project, session.key, session.title) == ("acme", "k-1", "Fix it")
        assert (session.subject, session.kind, session.phase) == ("ticket-7", "dev-task", "plan")
        assert session.status is SessionStatus.ACTIVE
        assert session.created_at == session.updated_at == NOW
        assert session.expires_at == NOW + timedelta(hours=1)
        assert session.metadata == {"agent": {"id": "a1"}}
        assert (session.message_count, session.last_seq, session.stored_tokens) == (0, 0, 0)
        assert (session.usage_input_tokens, session.usage_output_tokens) == (0, 0)
        assert session.version == 0
        assert store.get_session(session.id) == session

    def test_a_missing_session_is_session_not_found_naming_it(self, store: Store) -> None:
        for call in (
            lambda: store.get_session(MISSING),
            lambda: store.update_session(MISSING, SessionPatch(title="x"), now=NOW),
            lambda: store.set_status(MISSING, SessionStatus.ARCHIVED, now=NOW),
            lambda: store.reset_session(MISSING, keep_system_message=False, now=NOW),
            lambda: store.delete_session(MISSING),
            lambda: store.append_messages(MISSING, [draft()], now=NOW),
            lambda: store.delete_last_message(MISSING, now=NOW),
        ):
            with pytest.raises(SessionNotFound, match=MISSING):
                call()
        with pytest.raises(SessionNotFound, match="nope"):
            store.find_session_by_key("contract", "nope")

    def test_reads_of_a_missing_sessions_messages_find_none(self, store: Store) -> None:
        assert store.read_messages(MISSING) == []
        assert store.count_messages(MISSING) == 0
        assert store.find_messages(MISSING, ["m-1"]) == {}

    def test_a_key_is_unique_among_the_live_sessions_of_a_project(self, store: Store) -> None:
        first = store.create_session(new_session("p1", key="k"), now=NOW)
        with pytest.raises(Conflict, match="'k'"):
            store.create_session(new_session("p1", key="k"), now=NOW)
        other = store.create_session(new_session("p2", key="k"), now=NOW)
        assert other.project == "p2"
        keyless = [store.create_session(new_session("p1"), now=NOW) for _ in range(2)]
        assert keyless[0].id != keyless[1].id and keyless[0].key is None
        assert store.find_session_by_key("p1", "k") == first

    def test_archiving_or_deleting_a_session_frees_its_key(self, store: Store) -> None:
        archived = store.create_session(new_session(key="k"), now=NOW)
        store.set_status(archived.id, SessionStatus.ARCHIVED, now=NOW)
        successor = store.create_session(new_session(key="k"), now=LATER)
        store.delete_session(successor.id)
        third = store.create_session(new_session(key="k"), now=LATER)
        assert len({archived.id, successor.id, third.id}) == 3
        assert store.find_session_by_key("contract", "k").id == third.id

    def test_a_live_holder_past_its_expiry_yields_its_key_to_a_new_session(
        self, store: Store
    ) -> None:
        stale = store.create_session(
            new_session(key="k", expires_at=NOW + timedelta(minutes=1)), now=NOW
        )
        fresh = store.create_session(new_session(key="k"), now=NOW + timedelta(minutes=1))
        old = store.get_session(stale.id)
        assert old.status is SessionStatus.EXPIRED and old.version > stale.version
        assert store.find_session_by_key("contract", "k").id == fresh.id

    def test_get_or_create_returns_the_live_holder_or_creates_one(self, store: Store) -> None:
        first, created = store.get_or_create_session(new_session(key="c", title="a"), now=NOW)
        again, created_again = store.get_or_create_session(
            new_session(key="c", title="ignored"), now=LATER
        )
        assert created and not created_again
        assert again == first and again.title == "a"

    def test_get_or_create_replaces_an_expired_holder_which_stays_readable(
        self, store: Store
    ) -> None:
        old, _ = store.get_or_create_session(
            new_session(key="c", expires_at=NOW + timedelta(hours=1)), now=NOW
        )
        store.append_messages(old.id, [draft("remember me")], now=NOW)
        new, created = store.get_or_create_session(
            new_session(key="c"), now=NOW + timedelta(hours=2)
        )
        assert created and new.id != old.id
        assert store.get_session(old.id).status is SessionStatus.EXPIRED
        assert [m.content for m in store.read_messages(old.id)] == ["remember me"]

    def test_get_or_create_without_a_key_is_a_value_error(self, store: Store) -> None:
        with pytest.raises(ValueError, match="key"):
            store.get_or_create_session(new_session(), now=NOW)

    def test_find_by_key_prefers_the_live_session_then_the_latest_updated(
        self, store: Store
    ) -> None:
        older = store.create_session(new_session(key="k"), now=NOW)
        store.set_status(older.id, SessionStatus.ARCHIVED, now=NOW)
        newer = store.create_session(new_session(key="k"), now=NOW)
        assert store.find_session_by_key("contract", "k").id == newer.id
        store.set_status(newer.id, SessionStatus.ARCHIVED, now=LATER)
        assert store.find_session_by_key("contract", "k").id == newer.id
        store.update_session(
            older.id, SessionPatch(title="touched"), now=LATER + timedelta(seconds=1)
        )
        assert store.find_session_by_key("contract", "k").id == older.id
        with pytest.raises(SessionNotFound):
            store.find_session_by_key("other-project", "k")

    def test_update_changes_only_the_given_fields_and_bumps_time_and_version(
        self, store: Store
    ) -> None:
        session = store.create_session(new_session(title="t", phase="plan"), now=NOW)
        updated = store.update_session(
            session.id, SessionPatch(phase="build", metadata={"n": 1}), now=LATER
        )
        assert (updated.title, updated.phase, updated.metadata) == ("t", "build", {"n": 1})
        assert updated.updated_at == LATER and updated.version == session.version + 1
        cleared = store.update_session(session.id, SessionPatch(title=None), now=LATER)
        assert cleared.title is None and cleared.phase == "build"
        assert store.get_session(session.id) == cleared

    def test_set_status_moves_between_active_archived_and_expired(self, store: Store) -> None:
        session = store.create_session(new_session(key="k"), now=NOW)
        archived = store.set_status(session.id, SessionStatus.ARCHIVED, now=LATER)
        assert archived.status is SessionStatus.ARCHIVED
        assert archived.updated_at == LATER and archived.version == session.version + 1
        active = store.set_status(session.id, SessionStatus.ACTIVE, now=LATER)
        assert active.status is SessionStatus.ACTIVE
        expired = store.set_status(session.id, SessionStatus.EXPIRED, now=LATER)
        assert store.get_session(session.id) == expired
        assert expired.status is SessionStatus.EXPIRED

    def test_reactivating_while_another_session_holds_the_key_is_a_conflict(
        self, store: Store
    ) -> None:
        old = store.create_session(new_session(key="k"), now=NOW)
        store.set_status(old.id, SessionStatus.ARCHIVED, now=NOW)
        store.create_session(new_session(key="k"), now=NOW)
        with pytest.raises(Conflict):
            store.set_status(old.id, SessionStatus.ACTIVE, now=LATER)
        assert store.get_session(old.id).status is SessionStatus.ARCHIVED

    def test_delete_removes_the_session_and_its_messages(self, store: Store) -> None:
        session = store.create_session(new_session(), now=NOW)
        kept = store.create_session(new_session(), now=NOW)
        store.append_messages(session.id, [draft(id="m-1")], now=NOW)
        store.append_messages(kept.id, [draft(id="m-1")], now=NOW)
        store.delete_session(session.id)
        with pytest.raises(SessionNotFound):
            store.get_session(session.id)
        assert store.read_messages(session.id) == []
        assert store.find_messages(session.id, ["m-1"]) == {}
        assert [m.id for m in store.read_messages(kept.id)] == ["m-1"]

    def test_meta_keeps_the_first_value_asked_for(self, store: Store) -> None:
        assert store.meta("encoding", "o200k_base") == "o200k_base"
        assert store.meta("encoding", "cl100k_base") == "o200k_base"
        assert store.meta("other", "x") == "x"

    # -- listing ----------------------------------------------------------------------------

    def test_list_filters_and_orders_by_last_update_newest_first(self, store: Store) -> None:
        a = store.create_session(new_session("p", kind="chat", subject="s1"), now=NOW)
        b = store.create_session(new_session("p", kind="task"), now=NOW + timedelta(seconds=1))
        c = store.create_session(new_session("q", kind="chat"), now=NOW + timedelta(seconds=2))
        store.update_session(a.id, SessionPatch(phase="done"), now=NOW + timedelta(seconds=3))
        everything = store.list_sessions(SessionFilter(), limit=10)
        assert [s.id for s in everything.items] == [a.id, c.id, b.id]
        assert everything.next_cursor is None
        in_p = store.list_sessions(SessionFilter(project="p"), limit=10).items
        assert [s.id for s in in_p] == [a.id, b.id]
        chats = store.list_sessions(SessionFilter(kind="chat"), limit=10).items
        assert [s.id for s in chats] == [a.id, c.id]
        assert [s.id for s in store.list_sessions(SessionFilter(phase="done"), limit=10).items] == [
            a.id
        ]
        assert [s.id for s in store.list_sessions(SessionFilter(subject="s1"), limit=10).items] == [
            a.id
        ]
        since = store.list_sessions(
            SessionFilter(updated_since=NOW + timedelta(seconds=2)), limit=10
        ).items
        assert [s.id for s in since] == [a.id, c.id]
        store.set_status(b.id, SessionStatus.ARCHIVED, now=NOW + timedelta(seconds=1))
        archived = store.list_sessions(SessionFilter(status=SessionStatus.ARCHIVED), limit=10)
        assert [s.id for s in archived.items] == [b.id]

    def test_search_matches_key_subject_or_title_ignoring_case(self, store: Store) -> None:
        by_key = store.create_session(new_session(key="Invoice-42"), now=NOW)
        by_title = store.create_session(new_session(title="the INVOICE run"), now=NOW)
        by_subject = store.create_session(new_session(subject="invoices"), now=NOW)
        store.create_session(new_session(title="unrelated"), now=NOW)
        store.create_session(new_session(title="100% done_"), now=NOW)
        found = store.list_sessions(SessionFilter(search="invoice"), limit=10).items
        assert {s.id for s in found} == {by_key.id, by_title.id, by_subject.id}
        # `%` and `_` are plain characters, not wildcards ("e_" would match "e-4" otherwise).
        for literal in ("0% d", "e_"):
            found = store.list_sessions(SessionFilter(search=literal), limit=10).items
            assert [s.title for s in found] == ["100% done_"]

    def test_cursor_pages_visit_every_session_once_in_order(self, store: Store) -> None:
        ids = []
        for i in range(7):
            # Pairs share an updated_at, so ties (broken by id) cross page boundaries.
            at = NOW + timedelta(seconds=i // 2)
            ids.append(store.create_session(new_session(), now=at).id)
        expected = [
            s.id
            for s in sorted(
                (store.get_session(i) for i in ids),
                key=lambda s: (s.updated_at, s.id),
                reverse=True,
            )
        ]
        seen: list[str] = []
        cursor = None
        for _ in range(10):
            page = store.list_sessions(SessionFilter(), limit=3, cursor=cursor)
            assert len(page.items) <= 3
            seen.extend(s.id for s in page.items)
            cursor = page.next_cursor
            if cursor is None:
                break
        assert seen == expected

    def test_a_cursor_the_store_did_not_make_is_invalid_input(self, store: Store) -> None:
        with pytest.raises(InvalidInput) as raised:
            store.list_sessions(SessionFilter(), limit=3, cursor="not-a-cursor!")
        assert raised.value.field == "cursor"

    # -- appending --------------------------------------------------------------------------

    def test_append_gives_gapless_seqs_from_one_and_keeps_every_field(self, store: Store) -> None:
        session = store.create_session(new_session(), now=NOW)
        first = draft(
            "hi",
            id="m-1",
            author="ann",
            tokens=5,
            metadata={"lang": "en", "tags": ["a"]},
            created_at=NOW,
        )
        tool = draft("", id="m-2", role=Role.ASSISTANT, tokens=2, usage=Usage(11, 4))
        stored = store.append_messages(session.id, [first, tool], now=LATER)
        assert [(m.id, m.seq, m.session_id) for m in stored] == [
            ("m-1", 1, session.id),
            ("m-2", 2, session.id),
        ]
        m1 = stored[0]
        assert (m1.role, m1.content, m1.author, m1.tokens) == (Role.USER, "hi", "ann", 5)
        assert m1.metadata == {"lang": "en", "tags": ["a"]} and m1.created_at == NOW
        assert stored[1].usage == Usage(11, 4) and stored[1].role is Role.ASSISTANT
        more = store.append_messages(session.id, [draft(id="m-3")], now=LATER)
        assert more[0].seq == 3
        assert store.read_messages(session.id) == [*stored, *more]

    def test_append_adds_to_the_totals_and_bumps_time_and_version(self, store: Store) -> None:
        session = store.create_session(new_session(), now=NOW)
        store.append_messages(
            session.id,
            [draft(tokens=5), draft(tokens=7, role=Role.ASSISTANT, usage=Usage(100, 20))],
            now=LATER,
        )
        after = store.get_session(session.id)
        assert (after.message_count, after.last_seq, after.stored_tokens) == (2, 2, 12)
        assert (after.usage_input_tokens, after.usage_output_tokens) == (100, 20)
        assert after.updated_at == LATER and after.version > session.version

    def test_a_batch_of_thousands_is_stored_whole_in_order_with_its_totals(
        self, store: Store
    ) -> None:
        session = store.create_session(new_session(), now=NOW)
        store.append_messages(session.id, [draft("first")], now=NOW)
        batch = [draft(f"message {n}", tokens=n % 7 + 1) for n in range(2_345)]
        stored = store.append_messages(session.id, batch, now=LATER)
        assert [m.seq for m in stored] == list(range(2, 2_347))
        assert [m.id for m in stored] == [d.id for d in batch]
        assert store.read_messages(session.id, MessageQuery(from_seq=2)) == stored
        after = store.get_session(session.id)
        assert (after.message_count, after.last_seq) == (2_346, 2_346)
        assert after.stored_tokens == 3 + sum(d.tokens for d in batch)

    def test_an_empty_append_stores_nothing_and_returns_nothing(self, store: Store) -> None:
        session = store.create_session(new_session(), now=NOW)
        assert store.append_messages(session.id, [], now=LATER) == []
        assert store.get_session(session.id) == session

    def test_a_retried_id_with_the_same_content_is_returned_as_stored(self, store: Store) -> None:
        session = store.create_session(new_session(), now=NOW)
        (first,) = store.append_messages(session.id, [draft("a", id="m-1")], now=NOW)
        before = store.get_session(session.id)
        retried = store.append_messages(
            session.id, [draft("a", id="m-1", tokens=99, created_at=LATER)], now=LATER
        )
        assert retried == [first]
        assert store.get_session(session.id) == before
        mixed = store.append_messages(
            session.id, [draft("a", id="m-1"), draft("b", id="m-2")], now=LATER
        )
        assert [(m.id, m.seq) for m in mixed] == [("m-1", 1), ("m-2", 2)]

    def test_a_retried_id_with_other_content_is_a_conflict_naming_it(self, store: Store) -> None:
        session = store.create_session(new_session(), now=NOW)
        store.append_messages(session.id, [draft("a", id="m-1")], now=NOW)
        for changed in (
            draft("b", id="m-1"),
            draft("a", id="m-1", role=Role.ASSISTANT),
            draft("a", id="m-1", author="bob"),
            draft("a", id="m-1", internal=True),
            draft("a", id="m-1", metadata={"x": 1}),
            draft("a", id="m-1", usage=Usage(1, 1)),
        ):
            with pytest.raises(Conflict, match="m-1"):
                store.append_messages(session.id, [draft("new"), changed], now=NOW)
        assert [m.content for m in store.read_messages(session.id)] == ["a"]

    def test_one_id_twice_in_a_batch_is_invalid_input_and_nothing_is_stored(
        self, store: Store
    ) -> None:
        session = store.create_session(new_session(), now=NOW)
        with pytest.raises(InvalidInput, match="dup"):
            store.append_messages(session.id, [draft(id="dup"), draft(id="dup")], now=NOW)
        assert store.read_messages(session.id) == []

    def test_message_ids_are_scoped_to_their_session(self, store: Store) -> None:
        one = store.create_session(new_session(), now=NOW)
        two = store.create_session(new_session(), now=NOW)
        store.append_messages(one.id, [draft("in one", id="same")], now=NOW)
        (other,) = store.append_messages(two.id, [draft("in two", id="same")], now=NOW)
        assert (other.session_id, other.content, other.seq) == (two.id, "in two", 1)
        assert store.find_messages(one.id, ["same"])["same"].content == "in one"
        assert store.find_messages(two.id, ["same"])["same"].content == "in two"

    def test_expected_last_seq_must_match_when_something_new_is_written(self, store: Store) -> None:
        session = store.create_session(new_session(), now=NOW)
        store.append_messages(session.id, [draft(id="m-1")], expected_last_seq=0, now=NOW)
        with pytest.raises(SeqConflict) as raised:
            store.append_messages(session.id, [draft(id="m-2")], expected_last_seq=0, now=NOW)
        assert (raised.value.expected, raised.value.actual) == (0, 1)
        assert store.count_messages(session.id) == 1
        # A retry of what is stored already checks nothing: its expected seq is long gone.
        again = store.append_messages(session.id, [draft(id="m-1")], expected_last_seq=0, now=NOW)
        assert again[0].seq == 1
        (second,) = store.append_messages(
            session.id, [draft(id="m-2")], expected_last_seq=1, now=NOW
        )
        assert second.seq == 2

    def test_concurrent_appenders_get_distinct_gapless_seqs(self, store: Store) -> None:
        session = store.create_session(new_session(), now=NOW)

        def append(writer: int) -> list[int]:
            return [
                store.append_messages(session.id, [draft(f"{writer}.{i}")], now=NOW)[0].seq
                for i in range(8)
            ]

        with ThreadPoolExecutor(4) as pool:
            per_writer = list(pool.map(append, range(4)))
        for seqs in per_writer:
            assert seqs == sorted(seqs)  # each writer sees its own appends in order
        assert sorted(seq for seqs in per_writer for seq in seqs) == list(range(1, 33))
        assert [m.seq for m in store.read_messages(session.id)] == list(range(1, 33))
        assert store.get_session(session.id).last_seq == 32

    def test_concurrent_get_or_create_agree_on_one_session(self, store: Store) -> None:
        def get_or_create(_: int) -> tuple[str, bool]:
            session, created = store.get_or_create_session(new_session(key="race"), now=NOW)
            return session.id, created

        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(get_or_create, range(8)))
        assert len({session_id for session_id, _ in results}) == 1
        assert sum(created for _, created in results) == 1

    def test_a_failed_batch_stores_none_of_it(self, store: Store) -> None:
        session = store.create_session(new_session(), now=NOW)
        store.append_messages(session.id, [draft("a", id="m-1")], now=NOW)
        with pytest.raises(Conflict):
            store.append_messages(
                session.id, [draft(id="m-2"), draft("changed", id="m-1")], now=NOW
            )
        assert [m.id for m in store.read_messages(session.id)] == ["m-1"]
        assert store.get_session(session.id).last_seq == 1

    def test_a_refused_append_changes_nothing(self, store: Store) -> None:
        session = store.create_session(new_session(), now=NOW)
        store.append_messages(session.id, [draft("a", id="m-1", trace="t")], now=NOW)
        before = store.get_session(session.id)
        stored = store.read_messages(session.id)
        refusals = (
            ([draft(id="m-2")], 0),  # a stale expected seq
            ([draft(id="m-2"), draft("b", id="m-1")], None),  # a stored id, other content
            ([draft(id="m-2"), draft(id="m-2")], None),  # one id twice
        )
        for drafts, expected_last_seq in refusals:
            with pytest.raises((Conflict, InvalidInput)):
                store.append_messages(
                    session.id, drafts, expected_last_seq=expected_last_seq, now=LATER
                )
            assert store.get_session(session.id) == before
            assert store.read_messages(session.id) == stored
        store.set_status(session.id, SessionStatus.ARCHIVED, now=NOW)
        archived = store.get_session(session.id)
        with pytest.raises(Conflict, match="archived"):
            store.append_messages(session.id, [draft(id="m-2")], now=LATER)
        assert store.get_session(session.id) == archived
        assert store.read_messages(session.id) == stored

    def test_a_retry_mixed_with_new_messages_adds_only_the_new_to_the_totals(
        self, store: Store
    ) -> None:
        session = store.create_session(new_session(), now=NOW)
        first = store.append_messages(
            session.id, [draft("a", id="m-1", tokens=5, usage=Usage(10, 2))], now=NOW
        )
        mixed = store.append_messages(
            session.id,
            [
                draft("b", id="m-2", tokens=7, usage=Usage(30, 4)),
                draft("a", id="m-1", tokens=5, usage=Usage(10, 2)),
            ],
            now=LATER,
        )
        assert [(m.id, m.seq) for m in mixed] == [("m-2", 2), ("m-1", 1)]
        assert mixed[1] == first[0]
        after = store.get_session(session.id)
        assert (after.message_count, after.last_seq, after.stored_tokens) == (2, 2, 12)
        assert (after.usage_input_tokens, after.usage_output_tokens) == (40, 6)
        assert store.read_messages(session.id) == [first[0], mixed[0]]

    def test_appending_to_an_archived_session_is_a_conflict(self, store: Store) -> None:
        session = store.create_session(new_session(), now=NOW)
        store.append_messages(session.id, [draft(id="m-1")], now=NOW)
        store.set_status(session.id, SessionStatus.ARCHIVED, now=NOW)
        with pytest.raises(Conflict, match="archived"):
            store.append_messages(session.id, [draft(id="m-2")], now=NOW)
        assert store.append_messages(session.id, [draft(id="m-1")], now=NOW)[0].seq == 1

    def test_appending_to_an_expired_session_is_session_expired(self, store: Store) -> None:
        due = store.create_session(new_session(expires_at=NOW + timedelta(hours=1)), now=NOW)
        with pytest.raises(SessionExpired):
            store.append_messages(due.id, [draft()], now=NOW + timedelta(hours=1))
        marked = store.create_session(new_session(), now=NOW)
        store.set_status(marked.id, SessionStatus.EXPIRED, now=NOW)
        with pytest.raises(SessionExpired):
            store.append_messages(marked.id, [draft()], now=NOW)
        assert store.count_messages(due.id) == store.count_messages(marked.id) == 0

    def test_returned_values_are_the_callers_own(self, store: Store) -> None:
        session = store.create_session(new_session(metadata={"tags": ["a"]}), now=NOW)
        (message,) = store.append_messages(
            session.id, [draft(id="m-1", metadata={"tags": ["a"]})], now=NOW
        )
        session.metadata["tags"].append("changed")
        message.metadata["tags"].append("changed")
        assert store.get_session(session.id).metadata == {"tags": ["a"]}
        assert store.read_messages(session.id)[0].metadata == {"tags": ["a"]}

    # -- reading ----------------------------------------------------------------------------

    def test_read_messages_by_range_direction_limit_and_visibility(self, store: Store) -> None:
        session = store.create_session(new_session(), now=NOW)
        store.append_messages(
            session.id,
            [draft(f"m{i}", internal=i in (2, 4)) for i in range(1, 7)],
            now=NOW,
        )

        def seqs(**kwargs: Any) -> list[int]:
            return [m.seq for m in store.read_messages(session.id, MessageQuery(**kwargs))]

        assert seqs() == [1, 2, 3, 4, 5, 6]
        assert seqs(from_seq=2, to_seq=4) == [2, 3, 4]
        assert seqs(from_seq=5) == [5, 6] and seqs(to_seq=2) == [1, 2]
        assert seqs(newest_first=True, limit=2) == [6, 5]
        assert seqs(limit=2) == [1, 2]
        assert seqs(include_internal=False) == [1, 3, 5, 6]
        assert seqs(include_internal=False, newest_first=True, limit=3) == [6, 5, 3]
        assert seqs(from_seq=7) == [] and seqs(limit=0) == []

    def test_count_messages_before_a_seq_and_without_internal(self, store: Store) -> None:
        session = store.create_session(new_session(), now=NOW)
        store.append_messages(session.id, [draft(internal=i == 2) for i in range(1, 6)], now=NOW)
        assert store.count_messages(session.id) == 5
        assert store.count_messages(session.id, before_seq=3) == 2
        assert store.count_messages(session.id, before_seq=3, include_internal=False) == 1
        assert store.count_messages(session.id, include_internal=False) == 4

    def test_find_messages_returns_known_ids_of_the_session_only(self, store: Store) -> None:
        session = store.create_session(new_session(), now=NOW)
        stored = store.append_messages(session.id, [draft(id="a"), draft(id="b")], now=NOW)
        found = store.find_messages(session.id, ["b", "zzz", "a"])
        assert found == {"a": stored[0], "b": stored[1]}
        assert store.find_messages(session.id, []) == {}

    # -- reset and undo ---------------------------------------------------------------------

    def test_reset_deletes_the_messages_and_seq_starts_again(self, store: Store) -> None:
        session = store.create_session(new_session(), now=NOW)
        store.append_messages(
            session.id, [draft(role=Role.SYSTEM), draft(usage=Usage(3, 2)), draft()], now=NOW
        )
        reset = store.reset_session(session.id, keep_system_message=False, now=LATER)
        assert (reset.message_count, reset.last_seq, reset.stored_tokens) == (0, 0, 0)
        assert (reset.usage_input_tokens, reset.usage_output_tokens) == (0, 0)
        assert reset.updated_at == LATER and reset.version > session.version
        assert store.read_messages(session.id) == []
        assert store.append_messages(session.id, [draft()], now=LATER)[0].seq == 1

    def test_reset_can_keep_a_leading_system_message(self, store: Store) -> None:
        session = store.create_session(new_session(), now=NOW)
        system, *_ = store.append_messages(
            session.id, [draft("rules", role=Role.SYSTEM, tokens=4), draft(), draft()], now=NOW
        )
        reset = store.reset_session(session.id, keep_system_message=True, now=LATER)
        assert store.read_messages(session.id) == [system]
        assert (reset.message_count, reset.last_seq, reset.stored_tokens) == (1, 1, 4)
        assert store.append_messages(session.id, [draft()], now=LATER)[0].seq == 2

    def test_reset_keeping_the_system_message_keeps_nothing_else(self, store: Store) -> None:
        session = store.create_session(new_session(), now=NOW)
        store.append_messages(session.id, [draft("hi"), draft("rules", role=Role.SYSTEM)], now=NOW)
        reset = store.reset_session(session.id, keep_system_message=True, now=LATER)
        assert reset.message_count == 0 and store.read_messages(session.id) == []

    def test_delete_last_message_returns_it_and_the_seq_is_reused(self, store: Store) -> None:
        session = store.create_session(new_session(), now=NOW)
        first, last = store.append_messages(
            session.id,
            [draft("a", id="m-1", tokens=2), draft("b", id="m-2", tokens=5, usage=Usage(9, 1))],
            now=NOW,
        )
        assert store.delete_last_message(session.id, now=LATER) == last
        after = store.get_session(session.id)
        assert (after.message_count, after.last_seq, after.stored_tokens) == (1, 1, 2)
        assert (after.usage_input_tokens, after.usage_output_tokens) == (0, 0)
        assert after.updated_at == LATER and after.version > session.version
        again = store.append_messages(session.id, [draft("b again", id="m-2")], now=LATER)
        assert (again[0].seq, again[0].content) == (2, "b again")
        assert store.read_messages(session.id) == [first, again[0]]

    def test_delete_last_message_of_an_empty_session_changes_nothing(self, store: Store) -> None:
        session = store.create_session(new_session(), now=NOW)
        assert store.delete_last_message(session.id, now=LATER) is None
        assert store.get_session(session.id) == session

    def test_delete_last_message_works_whatever_the_status(self, store: Store) -> None:
        session = store.create_session(new_session(), now=NOW)
        store.append_messages(session.id, [draft(id="m-1")], now=NOW)
        store.set_status(session.id, SessionStatus.ARCHIVED, now=NOW)
        deleted = store.delete_last_message(session.id, now=LATER)
        assert deleted is not None and deleted.id == "m-1"
        assert store.count_messages(session.id) == 0
