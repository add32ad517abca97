"""`/mcp`: the MCP server (`turnkeeper.mcp`) over streamable HTTP, inside the service.

The same API keys and project scoping as the REST routes: the endpoint authenticates the
bearer token before the SDK reads a byte of the body, and leaves the `Caller` in the request
state, where each tool call finds it (the SDK hands tools the HTTP request their message came
in). A project key's tools see its project only. A refused request gets its status (401
with `WWW-Authenticate`) and a JSON-RPC error body carrying the same message as a REST problem,
so an MCP client shows it. The body limit (`gate.BodyLimit`) and the Host and Origin rules
(`gate.SiteGate`) apply here as everywhere.

Stateless: each POST is served on its own, with no MCP session kept in the process, so any
replica behind a load balancer can answer any request. Without the `mcp` extra there is no
`/mcp` and the rest of the service runs as before.

The SDK is loaded at the first `/mcp` request, not at start-up: it is ~24 MiB of every server
process's memory (bench/memory_stages.py) that a service whose clients speak REST never uses.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import pydantic_core
from anyio.abc import TaskStatus
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from turnkeeper.callers import Caller, PerCallerLimit
from turnkeeper.config import Settings
from turnkeeper.errors import TurnkeeperError, Unauthenticated
from turnkeeper.server import problems
from turnkeeper.server.auth import authenticate, bearer
from turnkeeper.service import Turnkeeper

if TYPE_CHECKING:
    from mcp.server.mcpserver import Context
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

MCP_PATH = "/mcp"
CALLER_STATE = "mcp_caller"
"""Where the endpoint leaves the authenticated `Caller` in the request state."""

REFUSED = -32001
"""The JSON-RPC error code of a refused request (the implementation-defined server range)."""
INVALID_REQUEST = -32600
"""JSON-RPC's code for a message that is not a valid request."""


def caller_of(ctx: Context) -> Caller:
    """The caller of the HTTP request a tool call came in."""
    request = ctx.request_context.request
    caller = getattr(getattr(request, "state", None), CALLER_STATE, None)
    if not isinstance(caller, Caller):  # never: every request passes the endpoint first
        raise Unauthenticated("this request was not authenticated")
    return caller


class McpEndpoint:
    """ASGI app at `/mcp`: authenticate, then hand the request to the SDK's session manager,
    started at the first request while the app runs (see `running`)."""

    def __init__(self) -> None:
        self.manager: StreamableHTTPSessionManager | None = None
        self._start: Callable[[], Awaitable[StreamableHTTPSessionManager]] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            caller = await run_in_threadpool(authenticate, request, await bearer(request))
        except TurnkeeperError as exc:
            await _refusal(exc, scope)(scope, receive, send)
            return
        scope.setdefault("state", {})[CALLER_STATE] = caller
        if scope["method"] == "POST":
            body = await request.body()
            if _id_is_invalid(body):
                await _invalid_id()(scope, receive, send)
                return
            receive = _replay(body, receive)
        manager = self.manager
        if manager is None:
            if self._start is None:  # the app is not running (no lifespan): nothing to serve
                raise RuntimeError("the MCP endpoint is served only while the app's lifespan runs")
            manager = await self._start()
        await manager.handle_request(scope, receive, send)

    @asynccontextmanager
    async def running(
        self, tk: Turnkeeper, settings: Settings, searches: PerCallerLimit
    ) -> AsyncIterator[None]:
        """Let MCP be served over `tk` while the block runs: the first request starts the SDK's
        session manager in a task of this block's task group (the manager's own task group
        must stay alive for as long as requests may come, beyond the request that started
        it), and the block's end stops it."""
        stop = anyio.Event()
        starting = anyio.Lock()
        async with anyio.create_task_group() as group:

            async def start() -> StreamableHTTPSessionManager:
                async with starting:  # the requests that arrive first wait for one start
                    if self.manager is None:
                        self.manager = await group.start(self._serve, tk, settings, searches, stop)
                    return self.manager

            self._start = start
            try:
                yield
            finally:
                self._start = None
                stop.set()
        self.manager = None

    @staticmethod
    async def _serve(
        tk: Turnkeeper,
        settings: Settings,
        searches: PerCallerLimit,
        stop: anyio.Event,
        *,
        task_status: TaskStatus[StreamableHTTPSessionManager],
    ) -> None:
        """Load the SDK (in a thread: the import takes a while, the event loop serves on), build
        the server over `tk` and run its session manager until `stop`."""
        await anyio.to_thread.run_sync(importlib.import_module, "turnkeeper.mcp")
        from mcp.server.transport_security import TransportSecuritySettings

        from turnkeeper.mcp import build_server

        server = build_server(tk, caller_of, searches)
        server.streamable_http_app(
            stateless_http=True,
            json_response=True,
            # The Host and Origin rules are the service's, checked in front of every route
            # (`gate.SiteGate`): the SDK's own check (on by default for a loopback host) off,
            # so there is one definition of the hosts served.
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            max_request_body_size=settings.max_request_bytes,
            host=settings.host,
        )
        manager = server.session_manager
        async with manager.run():
            task_status.started(manager)
            await stop.wait()


