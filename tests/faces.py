"""The async face driven by sync test code, so one suite proves both faces.

`Blocking(face, loop)` looks like a `Turnkeeper` to a test: each coroutine method of the async
face is started on `loop` (an event loop on a thread of its own, as an app's would be) and
waited for; an async iterator is drained on the loop; sub-objects (`tk.agents`, `tk.transfer`,
`tk.keys`) are wrapped the same way; plain attributes (`store`, `settings`, `now`…) pass
through. Errors are the face's own, re-raised unchanged.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from turnkeeper.service.aio import Face

T = TypeVar("T")


class Blocking:
    """A sync view of an async face (see the module docstring)."""

    def __init__(self, face: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._face = face
        self._loop = loop

    def _wait(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._face, name)
        if isinstance(value, Face):
            return Blocking(value, self._loop)
        if inspect.iscoroutinefunction(value):
            return self._blocking(value)
        if inspect.isasyncgenfunction(value):
            return self._drained(value)
        return value

    def _blocking(self, method: Callable[..., Coroutine[Any, Any, Any]]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            return self._wait(method(*args, **kwargs))

        return call

    def _drained(self, method: Callable[..., AsyncIterator[Any]]) -> Callable[..., Iterator[Any]]:
        async def drain(items: AsyncIterator[Any]) -> list[Any]:
            return [item async for item in items]

        def call(*args: Any, **kwargs: Any) -> Iterator[Any]:
            return iter(self._wait(drain(method(*args, **kwargs))))

        return call


@contextmanager
def running_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop running on a daemon thread until the block ends."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="test-event-loop", daemon=True)
    thread.start()
    try:
        yield loop
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
