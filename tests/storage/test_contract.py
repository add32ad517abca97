"""The storage contract, proven through the service on every backend (`store` fixture).

Each test states one behaviour of `turnkeeper.storage.base.Store` that every backend keeps.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.conftest import Clock
from turnkeeper.errors import (
    Conflict,
    InvalidInput,
    SeqConflict,
    SessionExpired,
    SessionNotFound,
)
from turnkeeper.service import Turnkeeper
from turnkeeper.types import (
    AgentStateUpdate,
    NewMessage,
    Role,
    SessionStatus,
    SummaryCheckpoint,
    Usage,
)

# -- sessions ---------------------------------------------------------------------------------


def test_create_session_gives_a_uuid_and_the_fields_asked_for(tk: Turnkeeper, clock: Clock) -> None:
    session = tk.create_session(
        key="dev-task-F1-T3",
        project="acme",
        subject="ticket-7",
        kind="dev-task",
        title="Fix the leak",
        phase="plan",
        metadata={"agent_id": "a1"},
    )
    assert len(session.id) == 36 and session.id.count("-") == 4
    assert (session.key, session.project, session.subject, session.kind) == (
        "dev-task-F1-T3",
        "acme",
        "ticket-7",
        "dev-task",
    )
    assert (session.title, session.phase, session.status) == (
        "Fix the leak",
        "plan",
        SessionStatus.ACTIVE,
    )
    assert session.created_at == session.updated_at == clock.now
    assert session.expires_at is None  # the default: sessions never expire
    assert session.metadata == {"agent_id": "a1"}
    assert (session.message_count, session.stored_tokens) == (0, 0)
    assert tk.get_session(session.id) == session


def test_session_without_ttl_never_expires(tk: Turnkeeper, clock: Clock) -> None:
    session = tk.create_session(ttl=None)
    clock.advance(timedelta(days=3650))
    assert session.expires_at is None
    assert tk.get_session(session.id).status is SessionStatus.ACTIVE


def test_key_is_unique_among_live_sessions_of_a_project(tk: Turnkeeper) -> None:
    tk.create_session(key="k1", project="p1")
    with pytest.raises(Conflict, match="k1"):
        tk.create_session(key="k1", project="p1")
    other = tk.create_session(key="k1", project="p2")
    assert other.project == "p2"


def test_get_or_create_returns_the_same_live_session(tk: Turnkeeper) -> None:
    first, created = tk.get_or_create_session("conv-1", title="first")
    again, created_again = tk.get_or_create_session("conv-1", title="ignored")
    assert created and not created_again
    assert again.id == first.id and again.title == "first"


def test_get_or_create_replaces_an_expired_session_which_stays_readable(
    tk: Turnkeeper, clock: Clock
) -> None:
    old, _ = tk.get_or_create_session("conv-1", ttl=timedelta(hours=1))
    tk.append(old, "user", "remember me")
    clock.advance(timedelta(hours=2))
    new, created = tk.get_or_create_session("conv-1")
    assert created and new.id != old.id
    stale = tk.get_session(old.id)
    assert stale.status is SessionStatus.EXPIRED
    assert [m.content for m in tk.history(old.id)] == ["remember me"]
    assert tk.get_session("conv-1").id == new.id


def test_get_by_key_prefers_the_live_session(tk: Turnkeeper) -> None:
    old = tk.create_session(key="k")
    tk.archive_session(old)
    new = tk.create_session(key="k")
    assert tk.get_session("k").id == new.id
    tk.delete_session(new)
    assert tk.get_session("k").id == old.id


def test_missing_session_raises_not_found(tk: Turnkeeper) -> None:
    with pytest.raises(SessionNotFound):
        tk.get_session("00000000-0000-0000-0000-000000000000")
    with pytest.raises(SessionNotFound, match="nope"):
        tk.get_session("nope")


def test_project_scope_hides_other_projects_sessions(tk: Turnkeeper) -> None:
    session = tk.create_session(key="shared-name", project="a")
    with pytest.raises(SessionNotFound):
        tk.get_session(session.id, project="b")
    with pytest.raises(SessionNotFound):
        tk.get_session("shared-name", project="b")
    assert tk.get_session("shared-name", project="a").id == session.id


def test_list_filters_and_orders_by_last_activity(tk: Turnkeeper, clock: Clock) -> None:
    a = tk.create_session(project="p", subject="ticket-1", kind="dev-task")
    clock.advance(timedelta(seconds=1))
    b = tk.create_session(project="p", subject="ticket-2", kind="qa-task")
    clock.advance(timedelta(seconds=1))
    c = tk.create_session(project="q", subject="ticket-1", kind="dev-task")
    clock.advance(timedelta(seconds=1))
    tk.append(a, "user", "bump a to the top")
    clock.advance(timedelta(seconds=1))
    assert [s.id for s in tk.list_sessions().items] == [a.id, c.id, b.id]
    assert [s.id for s in tk.list_sessions(project="p").items] == [a.id, b.id]
    assert [s.id for s in tk.list_sessions(subject="ticket-1").items] == [a.id, c.id]
    assert [s.id for s in tk.list_sessions(kind="qa-task").items] == [b.id]
    tk.archive_session(b)
    assert [s.id for s in tk.list_sessions(status="archived").items] == [b.id]
    since = clock.now
    assert {s.id for s in tk.list_sessions(updated_since=since).items} == {b.id}


def test_search_finds_text_in_key_subject_or_title_ignoring_case(tk: Turnkeeper) -> None:
    by_key = tk.create_session(key="Invoice-42")
    by_subject = tk.create_session(subject="ticket-invoice")
    by_title = tk.create_session(title="Late INVOICES", phase="plan")
    tk.create_session(key="other", subject="ticket-9", title="Weather")
    literal = tk.create_session(title="100%_sure")
    found = {s.id for s in tk.list_sessions(search="invoice").items}
    assert found == {by_key.id, by_subject.id, by_title.id}
    assert [s.id for s in tk.list_sessions(search="invoice", phase="plan").items] == [by_title.id]
    assert [s.id for s in tk.list_sessions(search="%_").items] == [literal.id]  # not wildcards
    assert tk.list_sessions(search="ticket_9").items == ()  # "_" is no wildcard: not ticket-9


def test_cursor_pagination_visits_every_session_once(tk: Turnkeeper, clock: Clock) -> None:
    ids = set()
    for _ in range(23):
        ids.add(tk.create_session().id)
        if len(ids) % 5:  # several sessions share an updated_at: ties are broken by id
            clock.advance(timedelta(milliseconds=1))
    seen: list[str] = []
    cursor = None
    while True:
        page = tk.list_sessions(limit=4, cursor=cursor)
        seen.extend(s.id for s in page.items)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert len(seen) == 23 and set(seen) == ids


def test_update_changes_only_the_given_fields(tk: Turnkeeper, clock: Clock) -> None:
    session = tk.create_session(title="t", phase="chat", metadata={"a": 1})
    clock.advance(timedelta(seconds=5))
    updated = tk.update_session(session, phase="plan")
    assert (updated.title, updated.phase, updated.metadata) == ("t", "plan", {"a": 1})
    assert updated.updated_at == clock.now and updated.version > session.version
    updated = tk.update_session(session, title=None, metadata={"b": 2})
    assert (updated.title, updated.phase, updated.metadata) == (None, "plan", {"b": 2})


def test_archive_keeps_messages_readable_but_refuses_appends(tk: Turnkeeper) -> None:
    session = tk.create_session()
    tk.append(session, "user", "hi")
    archived = tk.archive_session(session)
    assert archived.status is SessionStatus.ARCHIVED
    assert [m.content for m in tk.history(session)] == ["hi"]
    with pytest.raises(Conflict, match="archived"):
        tk.append(session, "user", "more")


def test_delete_removes_the_session_and_its_messages(tk: Turnkeeper) -> None:
    session = tk.create_session()
    tk.append(session, "user", "hi")
    tk.delete_session(session)
    with pytest.raises(SessionNotFound):
        tk.get_session(session.id)
    assert tk.store.read_messages(session.id) == []
    with pytest.raises(SessionNotFound):
        tk.delete_session(session.id)


@pytest.mark.parametrize("keep", [True, False])
def test_reset_clears_messages_and_optionally_keeps_the_system_message(
    tk: Turnkeeper, keep: bool
) -> None:
    session = tk.create_session()
    tk.append(session, "system", "You are terse.")
    tk.append(session, "user", "hi")
    tk.append(session, "assistant", "hello", usage=Usage(10, 2))
    reset = tk.reset_session(session, keep_system_message=keep)
    remaining = tk.history(session)
    if keep:
        assert [(m.seq, m.content) for m in remaining] == [(1, "You are terse.")]
        assert reset.stored_tokens == remaining[0].tokens
    else:
        assert remaining == []
        assert reset.stored_tokens == 0
    assert reset.message_count == len(remaining) and reset.last_seq == len(remaining)
    assert reset.usage_output_tokens == 0
    nxt = tk.append(session, "user", "again")
    assert nxt.seq == len(remaining) + 1


def test_reset_keeps_nothing_when_the_first_message_is_not_system(tk: Turnkeeper) -> None:
    session = tk.create_session()
    tk.append(session, "user", "hi")
    assert tk.reset_session(session, keep_system_message=True).message_count == 0


# -- messages ---------------------------------------------------------------------------------


def test_append_assigns_gapless_seqs_and_keeps_every_field(tk: Turnkeeper, clock: Clock) -> None:
    session = tk.create_session()
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    first = tk.append(session, "user", "hi", author="ana", metadata={"iteration": 1})
    second = tk.append(
        session, "assistant", "", tool_calls=[call], usage=Usage(input_tokens=30, output_tokens=5)
    )
    third = tk.append(session, "tool", "42", tool_call_id="call_1", internal=True)
    assert [first.seq, second.seq, third.seq] == [1, 2, 3]
    stored = tk.history(session)
    assert stored == [first, second, third]
    assert stored[0].author == "ana" and stored[0].metadata == {"iteration": 1}
    assert stored[1].tool_calls == (call,) and stored[1].usage == Usage(30, 5)
    assert stored[2].tool_call_id == "call_1" and stored[2].internal
    assert all(m.created_at == clock.now for m in stored)
    refreshed = tk.get_session(session.id)
    assert refreshed.message_count == 3 and refreshed.last_seq == 3
    assert refreshed.stored_tokens == sum(m.tokens for m in stored)
    assert (refreshed.usage_input_tokens, refreshed.usage_output_tokens) == (30, 5)


def test_tokens_are_counted_once_at_write_time(tk: Turnkeeper) -> None:
    session = tk.create_session()
    message = tk.append(session, "user", "Hello there, how are you today?")
    expected = tk.counter.count_message("user", "Hello there, how are you today?")
    assert message.tokens == expected > 3


def test_appending_the_same_id_twice_stores_it_once(tk: Turnkeeper) -> None:
    session = tk.create_session()
    first = tk.append(session, "user", "hi", id="msg-1")
    again = tk.append(session, "user", "hi", id="msg-1")
    assert again == first
    assert tk.get_session(session.id).message_count == 1


def test_a_reused_id_with_different_content_is_a_conflict_naming_it(tk: Turnkeeper) -> None:
    session = tk.create_session()
    tk.append(session, "user", "hi", id="msg-1")
    for change in (
        {"content": "a different text"},
        {"role": "assistant"},
        {"author": "alice"},
        {"internal": True},
        {"metadata": {"k": 1}},
    ):
        fields = {"role": "user", "content": "hi", **change}
        with pytest.raises(Conflict, match="'msg-1'"):
            tk.append(session, id="msg-1", **fields)  # type: ignore[arg-type]
    assert [m.content for m in tk.history(session)] == ["hi"]


def test_one_id_twice_in_a_batch_is_refused_and_nothing_is_stored(tk: Turnkeeper) -> None:
    session = tk.create_session()
    batch = [NewMessage("user", "q", id="m-1"), NewMessage("user", "q", id="m-1")]
    with pytest.raises(InvalidInput) as info:
        tk.append_many(session, batch)
    assert info.value.field == "messages[1].id" and "m-1" in info.value.problem
    assert tk.history(session) == []


def test_retry_of_a_batch_is_idempotent_even_with_expected_last_seq(tk: Turnkeeper) -> None:
    session = tk.create_session()
    batch = [NewMessage("user", "q", id="m-1"), NewMessage("assistant", "a", id="m-2")]
    stored = tk.append_many(session, batch, expected_last_seq=0)
    assert tk.append_many(session, batch, expected_last_seq=0) == stored
    assert tk.get_session(session.id).message_count == 2


def test_message_ids_are_scoped_to_their_session(tk: Turnkeeper) -> None:
    # Another tenant's session can neither observe an id (no conflict) nor claim it first.
    a = tk.create_session(project="tenant-a")
    b = tk.create_session(project="tenant-b")
    in_b = tk.append(b, "user", "b's text", id="shared-id")
    in_a = tk.append(a, "user", "a's text", id="shared-id")
    assert (in_a.session_id, in_a.content) == (a.id, "a's text")
    assert (in_b.session_id, in_b.content) == (b.id, "b's text")
    assert [m.content for m in tk.history(a)] == ["a's text"]
    assert [m.content for m in tk.history(b)] == ["b's text"]


def test_append_many_is_atomic(tk: Turnkeeper) -> None:
    session = tk.create_session()
    tk.append(session, "user", "before", id="taken")
    with pytest.raises(Conflict):
        tk.append_many(session, [NewMessage("user", "fine"), NewMessage("user", "x", id="taken")])
    assert [m.content for m in tk.history(session)] == ["before"]
    assert tk.get_session(session.id).message_count == 1


def test_expected_last_seq_rejects_a_stale_writer(tk: Turnkeeper) -> None:
    session = tk.create_session()
    tk.append(session, "user", "one", expected_last_seq=0)
    tk.append(session, "assistant", "two", expected_last_seq=1)
    with pytest.raises(SeqConflict) as info:
        tk.append(session, "user", "stale", expected_last_seq=1)
    assert (info.value.expected, info.value.actual) == (1, 2)
    assert [m.content for m in tk.history(session)] == ["one", "two"]


def test_appending_to_an_expired_session_fails(tk: Turnkeeper, clock: Clock) -> None:
    session = tk.create_session(ttl=timedelta(minutes=5))
    clock.advance(timedelta(minutes=6))
    with pytest.raises(SessionExpired):
        tk.append(session, "user", "too late")
    assert tk.get_session(session.id).status is SessionStatus.EXPIRED


def test_history_reads_ranges_pages_and_user_facing_messages(tk: Turnkeeper) -> None:
    session = tk.create_session()
    for i in range(1, 11):
        tk.append(session, "user", f"m{i}", internal=(i % 3 == 0))
    assert [m.seq for m in tk.history(session, from_seq=4, to_seq=6)] == [4, 5, 6]
    assert [m.seq for m in tk.history(session, newest_first=True, limit=3)] == [10, 9, 8]
    assert [m.seq for m in tk.history(session, newest_first=True, to_seq=7, limit=3)] == [7, 6, 5]
    visible = tk.history(session, include_internal=False)
    assert [m.seq for m in visible] == [1, 2, 4, 5, 7, 8, 10]
    assert tk.store.count_messages(session.id, before_seq=6, include_internal=False) == 4


# -- expiry and statistics ---------------------------------------------------------------------


def test_expire_marks_then_deletes_after_grace(tk: Turnkeeper, clock: Clock) -> None:
    short = tk.create_session(ttl=timedelta(hours=1))
    tk.append(short, "user", "bye")
    long = tk.create_session(ttl=timedelta(days=7))
    forever = tk.create_session(ttl=None)
    clock.advance(timedelta(hours=2))
    report = tk.transfer.expire()
    assert report.expired == (short.id,) and report.deleted == ()
    assert tk.get_session(short.id).status is SessionStatus.EXPIRED
    report = tk.transfer.expire(delete=True, grace=timedelta(hours=3))
    assert report.deleted == ()
    clock.advance(timedelta(hours=3))
    report = tk.transfer.expire(delete=True, grace=timedelta(hours=3))
    assert report.deleted == (short.id,)
    with pytest.raises(SessionNotFound):
        tk.get_session(short.id)
    assert tk.get_session(long.id).status is SessionStatus.ACTIVE
    assert tk.get_session(forever.id).status is SessionStatus.ACTIVE


def test_session_stats_count_roles_internal_tokens_and_usage(tk: Turnkeeper) -> None:
    session = tk.create_session()
    tk.append(session, "system", "sys")
    tk.append(session, "user", "q")
    tk.append(session, "assistant", "a", usage=Usage(7, 3))
    tk.append(session, "assistant", "thinking", internal=True)
    stats = tk.session_stats(session)
    assert stats.message_count == 4
    assert (stats.user_facing_messages, stats.internal_messages) == (3, 1)
    assert dict(stats.messages_by_role) == {"system": 1, "user": 1, "assistant": 2}
    assert stats.stored_tokens == sum(m.tokens for m in tk.history(session))
    assert (stats.usage_input_tokens, stats.usage_output_tokens) == (7, 3)


def test_project_stats_sum_sessions_by_status(tk: Turnkeeper) -> None:
    a = tk.create_session(project="p")
    tk.append(a, "user", "one")
    b = tk.create_session(project="p")
    tk.append(b, "user", "two", usage=Usage(1, 2))
    tk.archive_session(b)
    tk.create_session(project="q")
    stats = {s.project: s for s in tk.project_stats()}
    assert set(stats) == {"p", "q"}
    assert dict(stats["p"].sessions_by_status) == {"active": 1, "archived": 1}
    assert stats["p"].message_count == 2
    assert (
        stats["p"].stored_tokens
        == tk.get_session(a.id).stored_tokens + tk.get_session(b.id).stored_tokens
    )
    assert stats["p"].usage_output_tokens == 2
    assert [s.project for s in tk.project_stats("q")] == ["q"]


def test_roles_round_trip_as_enum(tk: Turnkeeper) -> None:
    session = tk.create_session()
    message = tk.append(session, Role.SYSTEM, "x")
    assert tk.history(session)[0].role is Role.SYSTEM is message.role


def test_update_can_extend_or_remove_the_expiry_but_not_revive(
    tk: Turnkeeper, clock: Clock
) -> None:
    session = tk.create_session(ttl=timedelta(hours=1))
    extended = tk.update_session(session, ttl=timedelta(days=2))
    assert extended.expires_at == clock.now + timedelta(days=2)
    assert tk.update_session(session, ttl=None).expires_at is None
    short = tk.create_session(ttl=timedelta(minutes=1))
    clock.advance(timedelta(minutes=2))
    with pytest.raises(SessionExpired):
        tk.update_session(short, ttl=timedelta(days=1))
    with pytest.raises(SessionExpired):
        tk.archive_session(short)
    assert tk.get_session(short.id).status is SessionStatus.EXPIRED


# -- agent states and summary checkpoints -----------------------------------------------------


def test_agent_state_upsert_keeps_unset_fields_adds_time_and_bumps_version(
    tk: Turnkeeper, clock: Clock
) -> None:
    session = tk.create_session()
    store = tk.store
    assert store.get_agent_state(session.id, "pm") is None
    first = store.update_agent_state(
        session.id, "pm", AgentStateUpdate(provider_session_id="c-1", add_execution_ms=40,
                                           add_turns=1), now=clock.now,
    )  # fmt: skip
    assert (first.last_processed_seq, first.provider_session_id, first.execution_ms) == (
        0, "c-1", 40,
    )  # fmt: skip
    clock.advance(timedelta(seconds=5))
    second = store.update_agent_state(
        session.id, "pm", AgentStateUpdate(last_processed_seq=7, add_execution_ms=2), now=clock.now
    )
    assert (second.last_processed_seq, second.provider_session_id) == (7, "c-1")
    assert (second.execution_ms, second.turns, second.updated_at) == (42, 1, clock.now)
    assert store.get_agent_state(session.id, "pm") == second
    assert store.get_session(session.id).version == session.version + 2
    store.update_agent_state(session.id, "dev", AgentStateUpdate(), now=clock.now)
    assert [s.agent for s in store.list_agent_states(session.id)] == ["dev", "pm"]
    with pytest.raises(SessionNotFound):
        store.update_agent_state("missing", "pm", AgentStateUpdate(), now=clock.now)


def _checkpoint(session_id: str, covers: int, text: str, clock: Clock) -> SummaryCheckpoint:
    return SummaryCheckpoint(session_id, covers, text, 3, "extractive", clock.now)


def test_the_first_checkpoint_saved_for_a_seq_wins(tk: Turnkeeper, clock: Clock) -> None:
    session = tk.create_session()
    store = tk.store
    assert store.latest_summary(session.id) is None
    saved = store.save_summary(_checkpoint(session.id, 10, "first", clock))
    assert saved == _checkpoint(session.id, 10, "first", clock)
    assert store.save_summary(_checkpoint(session.id, 10, "second", clock)).text == "first"
    assert store.get_session(session.id).version == session.version + 1
    store.save_summary(_checkpoint(session.id, 20, "later", clock))
    latest = store.latest_summary(session.id)
    assert latest is not None and latest.text == "later"
    capped = store.latest_summary(session.id, upto_seq=15)
    assert capped is not None and capped.text == "first"
    assert [c.covers_to_seq for c in store.list_summaries(session.id)] == [10, 20]
    with pytest.raises(SessionNotFound):
        store.save_summary(_checkpoint("missing", 1, "x", clock))


def test_reset_and_delete_drop_checkpoints_and_agent_positions(
    tk: Turnkeeper, clock: Clock
) -> None:
    session = tk.create_session()
    tk.append(session, "user", "hi")
    store = tk.store
    store.save_summary(_checkpoint(session.id, 1, "hi", clock))
    store.update_agent_state(
        session.id, "pm", AgentStateUpdate(last_processed_seq=1), now=clock.now
    )
    assert store.latest_summary(session.id) is not None  # cached, then invalidated by reset
    tk.reset_session(session)
    assert store.latest_summary(session.id) is None
    assert store.list_summaries(session.id) == []
    state = store.get_agent_state(session.id, "pm")
    assert state is not None and state.last_processed_seq == 0
    tk.delete_session(session)
    assert store.list_agent_states(session.id) == []
    assert store.list_summaries(session.id) == []
