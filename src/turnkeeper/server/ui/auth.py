"""Who is using the UI: the API key a person typed into the login form, kept in a cookie.

A browser cannot send an `Authorization` header on a plain navigation, so the key travels in an
HttpOnly (no script can read it), SameSite=Strict (a page of another site cannot make the browser
send it) cookie. A form sent by any page but this service's own, even one on a sibling subdomain
(the same site, so the cookie would go along), is refused before this is asked
(`gate.SiteGate`). The key is checked by the same `authenticate` the REST routes use, so the UI
acts with exactly that key's project scope.
"""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import RedirectResponse, Response
from fastapi.security import HTTPAuthorizationCredentials

from turnkeeper.errors import Unauthenticated
from turnkeeper.server.auth import Caller, authenticate

COOKIE = "turnkeeper_key"


class LoginRequired(Exception):
    """No valid key in the cookie: the browser is sent to the login form."""


def ui_caller(request: Request) -> Caller:
    """The caller behind the cookie (every caller is an admin when auth is off); the one
    `gate.CallerGate` found before the form was read, when it ran."""
    caller: Caller | None = getattr(request.state, "caller", None)
    if caller is not None:
        return caller
    token = request.cookies.get(COOKIE)
    credentials = (
        HTTPAuthorizationCredentials(scheme="Bearer", credentials=token) if token else None
    )
    try:
        found = authenticate(request, credentials)
    except Unauthenticated:
        raise LoginRequired() from None
    request.state.caller = found  # for the error page's layout (search box, log out)
    return found


async def to_login(request: Request, exc: Exception) -> Response:
    """Send the browser to the login form (a script's fetch gets a plain 401 instead)."""
    if "text/html" not in request.headers.get("accept", ""):
        return Response("log in again", status_code=401, media_type="text/plain")
    return RedirectResponse("/login", status_code=303)


def remember(response: Response, token: str, *, secure: bool) -> None:
    response.set_cookie(
        COOKIE, token, httponly=True, samesite="strict", secure=secure, path="/", max_age=None
    )


def forget(response: Response) -> None:
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
