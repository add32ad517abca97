"""Errors as RFC 9457 problem responses: the one place an exception becomes an HTTP status.

Routes never build error responses and never raise `HTTPException`: the core raises its own
`TurnkeeperError`s and this module maps each class to a status, once:

| error                                  | status | why                                            |
|----------------------------------------|--------|------------------------------------------------|
| `ContentTooLarge`                      | 413    | the cure is a smaller body, not another value  |
| `MalformedRequest`                     | 400    | a header sent twice; `errors` names it         |
| `InvalidInput` (and `InvalidMessage`)  | 422    | `errors` names the field                       |
| `ContextBudgetExceeded`                | 422    | the request's budget cannot hold the turn; the |
|                                        |        | cure is another `budget_tokens` (named in      |
|                                        |        | `errors`), so it is a bad value, not a big body|
| `Unauthenticated`                      | 401    | with `WWW-Authenticate: Bearer`                |
| `Forbidden`                            | 403    | a project key naming another project           |
| `SessionErased`                        | 410    | erased: its id never comes back                |
| `NotFound` (another project's too)     | 404    |                                                |
| `Conflict` (`SeqConflict`, key taken)  | 409    |                                                |
| `TurnInProgress`                       | 409    | with `Retry-After`: the turn's first request is|
|                                        |        | still answering it; the same request later gets|
|                                        |        | its answer (and the OpenAI SDKs retry it)      |
| `SessionExpired`                       | 410    | readable for audit, never live again           |
| `KeyDestroyed`                         | 410    | deleted, its data key destroyed: its rows (a   |
|                                        |        | restored backup's) can never be read again     |
| `KeyUnavailable`                       | 503    | a master key missing from `encryption_key` (or |
|                                        |        | data the keys do not open): the operator's to  |
|                                        |        | fix, not the client's; no `Retry-After`, and   |
|                                        |        | `x-should-retry: false` (the SDKs retry 503s)  |
| `UpstreamError`                        | 502    | the model endpoint failed or refused (429 when |
|                                        |        | it was rate-limited; its `Retry-After` passed) |
| `UpstreamTimeout`                      | 504    |                                                |
| `BackendUnavailable`                   | 503    | with `Retry-After`; the next request retries   |
| `TooManyRequests`                      | 429    | this key runs its most searches at once; with  |
|                                        |        | `Retry-After`                                  |
| `Unsupported`                          | 501    | the store lacks a capability (e.g. summaries)  |
| anything else                          | 500    | logged with its traceback, never sent          |

A client is told what went wrong in its own terms; how it went wrong inside is for the logs.
The 5xx answers of a failure inside the deployment (the database unreachable, the model
endpoint unreachable or too slow) say so in a fixed sentence, never naming a host, port, user,
database, URL or driver message: the probes need no API key, so anyone could read them. The
full error is logged with the request id the client also gets. (A model endpoint that answered
with an error of its own keeps its message: that is the model speaking, not our plumbing.)

FastAPI's own request validation errors, Starlette's HTTP errors (unknown route, wrong
method) and the gates' refusals before a route runs (`gate`: 413 a body over the limit, 421 a
Host not served, 403 a change another site's page sent) go through the same builder, so every
error a client sees has one shape, except on
the OpenAI-compatible routes (`/v1/chat/completions`, `/v1/models`, `/v1/conversations`,
`/v1/responses`): there the same errors go out in OpenAI's shape, `{"error": {"message", "type",
"param", "code"}}`, which the OpenAI SDKs read and show, and a bad value is a 400 naming it in
`param`, as OpenAI's API answers (the proxy's stays 422, as it always was); and on Anthropic's
Messages API (`/v1/messages`) in Anthropic's shape, `{"type": "error", "error": {"type",
"message"}}`, a bad value a 400 as Anthropic answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from turnkeeper.callers import Caller, located
from turnkeeper.errors import (
    BackendUnavailable,
    Conflict,
    ContentTooLarge,
    ContextBudgetExceeded,
    Forbidden,
    InvalidInput,
    KeyDestroyed,
    KeyUnavailable,
    MalformedRequest,
    NotFound,
    SessionErased,
    SessionExpired,
    SessionNotFound,
    TooManyRequests,
    TurnInProgress,
    TurnkeeperError,
    Unauthenticated,
    Unsupported,
    UpstreamError,
    UpstreamTimeout,
)
from turnkeeper.logs import get_logger

MEDIA_TYPE = "application/problem+json"
TYPE_BASE = "urn:turnkeeper:problem:"

# Most specific first: the first class an error is an instance of decides.
STATUS_BY_ERROR: tuple[tuple[type[TurnkeeperError], int], ...] = (
    (ContentTooLarge, 413),
    (MalformedRequest, 400),
    (InvalidInput, 422),
    (ContextBudgetExceeded, 422),
    (Unauthenticated, 401),
    (Forbidden, 403),
    (SessionErased, 410),
    (NotFound, 404),
    (SessionExpired, 410),
    (KeyDestroyed, 410),
    (KeyUnavailable, 503),
    (Conflict, 409),
    (UpstreamTimeout, 504),
    (UpstreamError, 502),
    (BackendUnavailable, 503),
    (TooManyRequests, 429),
    (Unsupported, 501),
)

log = get_logger("turnkeeper.server")


OPENAI_PATHS = ("/v1/chat/completions", "/v1/models", "/v1/conversations", "/v1/responses")
"""Routes whose clients are OpenAI SDKs (these paths and those under them): their errors take
OpenAI's shape."""
OPENAI_400_PATHS = OPENAI_PATHS[1:]
"""Of those, the ones that answer a bad value 400 as OpenAI's API does (the proxy keeps the
422 it has always answered)."""


