"""What a request must pass before the app reads its body: where it comes from, who is calling,
and how big it is.

Three ASGI middlewares, because FastAPI reads and parses a route's body before it solves the
route's dependencies, so an authentication dependency alone would let any anonymous client make
the server buffer and parse a body:

- `SiteGate` answers first, on every route (REST, the proxy, the UI, `/mcp`), for what a web
  page in the user's browser could make the browser send:
  - *Which host* (`Host`): without API keys (`--no-auth`), only loopback names and
    `allowed_hosts` are served; anything else is a 421. A page on `evil.example` that points
    its name at 127.0.0.1 (DNS rebinding) is same-origin with itself, so the browser lets it
    read every answer: only the Host header it must send gives it away. With keys on, a
    rebound page has no key to send (the UI's cookie belongs to the real host name), so the
    Host is checked only when `allowed_hosts` is set.
  - *Which site* (`Sec-Fetch-Site`, else `Origin`): a state-changing request (any method but
    GET, HEAD, OPTIONS) sent by another site's page is a 403, with keys on or off. A form
    POST needs no CORS preflight, and without keys nothing else would stop it; with keys,
    the UI's SameSite=Strict cookie still goes along with a form from a sibling subdomain
    (same *site*), so the UI needs it too. It costs real clients nothing: SDKs, curl and
    agents send neither header, the UI's own pages are same-origin, and the service answers
    no CORS preflight, so a page on another origin could never have used it anyway.
- `CallerGate` authenticates next. When a route first asks for the body and it depends on the
  API key (`deps.get_caller`) or the UI's cookie (`ui.auth.ui_caller`), the credential is
  checked before a byte is handed over, and the `Caller` is left in the request state for the
  dependency to pick up. A request without a valid one never has its body read.
- `BodyLimit` counts body bytes as they arrive, whatever the framing: a `Content-Length` over
  the limit is refused at once, and a chunked body is stopped at the first chunk that passes it.
  Either way the client gets a 413 problem, and the server never holds more than the limit.

Every refusal is the route's error shape: an RFC 9457 problem (OpenAI's shape on the proxy).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Collection
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from turnkeeper.config import Settings
from turnkeeper.errors import TurnkeeperError
from turnkeeper.server import problems
from turnkeeper.server.asgi import HTTPMiddleware
from turnkeeper.server.auth import authenticate, authenticate_remembered, bearer, key_credentials
from turnkeeper.server.deps import get_caller, get_key_caller
from turnkeeper.server.ui.auth import LoginRequired, to_login, ui_caller

CALLER_STATE = "caller"
"""Where `CallerGate` leaves the authenticated `Caller` in the request state."""


class BodyTooLarge(HTTPException):
    """The body passed the limit while it was being read. An `HTTPException`, so FastAPI's body
    reading lets it through untouched and the problem handler answers it with a 413."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than the limit of {limit} bytes")


class BodyLimit(HTTPMiddleware):
    """ASGI middleware: refuse a body larger than `max_bytes`, counted as it arrives."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        super().__init__(app)
        self.max_bytes = max_bytes

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
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


async def _refuse(
    scope: Scope,
    receive: Receive,
    send: Send,
    exc: HTTPException,
    errors: list[dict[str, str]] | None = None,
) -> None:
    """Answer `exc` before the app sees the request, in the route's error shape."""
    body = problems.problem(
        exc.status_code,
        str(exc.detail),
        instance=scope["path"],
        request_id=scope.get("state", {}).get("request_id"),
        errors=errors,
    )
    response = problems.respond(Request(scope), body)
    await response(scope, receive, send)


SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods that change nothing: a page may make a browser send them anywhere (a link, an
image), and it cannot read the answers without CORS, which the service never grants."""

OWN_SITE = frozenset({"same-origin", "none"})
"""`Sec-Fetch-Site` values of a request from this service's own pages (`none`: the person
typed the address, or used a bookmark)."""


def is_loopback_name(host: str) -> bool:
    """True for a name that only ever means this machine: `localhost`, a `*.localhost` name
    (browsers resolve those themselves, RFC 6761), or a loopback address."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str:
    """The name in a Host header, without its port, lower case: `[::1]:8000` → `[::1]`."""
    name = header.strip().lower()
    bracketed = name.startswith("[")  # an IPv6 address: its colons are not the port's
    name = name[: name.find("]") + 1] if bracketed else name.partition(":")[0]
    return name.rstrip(".")


