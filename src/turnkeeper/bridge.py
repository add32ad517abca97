"""The greenlet bridge: the one sync core, run on an event loop over async drivers.

turnkeeper's logic (strategies, validation, the store's SQL and transactions, the cache) is
written once, as plain functions. `run_bridged(fn)` runs such a function in a child greenlet on
the event loop's thread; wherever the sync code reaches I/O it calls `await_only(awaitable)`,
which switches to the parent, where the awaitable is awaited on the loop; its result (or
exception) is switched back into the sync code. So a PostgreSQL write is the same `SQLStore`
method whether a thread or the loop runs it; only the executor underneath differs (psycopg's
`AsyncConnection` in the bridge, the blocking one outside it). This is how SQLAlchemy's asyncio
extension shares its sync core with async drivers.

Rules for code that may run in the bridge:

- Ask `in_bridge()` to choose the async driver; `await_only` outside the bridge is an error
  (`BridgeError`), never a silent block.
- Never hold a `threading.Lock` across a call that may `await_only`: another greenlet on the
  same thread would block the loop on it forever. `Mutex` is a lock that is safe there.
- Anything else that blocks (an upstream HTTP call, a `time.sleep`) goes to a thread with
  `await_only(asyncio.to_thread(...))`, or the loop stalls for its duration.

`greenlet` comes with the `postgres` extra; without it `in_bridge()` is always False and
`run_bridged` says which extra is missing.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import Any, ParamSpec, TypeVar

from turnkeeper.errors import InvalidConfig, TurnkeeperError

try:
    import greenlet
except ImportError:  # pragma: no cover - depends on the installed extras
    greenlet = None

__all__ = [
    "BridgeError",
    "Mutex",
    "await_only",
    "entered",
    "in_bridge",
    "run_bridged",
    "runs_natively",
]

P = ParamSpec("P")
T = TypeVar("T")


class BridgeError(TurnkeeperError):
    """`await_only` was called where no `run_bridged` is awaiting: a programming error."""


if greenlet is not None:

    class _Bridged(greenlet.greenlet):  # type: ignore[misc] # greenlet ships no types
        """A child greenlet started by `run_bridged`; its parent awaits on its behalf."""

        def __init__(self, fn: Callable[..., Any], driver: greenlet.greenlet) -> None:
            super().__init__(fn, driver)
            self.driver = driver


def runs_natively(part: object) -> bool:
    """Whether `part` (a store, a cached store) awaits all its I/O in the bridge: it says so
    with a true `native_async` attribute, and greenlet is installed."""
    return greenlet is not None and getattr(part, "native_async", False) is True


def in_bridge() -> bool:
    """Whether the running code is inside `run_bridged`, where `await_only` may be used."""
    return greenlet is not None and isinstance(greenlet.getcurrent(), _Bridged)


def await_only(awaitable: Awaitable[T]) -> T:
    """Await `awaitable` from sync code run by `run_bridged`, and return its result (or raise
    its exception). Outside the bridge this raises `BridgeError` (the awaitable is closed)."""
    current = greenlet.getcurrent() if greenlet is not None else None
    if not isinstance(current, _Bridged):
        if asyncio.iscoroutine(awaitable):
            awaitable.close()  # no "never awaited" warning on top of the error
        raise BridgeError(
            "await_only() called outside run_bridged(): this code path is not running on the"
            " event loop's bridge, so it cannot await"
        )
    return current.driver.switch(awaitable)  # type: ignore[no-any-return]


async def run_bridged(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`fn(*args, **kwargs)` on the running loop, each `await_only` in it awaited here.

    The caller's context variables travel with the call (a copy, as with `asyncio.to_thread`).
    Cancelling the awaiting task raises `CancelledError` inside `fn` at its pending
    `await_only`, so its `with` blocks unwind (a transaction rolls back, a connection goes back
    to its pool) before the cancellation reaches the caller."""
    if greenlet is None:  # pragma: no cover - depends on the installed extras
        raise InvalidConfig(
            "async", "native async drivers need greenlet: pip install 'turnkeeper[postgres]'"
        )
    child = _Bridged(fn, greenlet.getcurrent())
    child.gr_context = contextvars.copy_context()
    result: Any = child.switch(*args, **kwargs)
    while not child.dead:
        try:
            value = await result
        except BaseException:  # every outcome, cancellation too, goes back in
            result = child.throw(*sys.exc_info())
        else:
            result = child.switch(value)
    return result  # type: ignore[no-any-return]


@contextmanager
def entered(manager: AbstractAsyncContextManager[T]) -> Iterator[T]:
    """An async context manager used from bridged sync code (`with entered(pool.connection())`):
    its enter and exit are awaited with `await_only`, and an exception reaches its exit."""
    value = await_only(manager.__aenter__())
    try:
        yield value
    except BaseException:
        if not await_only(manager.__aexit__(*sys.exc_info())):
            raise
    else:
        await_only(manager.__aexit__(None, None, None))


class Mutex:
    """A lock for code that runs on threads and in the bridge alike.

    A thread blocks on it as on a `threading.Lock`. In the bridge the holder may be another
    greenlet of this very thread, parked at an `await_only`: blocking would stop the loop that
    must resume the holder. So a bridged caller that finds it held waits on the loop instead,
    retrying after a short sleep that grows to 20 ms. Contention is the rare case it is used
    for (one summary build per session at a time); the uncontended path is one `acquire`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def acquire(self) -> None:
        if not in_bridge():
            self._lock.acquire()
            return
        delay = 0.0005
        while not self._lock.acquire(blocking=False):
            await_only(asyncio.sleep(delay))
            delay = min(delay * 2, 0.02)

    def release(self) -> None:
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    def __enter__(self) -> Mutex:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
