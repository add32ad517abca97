"""Probes and metrics: `/healthz` (the process answers), `/readyz` (the database answers),
`/metrics` (Prometheus). None needs an API key: orchestrators and scrapers call them.

Neither probe waits behind requests. Sync routes share one thread pool, and while the
database is down every request holds a thread until its connection wait runs out; a probe
queued behind them would make an orchestrator kill a healthy replica. So `/healthz` runs on
the event loop itself, and `/readyz` does its database read on a thread of its own limiter.
"""

from __future__ import annotations

from functools import partial

import anyio
import anyio.to_thread
from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from pydantic import BaseModel

from turnkeeper.server.deps import TK
from turnkeeper.server.problems import PROBLEM_RESPONSES
from turnkeeper.types import SessionFilter

router = APIRouter(tags=["operations"])


class Health(BaseModel):
    status: str


_READINESS_THREADS = anyio.CapacityLimiter(2)


@router.get("/healthz")
async def healthz() -> Health:
    """Alive: the process serves requests (says nothing about the database)."""
    return Health(status="ok")


@router.get("/readyz", responses={503: PROBLEM_RESPONSES[503]})
async def readyz(tk: TK) -> Health:
    """Ready: one cheap read reaches the database (503 problem while it cannot)."""
    await anyio.to_thread.run_sync(
        partial(tk.store.list_sessions, SessionFilter(), limit=1), limiter=_READINESS_THREADS
    )
    return Health(status="ready")


@router.get("/metrics", include_in_schema=False)
def prometheus_metrics() -> Response:
    """Every metric of `turnkeeper.metrics`, in Prometheus' text format."""
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
