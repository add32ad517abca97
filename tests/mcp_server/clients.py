"""The MCP SDK's own client, connected the two ways a host connects: to a `turnkeeper mcp`
subprocess over stdio, and to `turnkeeper serve`'s `/mcp` over streamable HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import Future
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypeVar

import httpx2
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent


@asynccontextmanager
async def over_stdio(*args: str, env: dict[str, str] | None = None) -> AsyncIterator[ClientSession]:
    """A session with `python -m turnkeeper mcp ARGS…`, started as a host starts it (with
    `env` added to its environment)."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "turnkeeper", "mcp", *args],
        env={"TURNKEEPER_CONFIG": os.devnull, "PYTHONPATH": os.pathsep.join(sys.path)}
        | (env or {}),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


T = TypeVar("T")


class HeldSession:
    """An MCP session kept open across tests, on an event loop of its own in a thread: the
    SDK's session lives in the task that opened it, and each test's `run_async` is a new loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, session: ClientSession) -> None:
        self._loop = loop
        self.session = session

    def run(self, work: Callable[[ClientSession], Awaitable[T]], timeout: float = 120) -> T:
        """`work(session)`, run on the session's loop; what it returns (or raises)."""

        async def call() -> T:
            return await work(self.session)

        return asyncio.run_coroutine_threadsafe(call(), self._loop).result(timeout)


@contextmanager
def held_stdio(*args: str, env: dict[str, str] | None = None) -> Iterator[HeldSession]:
    """One session with `python -m turnkeeper mcp ARGS…` (as `over_stdio`) for the whole
    block, for tests that need a server running but not one of their own: each server costs
    a second of CPU to start."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    opened: Future[ClientSession] = Future()
    release = asyncio.Event()  # bound to `loop` when `hold` first waits on it

    async def hold() -> None:
        try:
            async with over_stdio(*args, env=env) as session:
                opened.set_result(session)
                await release.wait()
        except BaseException as exc:
            if not opened.done():
                opened.set_exception(exc)
            raise

    holding = asyncio.run_coroutine_threadsafe(hold(), loop)
    try:
        yield HeldSession(loop, opened.result(timeout=120))
    finally:
        loop.call_soon_threadsafe(release.set)
        try:
            holding.result(timeout=60)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=60)
            loop.close()


@asynccontextmanager
async def over_http(url: str, key: str | None) -> AsyncIterator[ClientSession]:
    """A session with the service's `/mcp` at `url`, sending `key` as the bearer token."""
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def text_of(result: CallToolResult) -> str:
    (content,) = result.content
    assert isinstance(content, TextContent)
    return content.text


def document(result: CallToolResult) -> dict[str, Any]:
    """A successful tool call's JSON document (checked to be the same as text and as
    structured content)."""
    assert not result.is_error, text_of(result)
    parsed: dict[str, Any] = json.loads(text_of(result))
    assert parsed == result.structured_content
    return parsed


def error_of(result: CallToolResult) -> str:
    """A failed tool call's message."""
    assert result.is_error, result
    return text_of(result)


def mcp_error_in(exc: BaseException) -> MCPError | None:
    """The `MCPError` an exception is, or holds (the SDK's task groups wrap what they raise
    in exception groups)."""
    if isinstance(exc, MCPError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            if (found := mcp_error_in(inner)) is not None:
                return found
    return None
