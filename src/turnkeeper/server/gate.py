"""What a request must pass before the app reads its body: who is calling, and how big it is.

Two ASGI middlewares, because FastAPI reads and parses a route's body before it solves the
route's dependencies, so an authentication dependency alone would let any anonymous client make
the server buffer and parse a body:

- `CallerGate` authenticates first. When a route first asks for the body and it depends on the
  API key (`deps.get_caller`) or the UI's cookie (`ui.auth.ui_caller`), the credential is
  checked before a byte is handed over, and the `Caller` is left in the request state for the
  dependency to pick up. A request without a valid one never has its body read.
- `BodyLimit` counts body bytes as they arrive, whatever the framing: a `Content-Length` over
  the limit is refused at once, and a chunked body is stopped at the first chunk that passes it.
  Either way the client gets a 413 problem, and the server never holds more than the limit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from turnkeeper.errors import TurnkeeperError
from turnkeeper.server import problems
from turnkeeper.server.auth import authenticate, authenticate_remembered, bearer
from turnkeeper.server.deps import get_caller
from turnkeeper.server.ui.auth import LoginRequired, to_login, ui_caller

CALLER_STATE = "caller"
"""Where `CallerGate` leaves the authenticated `Caller` in the request state."""


class BodyTooLarge(HTTPException):
    """The body passed the limit while it was being read. An `HTTPException`, so FastAPI's body
    reading lets it through untouched and the problem handler answers it with a 413."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than the limit of {limit} bytes")


class BodyLimit:
    """ASGI middleware: refuse a body larger than `max_bytes`, counted as it arrives."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        announced = dict(scope.get("headers", [])).get(b"content-length", b"0")
        if announced.isdigit() and int(announced) > self.max_bytes:
            await _refuse(scope, receive, send, BodyTooLarge(self.max_bytes))
            return
        received = 0
        started = False

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except BodyTooLarge as exc:  # read where no handler answered it (none does today)
            if started:
                raise
            await _refuse(scope, receive, send, exc)


async def _refuse(scope: Scope, receive: Receive, send: Send, exc: HTTPException) -> None:
    body = problems.problem(
        exc.status_code,
        str(exc.detail),
        instance=scope["path"],
        request_id=scope.get("state", {}).get("request_id"),
    )
    response = JSONResponse(body, exc.status_code, media_type=problems.MEDIA_TYPE)
    await response(scope, receive, send)


def _needs(dependant: Dependant | None, wanted: Callable[..., Any]) -> bool:
    return dependant is not None and any(
        dep.call is wanted or _needs(dep, wanted) for dep in dependant.dependencies
    )


class CallerRefused(HTTPException):
    """No valid credential, found when the body was first asked for: `response` (a 401 problem,
    or the UI's login redirect) is the answer. An `HTTPException`, so FastAPI's body reading
    lets it through to `refused`, the handler `install` registers."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


async def refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, CallerRefused)
    return exc.response


class CallerGate:
    """ASGI middleware: authenticate a request before its body is read (see the module).

    Routing has already happened when a route first asks for the body, so the route in the
    scope says which credential it depends on; no table of paths is kept here."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        checked = False

        async def after_authentication() -> Message:
            nonlocal checked
            if not checked:
                checked = True
                await _authenticate(scope)
            return await receive()

        await self.app(scope, after_authentication, send)


async def _authenticate(scope: Scope) -> None:
    """Leave the caller of the route in `scope` in the request state, or raise `CallerRefused`."""
    dependant = getattr(scope.get("route"), "dependant", None)
    request = Request(scope)
    try:
        if _needs(dependant, get_caller):
            credentials = await bearer(request)
            caller = authenticate_remembered(request, credentials) or await run_in_threadpool(
                authenticate, request, credentials
            )
        elif _needs(dependant, ui_caller):
            caller = await run_in_threadpool(ui_caller, request)
        else:
            return
    except LoginRequired as exc:
        raise CallerRefused(await to_login(request, exc)) from None
    except TurnkeeperError as exc:
        body = problems.problem_for_error(
            exc, instance=scope["path"], request_id=scope.get("state", {}).get("request_id")
        )
        raise CallerRefused(
            problems.respond(request, body, problems.headers_for(body["status"], exc))
        ) from None
    scope.setdefault("state", {})[CALLER_STATE] = caller


def install(app: FastAPI, *, max_request_bytes: int) -> None:
    """Put both gates in front of `app`'s routes (the caller is checked first)."""
    app.add_exception_handler(CallerRefused, refused)
    app.add_middleware(BodyLimit, max_bytes=max_request_bytes)
    app.add_middleware(CallerGate)
