"""Errors as RFC 9457 problem responses: the one place an exception becomes an HTTP status.

Routes never build error responses and never raise `HTTPException`: the core raises its own
`TurnkeeperError`s and this module maps each class to a status, once:

| error                                  | status | why                                            |
|----------------------------------------|--------|------------------------------------------------|
| `ContentTooLarge`                      | 413    | the cure is a smaller body, not another value  |
| `InvalidInput` (and `InvalidMessage`)  | 422    | `errors` names the field                       |
| `ContextBudgetExceeded`                | 422    | the request's budget cannot hold the turn; the |
|                                        |        | cure is another `max_tokens` (named in         |
|                                        |        | `errors`), so it is a bad value, not a big body|
| `Unauthenticated`                      | 401    | with `WWW-Authenticate: Bearer`                |
| `Forbidden`                            | 403    | a project key naming another project           |
| `NotFound` (another project's too)     | 404    |                                                |
| `Conflict` (`SeqConflict`, key taken)  | 409    |                                                |
| `SessionExpired`                       | 410    | readable for audit, never live again           |
| `UpstreamError`                        | 502    | the model endpoint failed or refused           |
| `UpstreamTimeout`                      | 504    |                                                |
| `BackendUnavailable`                   | 503    | with `Retry-After`; the next request retries   |
| anything else                          | 500    | logged with its traceback, never sent          |

FastAPI's own request validation errors and Starlette's HTTP errors (unknown route, wrong
method) go through the same builder, so every error a client sees has one shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from turnkeeper.errors import (
    BackendUnavailable,
    Conflict,
    ContentTooLarge,
    ContextBudgetExceeded,
    Forbidden,
    InvalidInput,
    NotFound,
    SessionExpired,
    TurnkeeperError,
    Unauthenticated,
    UpstreamError,
    UpstreamTimeout,
)
from turnkeeper.logs import get_logger

MEDIA_TYPE = "application/problem+json"
TYPE_BASE = "urn:turnkeeper:problem:"

# Most specific first: the first class an error is an instance of decides.
STATUS_BY_ERROR: tuple[tuple[type[TurnkeeperError], int], ...] = (
    (ContentTooLarge, 413),
    (InvalidInput, 422),
    (ContextBudgetExceeded, 422),
    (Unauthenticated, 401),
    (Forbidden, 403),
    (NotFound, 404),
    (SessionExpired, 410),
    (Conflict, 409),
    (UpstreamTimeout, 504),
    (UpstreamError, 502),
    (BackendUnavailable, 503),
)

log = get_logger("turnkeeper.server")


def status_for(error: TurnkeeperError) -> int:
    return next((status for cls, status in STATUS_BY_ERROR if isinstance(error, cls)), 400)


def _slug(status: int) -> str:
    return HTTPStatus(status).phrase.lower().replace(" ", "-").replace("'", "")


def problem(
    status: int,
    detail: str,
    *,
    instance: str,
    request_id: str | None = None,
    errors: Sequence[dict[str, str]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A problem document: type, title, status, detail, instance (+ request id, field errors)."""
    body: dict[str, Any] = {
        "type": TYPE_BASE + _slug(status),
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "instance": instance,
    }
    if request_id:
        body["request_id"] = request_id
    if errors:
        body["errors"] = list(errors)
    return body | extra


def problem_for_error(
    error: TurnkeeperError, *, instance: str, request_id: str | None = None
) -> dict[str, Any]:
    """The problem document of a core error (also used for errors inside a stream)."""
    status = status_for(error)
    errors: list[dict[str, str]] | None = None
    extra: dict[str, Any] = {}
    if isinstance(error, InvalidInput):
        errors = [{"field": error.field, "problem": error.problem}]
    elif isinstance(error, ContextBudgetExceeded):
        errors = [{"field": "max_tokens", "problem": str(error)}]
    elif isinstance(error, UpstreamError) and error.status is not None:
        extra["upstream_status"] = error.status
    return problem(
        status, str(error), instance=instance, request_id=request_id, errors=errors, **extra
    )


def respond(
    request: Request, body: dict[str, Any], headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(body, status_code=body["status"], media_type=MEDIA_TYPE, headers=headers)


def _request_id(request: Request) -> str | None:
    return getattr(request.state, "request_id", None)


def _headers_for(status: int) -> dict[str, str] | None:
    if status == 401:
        return {"WWW-Authenticate": 'Bearer realm="turnkeeper"'}
    if status == 503:
        return {"Retry-After": "1"}
    return None


async def turnkeeper_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, TurnkeeperError)
    body = problem_for_error(exc, instance=request.url.path, request_id=_request_id(request))
    if body["status"] >= 500:
        log.warning(
            "request_failed", status=body["status"], error=type(exc).__name__, detail=str(exc)
        )
    return respond(request, body, _headers_for(body["status"]))


def field_name(location: Sequence[int | str]) -> str:
    """`("body", "messages", 0, "role")` → `messages[0].role`; `("query", "limit")` → `limit`."""
    parts = (
        list(location[1:])
        if location and location[0] in ("body", "query", "path", "header")
        else list(location)
    )
    name = ""
    for part in parts:
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else str(part))
    return name or "body"


async def validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [{"field": field_name(e["loc"]), "problem": e["msg"]} for e in exc.errors()]
    detail = "; ".join(f"{e['field']}: {e['problem']}" for e in errors)
    body = problem(
        422, detail, instance=request.url.path, request_id=_request_id(request), errors=errors
    )
    return respond(request, body)


async def http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    body = problem(
        exc.status_code,
        str(exc.detail),
        instance=request.url.path,
        request_id=_request_id(request),
    )
    return respond(request, body, dict(exc.headers or {}) or _headers_for(exc.status_code))


async def unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    """A bug: the traceback goes to the log, the client gets a problem without it."""
    log.error("unhandled_error", exc_info=exc, path=request.url.path)
    body = problem(
        500,
        "an unexpected error occurred; it has been logged",
        instance=request.url.path,
        request_id=_request_id(request),
    )
    return respond(request, body)


def install(app: FastAPI) -> None:
    """Register the handlers on an app."""
    app.add_exception_handler(TurnkeeperError, turnkeeper_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, unexpected_error)


PROBLEM_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {
        "description": HTTPStatus(status).phrase,
        "content": {MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
    }
    for status in (400, 401, 403, 404, 409, 410, 413, 422, 503)
}
"""The problem responses every `/v1` route may give, for the OpenAPI schema."""
