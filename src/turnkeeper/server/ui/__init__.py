"""The web UI: a session inspector and chat page, served by `turnkeeper serve` at `/`.

Server-rendered Jinja2 pages plus one small hand-written script (no Node build step). The views
are an interface like the REST routes: they reach the core (`Turnkeeper`, `ChatTurns`) through
the same `deps` the routes use, and never call the REST API or its handlers.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from turnkeeper.server.ui import search
from turnkeeper.server.ui.auth import LoginRequired, to_login
from turnkeeper.server.ui.views import router

STATIC_PATH = "/static"


def install(app: FastAPI) -> None:
    """Add the UI's pages, its static files and its login redirect to `app`."""
    app.include_router(router)
    app.include_router(search.router)
    app.mount(
        STATIC_PATH, StaticFiles(packages=[("turnkeeper.server.ui", "static")]), name="static"
    )
    app.add_exception_handler(LoginRequired, to_login)


__all__ = ["install"]
