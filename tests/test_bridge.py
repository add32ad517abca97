"""The greenlet bridge (`turnkeeper.bridge`): sync code awaiting on the loop, with errors,
nesting, context variables, cancellation and the bridge-safe `Mutex`."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from typing import Any

import pytest

from tests.conftest import run_async
from turnkeeper.bridge import BridgeError, Mutex, await_only, entered, in_bridge, run_bridged

TRACE: contextvars.ContextVar[str] = contextvars.ContextVar("trace", default="-")


async def _later(value: Any, seconds: float = 0.001) -> Any:
    await asyncio.sleep(seconds)
    return value


async def _fails(message: str) -> None:
    await asyncio.sleep(0)
    raise KeyError(message)


def test_sync_code_awaits_through_the_bridge_and_gets_results_in_order() -> None:
    def add_up() -> tuple[bool, int]:
        return in_bridge(), sum(await_only(_later(n)) for n in range(1, 5))

    assert run_async(run_bridged(add_up)) == (True, 10)
    assert not in_bridge()


def test_await_only_outside_the_bridge_is_a_clear_error_not_a_block() -> None:
    awaitable = _later(1)
    with pytest.raises(BridgeError, match="outside run_bridged"):
        await_only(awaitable)
    assert awaitable.cr_frame is None  # closed: no "never awaited" warning


def test_an_awaited_error_reaches_the_sync_code_which_may_handle_it() -> None:
    def recover() -> str:
        try:
            await_only(_fails("inner"))
        except KeyError as exc:
            return f"handled {exc.args[0]}"
        return "not raised"

    assert run_async(run_bridged(recover)) == "handled inner"


def test_an_error_of_the_sync_code_reaches_the_awaiting_caller_unchanged() -> None:
    class Refused(Exception):
        pass

    def refuse() -> None:
        await_only(_later(None))
        raise Refused("no")

    with pytest.raises(Refused, match="no"):
        run_async(run_bridged(refuse))


def test_bridged_code_nests_inside_an_awaitable_of_other_bridged_code() -> None:
    def inner(n: int) -> int:
        return int(await_only(_later(n * 10)))

    def outer() -> list[int]:
        deep = await_only(run_bridged(inner, 2))  # a bridge inside an awaited coroutine
        return [deep, int(await_only(_later(3)))]

    assert run_async(run_bridged(outer)) == [20, 3]


def test_the_callers_context_variables_reach_the_sync_code_and_do_not_leak_back() -> None:
    def read_and_set() -> str:
        seen = TRACE.get()
        TRACE.set("changed inside")
        await_only(_later(None))
        return seen

    async def call() -> tuple[str, str]:
        TRACE.set("request-7")
        seen = await run_bridged(read_and_set)
        return seen, TRACE.get()

    assert run_async(call()) == ("request-7", "request-7")


def test_cancelling_the_caller_unwinds_the_sync_code_at_its_pending_await() -> None:
    unwound: list[str] = []

    class Resource:
        async def __aenter__(self) -> str:
            return "held"

        async def __aexit__(self, *exc: object) -> None:
            await asyncio.sleep(0)  # the release itself awaits, after the cancellation
            unwound.append(type(exc[1]).__name__)

    def hold_and_wait() -> None:
        with entered(Resource()):
            await_only(asyncio.sleep(30))

    async def cancel_it() -> bool:
        task = asyncio.create_task(run_bridged(hold_and_wait))
        await asyncio.sleep(0.05)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return True
        return False

    assert run_async(cancel_it()) is True
    assert unwound == ["CancelledError"]


def test_two_bridged_tasks_contending_on_a_mutex_take_turns_without_blocking_the_loop() -> None:
    mutex = Mutex()
    order: list[str] = []

    def critical(name: str) -> None:
        with mutex:
            order.append(f"{name} in")
            await_only(asyncio.sleep(0.02))  # the holder parks; the other must not block
            order.append(f"{name} out")

    async def both() -> None:
        await asyncio.wait_for(
            asyncio.gather(run_bridged(critical, "a"), run_bridged(critical, "b")), timeout=5
        )

    run_async(both())
    assert order in (
        ["a in", "a out", "b in", "b out"],
        ["b in", "b out", "a in", "a out"],
    )
    assert not mutex.locked()


def test_a_mutex_still_excludes_plain_threads() -> None:
    mutex = Mutex()
    inside = 0
    most = 0
    guard = threading.Lock()

    def work() -> None:
        nonlocal inside, most
        for _ in range(200):
            with mutex:
                with guard:
                    inside += 1
                    most = max(most, inside)
                with guard:
                    inside -= 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most == 1