def allowed_host(header: str | None, allowed: Collection[str]) -> bool:
    """True when the Host header names this machine's loopback or an `allowed_hosts` name."""
    if not header:
        return False
    name = host_name(header)
    return is_loopback_name(name) or name in allowed


def foreign_site(headers: Headers) -> tuple[str, str] | None:
    """The header that shows another site's page sent this request, and its value; None
    when nothing does (this service's own pages, or a client that is not a browser).
    `Sec-Fetch-Site` is what browsers send today; `Origin` answers for older ones."""
    site = headers.get("sec-fetch-site")
    if site is not None:
        return None if site.lower() in OWN_SITE else ("Sec-Fetch-Site", site)
    origin = headers.get("origin")
    if origin is None:
        return None
    try:
        netloc = urlsplit(origin).netloc.lower()
    except ValueError:
        netloc = ""
    # "null": a sandboxed frame, a file, a redirect across sites — never this service's page
    if netloc and netloc == headers.get("host", "").strip().lower():
        return None
    return ("Origin", origin)


SHOWN = 100
"""Most characters of a refused header's value repeated in the answer."""


class WrongHost(HTTPException):
    """421 Misdirected Request: this service is not the one for the host the request names."""

    def __init__(self, header: str | None) -> None:
        named = f"names {host_name(header)[:SHOWN]!r}" if header else "is missing"
        super().__init__(
            421,
            f"the Host header {named}: this service answers to loopback names (localhost, "
            "127.0.0.1, [::1]) and the names in `allowed_hosts` only",
        )


class CrossSite(HTTPException):
    """403: a change another site's page made the browser send."""

    def __init__(self, header: str, value: str) -> None:
        super().__init__(
            403,
            f"this request was sent by another site's page ({header}: {value[:SHOWN]}); "
            "changes are accepted from this service's own pages and from clients that are "
            "not browsers",
        )


class SiteGate(HTTPMiddleware):
    """ASGI middleware: refuse a Host this service does not answer to, and a state-changing
    request another site's page sent (see the module)."""

    def __init__(self, app: ASGIApp, *, check_host: bool, allowed_hosts: Collection[str]) -> None:
        super().__init__(app)
        self.check_host = check_host
        self.allowed_hosts = frozenset(allowed_hosts)

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        host = headers.get("host")
        if self.check_host and not allowed_host(host, self.allowed_hosts):
            problem = "not a loopback name, nor in allowed_hosts"
            await _refuse(scope, receive, send, WrongHost(host), [_field("Host", problem)])
            return
        foreign = foreign_site(headers) if scope["method"] not in SAFE_METHODS else None
        if foreign is not None:
            header, value = foreign
            problem = "another site's page sent this request"
            await _refuse(scope, receive, send, CrossSite(header, value), [_field(header, problem)])
            return
        await self.app(scope, receive, send)


def _field(name: str, problem: str) -> dict[str, str]:
    return {"field": name, "problem": problem}


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


class CallerGate(HTTPMiddleware):
    """ASGI middleware: authenticate a request before its body is read (see the module).

    Routing has already happened when a route first asks for the body, so the route in the
    scope says which credential it depends on; no table of paths is kept here."""

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
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
        if _needs(dependant, get_caller) or _needs(dependant, get_key_caller):
            found = key_credentials if _needs(dependant, get_key_caller) else bearer
            credentials = await found(request)
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


def install(app: FastAPI, settings: Settings) -> None:
    """Put the gates in front of `app`'s routes: the site first, then the caller, then the
    body's size (the middleware added last runs first)."""
    app.add_exception_handler(CallerRefused, refused)
    app.add_middleware(BodyLimit, max_bytes=settings.max_request_bytes)
    app.add_middleware(CallerGate)
    app.add_middleware(
        SiteGate,
        check_host=not settings.auth or bool(settings.allowed_hosts),
        allowed_hosts=settings.allowed_hosts,
    )
