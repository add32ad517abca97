"""The app factory: `create_app(settings)` wires one FastAPI app from validated settings.

Nothing is built at import time. The factory takes the settings (built at the edge: the
`serve` command or a test) and optionally an open `Turnkeeper`; what must be opened and closed
(the store, the upstream HTTP client, the expiry sweeper) is opened in the lifespan and closed
when the app stops.
Everything a route needs is put on `app.state` and reached through `deps`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

import turnkeeper
from turnkeeper import telemetry
from turnkeeper.callers import PerCallerLimit
from turnkeeper.config import Settings
from turnkeeper.errors import InvalidConfig
from turnkeeper.expiry import Sweeper
from turnkeeper.llm import LLMClient
from turnkeeper.server import gate, mcp, problems, ui
from turnkeeper.server.memory import Trimmer, limit_threads
from turnkeeper.server.observability import RequestObserver
from turnkeeper.server.routes import (
    agents,
    anthropic,
    branches,
    chat,
    context,
    conversations,
    erasure,
    health,
    messages,
    models,
    proxy,
    responses,
    search,
    sessions,
    stats,
)
from turnkeeper.server.schemas import Problem
from turnkeeper.service import Turnkeeper
from turnkeeper.turns import ChatTurns

ROUTERS = (
    sessions, branches, messages, search, context, stats, agents, chat, proxy, models,
    conversations, responses, anthropic, health, erasure,
)  # fmt: skip

DESCRIPTION = """Conversation memory over HTTP: sessions and their messages (the audit trail),
token-budgeted context windows, a chat turn against any OpenAI-compatible model, and an
OpenAI-compatible proxy and Anthropic's Messages API that remember. Every error is an RFC 9457
problem document (`application/problem+json`), except on the OpenAI- and Anthropic-compatible
routes, whose errors take the shape their SDKs read."""


def create_app(settings: Settings, tk: Turnkeeper | None = None, *, sweep: bool = True) -> FastAPI:
    """The HTTP service over `settings`. With `tk`, the app serves that (open) Turnkeeper and
    leaves closing it to the caller; without, it opens one on `settings.database_url` itself.
    `sweep=False` leaves out the expiry sweeper (the other workers of one `serve`: one sweeper
    per deployment is enough)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        limit_threads(settings.server_threads)
        service = tk if tk is not None else turnkeeper.open(settings=settings)
        llm = LLMClient.from_settings(settings)
        app.state.settings = settings
        app.state.tk = service
        app.state.keys = service.keys
        app.state.turns = ChatTurns(service, llm)
        app.state.anthropic_turns = anthropic.open_turns(service, settings)
        app.state.searches = PerCallerLimit(settings.search_concurrency, "searches")
        sweeper = Sweeper(service)  # hourly expiry cleanup; one sweeper at a time per database
        if sweep:
            sweeper.start()
        trimmer = Trimmer()  # freed memory goes back to the system after a burst
        trimmer.start()
        try:
            yield
        finally:
            trimmer.stop()
            sweeper.stop()
            llm.close()
            if app.state.anthropic_turns is not None:
                app.state.anthropic_turns.close()
            if tk is None:
                service.close()
            telemetry.flush()  # a worker process ends without the interpreter's exit hooks

    app = FastAPI(
        title="turnkeeper",
        version=turnkeeper.__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    for module in ROUTERS:
        app.include_router(module.router)
    problems.install(app)
    mcp.install(app)  # MCP over streamable HTTP at /mcp, when the `mcp` extra is installed
    ui.install(app)  # the web UI at `/`, after problems so its login redirect takes precedence
    gate.install(app, settings)
    app.add_middleware(RequestObserver)
    _document_problems(app)
    return app


def _document_problems(app: FastAPI) -> None:
    """Put the `Problem` schema in the OpenAPI components the problem responses point at."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            schemas = schema.setdefault("components", {}).setdefault("schemas", {})
            schemas["Problem"] = Problem.model_json_schema(
                ref_template="#/components/schemas/{model}"
            )
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def check_bind(settings: Settings) -> None:
    """Refuse to serve without API keys on anything but a loopback address: turning auth off
    is for a developer's own machine, never for a network."""
    if settings.auth:
        return
    host = settings.host.strip("[]")
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise InvalidConfig(
            "host", f"--no-auth serves on loopback addresses only (127.0.0.1, ::1), not {host!r}"
        )
