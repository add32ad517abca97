"""The public turn helper, `ChatTurns` / `AsyncChatTurns`, on every backend: a library user
gets the call-store-trace loop without writing it, and every reply it produces has a trace of
exactly what the model saw."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

import turnkeeper
from tests.conftest import run_async
from tests.server.live import LiveServer
from tests.server.upstream import Upstream, make_app
from turnkeeper import AsyncChatTurns, Attempt, ChatTurns, IdempotencyKeyReused, TurnOptions
from turnkeeper.llm import LLMClient
from turnkeeper.service import Turnkeeper
from turnkeeper.traces import prefix_break, trace_of, window_diff


@pytest.fixture(scope="module")
def model_server() -> Iterator[tuple[Upstream, str]]:
    state = Upstream()
    with LiveServer(make_app(state)) as live:
        yield state, f"{live.url}/v1"


@pytest.fixture
def model(model_server: tuple[Upstream, str]) -> Upstream:
    state, _ = model_server
    state.mode = "ok"
    state.requests.clear()
    state.headers.clear()
    return state


@pytest.fixture
def chat(tk: Turnkeeper, model_server: tuple[Upstream, str]) -> Iterator[ChatTurns]:
    with ChatTurns(tk, LLMClient(model_server[1], timeout=5, backoff=0.01)) as turns:
        yield turns


def test_a_turn_stores_the_reply_and_a_trace_of_the_exact_window_sent(
    tk: Turnkeeper, chat: ChatTurns, model: Upstream
) -> None:
    tk.create_session(key="trip")
    tk.append("trip", "system", "You plan trips.")
    first = chat.turn("trip", "Four days in Lisbon.")
    second = chat.turn("trip", "Where should we eat?")
    assert second.content == "reply 2 to: Where should we eat?"
    assert second.trace is not None and second.trace.seq == second.reply.seq == 5
    stored, previous = trace_of(tk, "trip", 5)
    assert stored == second.trace
    assert previous == first.trace
    assert stored.messages() == model.requests[1]["messages"]  # re-rendered, exactly as sent
    assert stored.kept_seqs == [1, 2, 3, 4] and stored.turn_seq == 4
    assert stored.source == "library" and stored.model == model.requests[1]["model"]
    assert stored.usage is not None
    assert stored.usage["output_tokens"] == len(second.content.split())
    diff = window_diff(previous, stored)
    assert [entry.seq for entry in diff.entered] == [3, 4] and diff.left == []


def test_a_trace_names_every_message_its_marker_counts(
    tk: Turnkeeper, chat: ChatTurns, model: Upstream
) -> None:
    tk.create_session(key="long")
    tk.append("long", "system", "You plan trips.")
    for n in range(40):
        tk.append("long", "user", f"message {n} " + "word " * 30)
    options = TurnOptions(strategy="sliding_window", budget_tokens=300)
    made = chat.turn("long", "And now?", options=options).trace
    assert made is not None
    stored, _ = trace_of(tk, "long", made.seq)
    assert stored == made  # the seq sets survive being stored
    (marker,) = stored.markers
    left_out = int(marker.split()[1])  # "[Note: N older messages truncated …]"
    assert len(stored.dropped_seqs) == left_out > 0
    before_reply = set(range(1, stored.turn_seq + 1))
    assert set(stored.dropped_seqs) | set(stored.kept_seqs) == before_reply
    report = stored.to_window().report
    assert report.messages_dropped == len(report.dropped_seqs) == left_out
    assert report.messages_loaded == len(report.loaded_seqs) < len(before_reply)


def test_a_trace_says_what_was_dropped_and_what_fell_out_of_the_window(
    tk: Turnkeeper, chat: ChatTurns, model: Upstream
) -> None:
    tk.create_session(key="long")
    options = TurnOptions(strategy="sliding_window", budget_tokens=160)
    results = [chat.turn("long", f"message {n} " + "word " * 30, options=options) for n in range(6)]
    traces = [result.trace for result in results]
    assert all(trace is not None for trace in traces)
    assert traces[-1] is not None and traces[-1].messages() == model.requests[-1]["messages"]
    # the turn whose cut point moved: older turns fell out of its window, and the trace says so
    moved = [
        (before, after) for before, after in itertools.pairwise(traces)
        if before is not None and after is not None and after.cut_seq != before.cut_seq
        and after.dropped_seqs
    ]  # fmt: skip
    assert moved, "the cut point moved at least once"
    before, last = moved[-1]
    assert last.strategy == "sliding_window" and last.budget == 160 and last.tokens_sent <= 160
    diff = window_diff(before, last)
    left = {entry.seq for entry in diff.left if entry.seq is not None}
    assert left, "an older turn fell out of the window"
    assert not left & set(last.kept_seqs)
    entered = {entry.seq for entry in diff.entered if entry.seq}
    assert last.turn_seq in entered <= {last.turn_seq - 1, last.turn_seq}


def test_a_summarized_window_is_traced_with_its_checkpoint(
    tk: Turnkeeper, chat: ChatTurns, model: Upstream
) -> None:
    tk.create_session(key="summed")
    options = TurnOptions(strategy="summarize", keep_recent=2, budget_tokens=200)
    results = [
        chat.turn("summed", f"fact {n} " + "detail " * 25, options=options) for n in range(5)
    ]
    trace = trace_of(tk, "summed", results[-1].reply.seq)[0]
    assert trace.summarized_seqs and trace.summary_covers_to_seq == max(trace.summarized_seqs)
    assert [entry.kind for entry in trace.window].count("summary") == 1
    assert trace.messages() == model.requests[-1]["messages"]


def test_a_replayed_turn_adds_no_trace_and_reset_forgets_them(
    tk: Turnkeeper, chat: ChatTurns, model: Upstream
) -> None:
    tk.create_session(key="replay")
    first = chat.turn("replay", "Hi", id="t-1")
    again = chat.turn("replay", "Hi", id="t-1")
    assert again.replayed and again.trace is None and len(model.requests) == 1
    assert trace_of(tk, "replay", first.reply.seq)[0] == first.trace
    tk.reset_session("replay")
    with pytest.raises(Exception, match="has no trace"):
        trace_of(tk, "replay", first.reply.seq)


def test_the_async_helper_answers_and_streams_with_traces(
    tk: Turnkeeper, model_server: tuple[Upstream, str], model: Upstream
) -> None:
    tk.create_session(key="async")

    async def talk() -> tuple[str, str]:
        async with AsyncChatTurns(ChatTurns(tk, LLMClient(model_server[1], timeout=5))) as chat:
            whole = await chat.turn("async", "Hello")
            parts = [text async for text in chat.stream_turn("async", "Stream it")]
            return whole.content, "".join(parts)

    whole, streamed = run_async(talk())
    assert whole == "reply 1 to: Hello" and streamed == "reply 2 to: Stream it"
    replies = [m for m in tk.history("async") if m.role.value == "assistant"]
    assert [m.content for m in replies] == [whole, streamed]
    trace, previous = trace_of(tk, "async", replies[1].seq)
    assert trace.stream is True and previous is not None and previous.stream is False
    assert trace.usage is not None  # the stream asked for usage, and it was kept


@pytest.mark.parametrize("face", ["sync", "async"])
def test_open_talks_to_the_configured_endpoint(
    tmp_path: Path, model_server: tuple[Upstream, str], model: Upstream, face: str
) -> None:
    settings = {"llm_base_url": model_server[1], "llm_model": "configured-model"}
    with turnkeeper.open(f"sqlite:///{tmp_path / 'o.db'}", **settings) as tk:
        with ChatTurns.open(tk) as chat:
            result = chat.turn("configured", "Hi", create=True)
        on = tk if face == "sync" else turnkeeper.AsyncTurnkeeper(tk)

        async def talk() -> str:
            async with AsyncChatTurns.open(on) as chat:
                return (await chat.turn("configured", "Again")).content

        assert run_async(talk()) == "reply 2 to: Again"
    assert result.content == "reply 1 to: Hi"
    assert [request["model"] for request in model.requests] == ["configured-model"] * 2


def test_export_then_import_round_trips_a_session_with_its_traces(
    tk: Turnkeeper, chat: ChatTurns, model: Upstream, tmp_path: Path
) -> None:
    tk.create_session(key="kept")
    tk.append("kept", "system", "You plan trips.")
    chat.turn("kept", "Four days in Lisbon.")
    chat.turn("kept", "Where should we eat?", options=TurnOptions(strategy="recent", keep_recent=2))
    before = [trace_of(tk, "kept", seq) for seq in (3, 5)]
    history = tk.history("kept")
    out = tmp_path / "kept.jsonl"
    with out.open("w", encoding="utf-8") as handle:
        tk.transfer.export_sessions(["kept"], handle)
    assert sum('"type": "trace"' in line for line in out.read_text().splitlines()) == 2
    tk.delete_session("kept")
    report = tk.transfer.import_sessions(out)
    assert (report.messages_added, report.errors) == (5, [])
    assert tk.history("kept") == history
    assert [trace_of(tk, "kept", seq) for seq in (3, 5)] == before
    again = tk.transfer.import_sessions(out)
    assert (again.messages_added, again.errors) == (0, [])
    assert [trace_of(tk, "kept", seq) for seq in (3, 5)] == before


def test_a_trace_record_not_naming_a_reply_is_reported_and_the_rest_imports(
    tk: Turnkeeper, chat: ChatTurns, model: Upstream, tmp_path: Path
) -> None:
    tk.create_session(key="bad")
    chat.turn("bad", "Hello")
    out = tmp_path / "bad.jsonl"
    with out.open("w", encoding="utf-8") as handle:
        tk.transfer.export_sessions(["bad"], handle)
    lines = out.read_text().splitlines()
    out.write_text("\n".join([*lines, lines[-1].replace('"seq": 2', '"seq": 1')]) + "\n")
    tk.delete_session("bad")
    report = tk.transfer.import_sessions(out)
    assert report.errors == [f"{out}:5: trace seq 1 is not an assistant message of its session"]
    assert report.messages_added == 2 and trace_of(tk, "bad", 2)[0].seq == 2


def test_an_idempotency_key_reused_for_another_text_raises_and_stores_nothing(
    tk: Turnkeeper, chat: ChatTurns, model: Upstream
) -> None:
    tk.create_session(key="keyed")
    first = chat.turn("keyed", "Hi", attempt=Attempt(idempotency_key="k"))
    with pytest.raises(IdempotencyKeyReused, match="Idempotency-Key"):
        chat.turn("keyed", "Bye", attempt=Attempt(idempotency_key="k"))
    again = chat.turn("keyed", "Hi", attempt=Attempt(idempotency_key="k"))
    assert again.replayed and again.reply == first.reply
    assert [m.content for m in tk.history("keyed")] == ["Hi", first.content]
    assert len(model.requests) == 1


def test_each_turn_names_its_session_as_the_prompt_cache_key_unless_the_caller_did(
    tk: Turnkeeper, chat: ChatTurns, model: Upstream
) -> None:
    session = tk.create_session(key="cache-keyed")
    chat.turn("cache-keyed", "Hello")
    chat.turn("cache-keyed", "Again", request={"prompt_cache_key": "tenant-7"})
    assert [r["prompt_cache_key"] for r in model.requests] == [session.id, "tenant-7"]


def test_prefix_break_is_where_the_previous_window_stops_being_the_start() -> None:
    system, first, second = ({"role": r, "content": c} for r, c in
                             (("system", "S"), ("user", "a"), ("user", "b")))  # fmt: skip
    marker = {"role": "system", "content": "[Note: 1 older messages truncated]"}
    assert prefix_break([system, first], [system, first, second]) is None  # appended only
    assert prefix_break([], [system]) is None
    assert prefix_break([system, first], [system, marker, second]) == 1  # history rewritten
    assert prefix_break([system, first, second], [system, first]) == 2  # the window got shorter
    assert prefix_break([system], [{**system, "name": "ops"}]) == 0  # rendered, not just text
