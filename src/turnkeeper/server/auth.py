"""Who is calling: the API key on the request, and the project it may see.

Every `/v1` request carries `Authorization: Bearer tk_<id>_<secret>`. A project
key sees its own project only: a session of another project, addressed by id or key, is a 404
(`SessionNotFound`, so its existence is not revealed); naming another project outright (a
listing filter, a new session's project) is a 403. An admin key sees every project. With auth
turned off (`--no-auth`, loopback only) every caller is an admin.
"""

from __future__ import annotations

from fastapi import Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from turnkeeper.apikeys import ApiKeys
from turnkeeper.callers import ANONYMOUS_ADMIN, Caller
from turnkeeper.errors import Unauthenticated

bearer = HTTPBearer(
    auto_error=False,
    scheme_name="ApiKey",
    description="An API key made with `turnkeeper keys create --project P`: tk_<id>_<secret>.",
)

x_api_key = APIKeyHeader(
    name="x-api-key",
    auto_error=False,
    scheme_name="XApiKey",
    description="The same API key, as Anthropic's clients send it (`POST /v1/messages` only).",
)


async def key_credentials(request: Request) -> HTTPAuthorizationCredentials | None:
    """The API key of a route Anthropic's clients call: `Authorization: Bearer`, else the
    `x-api-key` header their SDKs send."""
    found = await bearer(request)
    if found is not None:
        return found
    key = await x_api_key(request)
    return None if key is None else HTTPAuthorizationCredentials(scheme="Bearer", credentials=key)


__all__ = [
    "ANONYMOUS_ADMIN",
    "Caller",
    "authenticate",
    "authenticate_remembered",
    "bearer",
    "key_credentials",
]


def authenticate(request: Request, credentials: HTTPAuthorizationCredentials | None) -> Caller:
    """The caller of `request`, from its bearer token (`Unauthenticated` without a valid one)."""
    if not request.app.state.settings.auth:
        return ANONYMOUS_ADMIN
    if credentials is None:
        raise Unauthenticated(
            "this request needs an API key: Authorization: Bearer tk_<id>_<secret>"
        )
    keys: ApiKeys = request.app.state.keys
    key = keys.verify(credentials.credentials)
    request.state.key_id = key.id
    return Caller(project=key.project, admin=key.admin, key_id=key.id)


def authenticate_remembered(
    request: Request, credentials: HTTPAuthorizationCredentials | None
) -> Caller | None:
    """`authenticate` when it needs no read of the store (auth off, or a key the service
    verified lately: `api_key_cache`), else None. Cheap enough for the event loop, so a
    request with a remembered key is not handed to a thread only to look in a dict."""
    if not request.app.state.settings.auth:
        return ANONYMOUS_ADMIN
    if credentials is None:
        return None
    keys: ApiKeys = request.app.state.keys
    key = keys.remembered(credentials.credentials)
    if key is None:
        return None
    request.state.key_id = key.id
    return Caller(project=key.project, admin=key.admin, key_id=key.id)