ANTHROPIC_PATHS = ("/v1/messages",)
"""Routes whose clients are Anthropic SDKs: their errors take Anthropic's shape."""


def _under(path: str, prefixes: tuple[str, ...]) -> bool:
    return any(path == prefix or path.startswith(f"{prefix}/") for prefix in prefixes)


_OPENAI_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    429: "rate_limit_error",
}


def status_for(error: TurnkeeperError) -> int:
    if isinstance(error, UpstreamError) and error.status == 429:
        return 429  # the upstream's rate limit is the client's too: it should slow down
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


DATABASE_UNREACHABLE = "the database is unreachable; try again shortly"
MODEL_UNREACHABLE = "the model endpoint could not be reached or failed mid-answer"
MODEL_TOO_SLOW = "the model endpoint did not answer in time"


def public_detail(error: TurnkeeperError) -> str:
    """What a client may read of `error` (see the module: nothing of the deployment's inside)."""
    if isinstance(error, BackendUnavailable):
        return DATABASE_UNREACHABLE
    if isinstance(error, UpstreamTimeout):
        return MODEL_TOO_SLOW
    if isinstance(error, UpstreamError) and error.status is None:
        return MODEL_UNREACHABLE
    return str(error)


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
        errors = [{"field": "budget_tokens", "problem": str(error)}]
    elif isinstance(error, UpstreamError) and error.status is not None:
        extra["upstream_status"] = error.status
    return problem(
        status,
        public_detail(error),
        instance=instance,
        request_id=request_id,
        errors=errors,
        **extra,
    )


def openai_error(body: dict[str, Any]) -> dict[str, Any]:
    """A problem document in OpenAI's error shape (the SDKs show `message`)."""
    status: int = body["status"]
    errors = body.get("errors") or [{}]
    kind = _OPENAI_TYPES.get(status) or ("api_error" if status >= 500 else "invalid_request_error")
    return {
        "error": {
            "message": body["detail"],
            "type": kind,
            "param": errors[0].get("field"),
            "code": _slug(status).replace("-", "_"),
        }
    }


_ANTHROPIC_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def anthropic_error(body: dict[str, Any]) -> dict[str, Any]:
    """A problem document in Anthropic's error shape (the SDKs show `message`)."""
    status: int = body["status"]
    kind = _ANTHROPIC_TYPES.get(status) or (
        "api_error" if status >= 500 else "invalid_request_error"
    )
    error = {"type": "error", "error": {"type": kind, "message": body["detail"]}}
    return error | ({"request_id": body["request_id"]} if body.get("request_id") else {})


def _no_retry(status: int, headers: dict[str, str] | None) -> dict[str, str] | None:
    """`x-should-retry: false` on an answer a retry cannot improve: the OpenAI and Anthropic
    SDKs retry 408, 409, 429 and every 5xx by default, and obey the header. Of those, a 409
    improves only with `Retry-After` (a turn still being answered), and a 501 (this deployment
    lacks what the request needs) never does."""
    retryable = status in (408, 429) or "Retry-After" in (headers or {})
    if retryable or (status >= 500 and status != 501):
        return headers
    return (headers or {}) | {"x-should-retry": "false"}


