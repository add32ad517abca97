"""`GET /v1/sessions/{session}/context`: the window a model would see, and its report."""

from __future__ import annotations

import dataclasses
import functools
from typing import Annotated, Any

from fastapi import APIRouter, Query
from starlette.concurrency import run_in_threadpool

from turnkeeper.context.formats import to_anthropic, to_openai
from turnkeeper.server.deps import SessionAccessDep
from turnkeeper.server.problems import PROBLEM_RESPONSES
from turnkeeper.server.schemas import ContextReportPublic, ContextResponse, WindowFormat
from turnkeeper.types import ContextWindow, StrategyName
from turnkeeper.validation import MAX_WHOLE, NAME_PATTERN, window_budget

router = APIRouter(tags=["context"], responses=PROBLEM_RESPONSES)


def _shaped(window: ContextWindow, shape: WindowFormat) -> tuple[str | None, list[dict[str, Any]]]:
    """The window's messages in one API's shape: (system text, messages)."""
    if shape == "anthropic":
        anthropic = to_anthropic(window)
        return anthropic["system"], anthropic["messages"]
    if shape == "openai":
        return None, to_openai(window)
    return None, [
        {k: v for k, v in dataclasses.asdict(m).items() if v is not None} for m in window.messages
    ]


@router.get("/v1/sessions/{session}/context")
async def build_context(
    access: SessionAccessDep,
    strategy: StrategyName | None = None,
    budget_tokens: Annotated[
        int | None, Query(gt=0, le=10_000_000, description="Token budget of the window.")
    ] = None,
    max_tokens: Annotated[
        int | None,
        Query(
            gt=0,
            le=10_000_000,
            deprecated=True,
            description="Old name of budget_tokens, still accepted.",
        ),
    ] = None,
    reserved_tokens: Annotated[int | None, Query(ge=0, le=10_000_000)] = None,
    keep_recent: Annotated[
        int | None, Query(gt=0, le=10_000, description="N of recent, K of summarize.")
    ] = None,
    model: Annotated[
        str | None, Query(max_length=200, description="Picks tokenizer and window.")
    ] = None,
    include_internal: Annotated[
        bool | None, Query(description="Default: false for recent, else true.")
    ] = None,
    format: WindowFormat = "openai",
    agent: Annotated[
        str | None,
        Query(
            pattern=NAME_PATTERN,
            description="Build this agent's perspective.",
        ),
    ] = None,
    trigger: Annotated[
        int | None,
        Query(gt=0, le=MAX_WHOLE, description="Seq of the message to answer (default: newest)."),
    ] = None,
    preview: Annotated[
        bool,
        Query(
            description="True (default): nothing stored changes. False: the window is the one "
            "sent next, and the session's cut point moves with it (a client that sends it)."
        ),
    ] = True,
) -> ContextResponse:
    """Build the window for the next turn under a token budget (by default nothing stored
    changes: `preview=false` stores where the session's cut point moved, for a client that
    sends the window). With `agent`, the window is that agent's perspective."""
    # A hot route: async, with a thread for the build only (see routes.messages).
    window = await run_in_threadpool(
        functools.partial(
            access.tk.context, access.ref, strategy=strategy,
            budget_tokens=window_budget(budget_tokens, max_tokens),
            reserved_tokens=reserved_tokens, keep_recent=keep_recent, model=model,
            include_internal=include_internal, project=access.scope, agent=agent, trigger=trigger,
            preview=preview,
        )
    )  # fmt: skip
    system, messages = _shaped(window, format)
    report = ContextReportPublic.from_domain(window.report)
    return ContextResponse(format=format, system=system, messages=messages, report=report)