def _id_is_invalid(body: bytes) -> bool:
    """True for a JSON-RPC request (a message with a `method`) whose `id` is neither a string
    nor an integer (MCP allows no other; not null either). The SDK would take it for a
    notification and answer 202 Accepted, and the client would wait for an answer forever.
    What is not JSON, or not one message, is left to the SDK, which answers 400 itself."""
    try:
        message = pydantic_core.from_json(body)  # as the SDK parses it
    except ValueError:
        return False
    if not isinstance(message, dict) or "method" not in message or "id" not in message:
        return False
    request_id = message["id"]
    return isinstance(request_id, bool) or not isinstance(request_id, str | int)


def _invalid_id() -> JSONResponse:
    """The answer to a request whose id is neither (a JSON-RPC error without an id: there is
    none it could answer)."""
    error = {
        "code": INVALID_REQUEST,
        "message": "Invalid Request: id must be a string or an integer",
    }
    return JSONResponse({"jsonrpc": "2.0", "id": None, "error": error}, 400)


def _replay(body: bytes, receive: Receive) -> Receive:
    """`receive` with the body read already handed out again first (to the SDK)."""
    replayed = False

    async def again() -> Message:
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return {"type": "http.request", "body": body, "more_body": False}

    return again


def _refusal(exc: TurnkeeperError, scope: Scope) -> JSONResponse:
    """The answer to a request without a valid key: its status and headers as REST gives
    them, with the problem in a JSON-RPC error (what an MCP client reads)."""
    request_id = scope.get("state", {}).get("request_id")
    body = problems.problem_for_error(exc, instance=scope["path"], request_id=request_id)
    status: int = body["status"]
    error = {"code": REFUSED, "message": body["detail"], "data": body}
    return JSONResponse(
        {"jsonrpc": "2.0", "id": None, "error": error},
        status,
        headers=problems.headers_for(status, exc),
    )


def install(app: FastAPI) -> None:
    """Serve MCP at `/mcp` when the `mcp` extra is installed: the route, and the SDK's
    session manager, started at the first request, running inside the app's lifespan (after
    the store is open). Whether the extra is there is asked without importing it."""
    if importlib.util.find_spec("mcp") is None:  # the service runs without /mcp
        return
    endpoint = McpEndpoint()
    app.router.routes.insert(
        0, Route(MCP_PATH, endpoint, methods=["GET", "POST", "DELETE"], name="mcp")
    )
    inner: Callable[[Any], AbstractAsyncContextManager[Any]] = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(running: FastAPI) -> AsyncIterator[Any]:
        # one statement, entered left to right: the store is open before MCP starts on it
        async with (
            inner(running) as state,
            endpoint.running(running.state.tk, running.state.settings, running.state.searches),
        ):
            yield state

    app.router.lifespan_context = lifespan
