"""The turn helper asks the model once per turn while a retry of it arrives mid-answer, on every
backend, through the public `ChatTurns`: a retry waits for a caller that sends the request
itself, gives up past the longest a turn may be held (`TurnInProgress`), and a streamed answer
is stored even when its reader stops (unless it is cancelled)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import Clock
from tests.server.live import LiveServer
from tests.server.upstream import Upstream, make_app
from turnkeeper import ChatTurns, NewMessage, Role, TurnInProgress
from turnkeeper.config import load_settings
from turnkeeper.llm import LLMClient, Reply
from turnkeeper.service import Turnkeeper
from turnkeeper.storage.base import Store


@pytest.fixture(scope="module")
def model_server() -> Iterator[tuple[Upstream, str]]:
    state = Upstream()
    with LiveServer(make_app(state)) as live:
        yield state, f"{live.url}/v1"


@pytest.fixture
def model(model_server: tuple[Upstream, str]) -> Iterator[Upstream]:
    state, _ = model_server
    state.mode = "ok"
    state.requests.clear()
    state.headers.clear()
    state.stream_gate = threading.Event()
    yield state
    state.stream_gate.set()  # a stream the test left paused ends
    state.stream_gate = None


@pytest.fixture
def quick(store: Store, clock: Clock) -> Turnkeeper:
    """The service over each backend with a hand-moved clock (a held turn's lease never
    lapses) and a turn held at most 1.5 s (`llm_timeout` 1 s, no retries, a 0.5 s lease)."""
    settings = load_settings(llm_timeout="1s", llm_max_retries=0, turn_lease="500ms")
    return Turnkeeper(store, settings, clock=clock)


def chat_on(tk: Turnkeeper, model_server: tuple[Upstream, str]) -> ChatTurns:
    return ChatTurns(tk, LLMClient(model_server[1], timeout=5, max_retries=0))


def test_a_retry_waits_for_a_caller_that_sends_the_request_itself(
    quick: Turnkeeper, model_server: tuple[Upstream, str], model: Upstream
) -> None:
    quick.create_session(key="own")
    first, retry = chat_on(quick, model_server), chat_on(quick, model_server)
    question = NewMessage(role=Role.USER, content="Hi", id="t-1")
    prepared = first.prepare(quick.get_session("own"), [question])
    with ThreadPoolExecutor(1) as pool:
        again = pool.submit(retry.turn, "own", "Hi", id="t-1")
        time.sleep(0.2)  # let the retry start waiting (it would ask the model right away)
        reply, _ = first.finish(prepared, Reply(content="sent by the caller"), started=0.0)
        result = again.result(timeout=30)
    assert result.replayed and result.reply == reply
    assert model.requests == []
    assert [m.content for m in quick.history("own")] == ["Hi", "sent by the caller"]


def test_a_retry_waiting_past_the_longest_hold_gets_turn_in_progress_and_nothing_changes(
    quick: Turnkeeper, model_server: tuple[Upstream, str], model: Upstream
) -> None:
    quick.create_session(key="long")
    first, retry = chat_on(quick, model_server), chat_on(quick, model_server)
    prepared = first.prepare(
        quick.get_session("long"), [NewMessage(role=Role.USER, content="Hi", id="t-1")]
    )
    with pytest.raises(TurnInProgress) as raised:
        retry.turn("long", "Hi", id="t-1")
    assert raised.value.retry_after == 1  # the lease, in whole seconds
    assert model.requests == [] and [m.content for m in quick.history("long")] == ["Hi"]
    reply, _ = first.finish(prepared, Reply(content="at last"), started=0.0)
    assert retry.turn("long", "Hi", id="t-1").reply == reply


def test_a_streamed_answer_is_stored_whole_when_its_reader_stops(
    quick: Turnkeeper, model_server: tuple[Upstream, str], model: Upstream
) -> None:
    assert model.stream_gate is not None
    quick.create_session(key="left")
    chat = chat_on(quick, model_server)
    prepared = chat.prepare(
        quick.get_session("left"), [NewMessage(role=Role.USER, content="Hi", id="t-1")]
    )
    stream = chat.stream(prepared)
    next(iter(stream))  # the first chunk; the model pauses after it
    stream.close()  # the reader goes away
    model.stream_gate.set()
    again = chat.turn("left", "Hi", id="t-1")  # waits for the answer still being read
    assert again.replayed and again.content == "reply 1 to: Hi"
    assert len(model.requests) == 1
    assert [m.content for m in quick.history("left")] == ["Hi", "reply 1 to: Hi"]


def test_a_cancelled_stream_stores_nothing_and_frees_the_turn(
    quick: Turnkeeper, model_server: tuple[Upstream, str], model: Upstream
) -> None:
    assert model.stream_gate is not None
    quick.create_session(key="cancelled")
    chat = chat_on(quick, model_server)
    prepared = chat.prepare(
        quick.get_session("cancelled"), [NewMessage(role=Role.USER, content="Hi", id="t-1")]
    )
    stream = chat.stream(prepared)
    next(iter(stream))
    stream.cancel()
    model.stream_gate.set()
    again = chat.turn("cancelled", "Hi", id="t-1")  # the turn is free: the model is asked
    assert not again.replayed and again.content == "reply 2 to: Hi"
    assert [m.content for m in quick.history("cancelled")] == ["Hi", "reply 2 to: Hi"]
