"""The service's own ASGI middlewares (the gates, the request observer) share one shape: they
act on HTTP requests only, and everything else the server sends through them (the lifespan
events) passes untouched."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send


class HTTPMiddleware:
    """An ASGI middleware that handles HTTP requests in `http` and passes anything else to
    `app` as it came."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.http(scope, receive, send)

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one HTTP request (the subclass's work; this one passes it on)."""
        await self.app(scope, receive, send)