def respond(
    request: Request, body: dict[str, Any], headers: dict[str, str] | None = None
) -> JSONResponse:
    path = request.url.path
    if _under(path, ANTHROPIC_PATHS):
        body = body | {"status": 400} if body["status"] == 422 else body
        return JSONResponse(
            anthropic_error(body),
            status_code=body["status"],
            headers=_no_retry(body["status"], headers),
        )
    if _under(path, OPENAI_PATHS):
        if body["status"] == 422 and _under(path, OPENAI_400_PATHS):
            body = body | {"status": 400}
        headers = _no_retry(body["status"], headers)
        return JSONResponse(openai_error(body), status_code=body["status"], headers=headers)
    return JSONResponse(body, status_code=body["status"], media_type=MEDIA_TYPE, headers=headers)


def _request_id(request: Request) -> str | None:
    return getattr(request.state, "request_id", None)


def headers_for(status: int, error: Exception | None = None) -> dict[str, str] | None:
    if isinstance(error, UpstreamError) and error.retry_after:
        return {"Retry-After": error.retry_after}
    if isinstance(error, UpstreamError) and error.refused:
        # a 502 the SDKs would retry: the upstream refused the request, and would again
        return {"x-should-retry": "false"}
    if isinstance(error, TurnInProgress | TooManyRequests):
        return {"Retry-After": str(error.retry_after)}
    if isinstance(error, KeyUnavailable) and status == 503:
        # the configuration must change first: not in a second, and not by the SDKs' retries
        return {"x-should-retry": "false"}
    if status == 401:
        return {"WWW-Authenticate": 'Bearer realm="turnkeeper"'}
    if status == 503:
        return {"Retry-After": "1"}
    return None


async def turnkeeper_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, TurnkeeperError)
    error = exc
    if isinstance(error, SessionNotFound) and not isinstance(error, SessionErased):
        error = await run_in_threadpool(_located, request, error)
    body = problem_for_error(error, instance=request.url.path, request_id=_request_id(request))
    if body["status"] >= 500:
        log.warning(
            "request_failed", status=body["status"], error=type(exc).__name__, detail=str(exc)
        )
    return respond(request, body, headers_for(body["status"], exc))


def _located(request: Request, error: SessionNotFound) -> SessionNotFound:
    """A session not found in the request's project, with where it is when the caller may see
    that project (an admin key; a project key only ever sees its own, so it learns nothing)."""
    caller: Caller | None = getattr(request.state, "caller", None)
    if caller is None:
        return error
    return located(
        request.app.state.tk, error, may_see=caller.may_see,
        how=lambda project: f"ask with project={project}",
    )  # fmt: skip


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
    return respond(request, body, dict(exc.headers or {}) or headers_for(exc.status_code))


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
    for status in (400, 401, 403, 404, 409, 410, 413, 421, 422, 429, 503)
}
"""The problem responses every `/v1` route may give, for the OpenAPI schema."""

UPSTREAM_PROBLEMS: dict[int | str, dict[str, Any]] = {
    status: PROBLEM_RESPONSES[422] | {"description": description}
    for status, description in ((502, "The upstream model failed"), (504, "The upstream timed out"))
}
"""The problems of a route that calls the upstream model, for the OpenAPI schema."""

OPENAI_ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type", "param", "code"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "param": {"type": ["string", "null"]},
                "code": {"type": ["string", "null"]},
            },
        }
    },
}
OPENAI_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {
        "description": description["description"],
        "content": {"application/json": {"schema": OPENAI_ERROR_SCHEMA}},
    }
    for status, description in (PROBLEM_RESPONSES | UPSTREAM_PROBLEMS).items()
}
"""The errors of the OpenAI-compatible routes, in OpenAI's shape (what an OpenAI SDK reads),
for the OpenAPI schema."""

ANTHROPIC_ERROR_SCHEMA = {
    "type": "object",
    "required": ["type", "error"],
    "properties": {
        "type": {"type": "string", "enum": ["error"]},
        "error": {
            "type": "object",
            "required": ["type", "message"],
            "properties": {"type": {"type": "string"}, "message": {"type": "string"}},
        },
        "request_id": {"type": "string"},
    },
}
ANTHROPIC_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {
        "description": description,
        "content": {"application/json": {"schema": ANTHROPIC_ERROR_SCHEMA}},
    }
    for status, description in {
        **{status: entry["description"] for status, entry in PROBLEM_RESPONSES.items()},
        **{status: entry["description"] for status, entry in UPSTREAM_PROBLEMS.items()},
        501: "No Anthropic upstream is configured",
    }.items()
    if status != 422  # a bad value is a 400 here, as Anthropic's API answers
}
"""The errors of Anthropic's Messages API route, in Anthropic's shape, for the OpenAPI schema."""
