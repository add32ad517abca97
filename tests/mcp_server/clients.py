"""The MCP SDK's own client, connected the two ways a host connects: to a `turnkeeper mcp`
subprocess over stdio, and to `turnkeeper serve`'s `/mcp` over streamable HTTP."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

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
