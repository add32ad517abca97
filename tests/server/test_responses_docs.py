"""The documentation's examples of the Responses API and of the agents SDK's default model run
as printed against the service (the docs test cannot run them: they need a running service and
an API key), with the service's URL and a key in place of the placeholders."""

from __future__ import annotations

import contextlib
import io
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from agents import set_tracing_disabled

from tests.examples import blocks_of

from .conftest import Service
from .upstream import Upstream

DOCS = Path(__file__).resolve().parents[2] / "docs" / "interfaces"


def example(page: str, starts: str) -> str:
    (code,) = [e.code for e in blocks_of(DOCS / page, {}) if e.code.startswith(starts)]
    return code


def run(code: str, service: Service) -> str:
    """`code` as printed, on the service; what it printed. In a thread of its own: an example
    may start its own event loop."""
    code = code.replace("http://127.0.0.1:8000/v1", f"{service.url}/v1")
    code = code.replace('"tk_…"', repr(service.keys["a"]))
    out = io.StringIO()

    def execute() -> None:
        with contextlib.redirect_stdout(out):
            exec(compile(code, "<docs example>", "exec"), {"__name__": "__main__"})

    with ThreadPoolExecutor(1) as pool:
        pool.submit(execute).result(timeout=60)
    return out.getvalue()


def test_the_responses_example_runs(service: Service, upstream: Upstream) -> None:
    printed = run(
        example(
            "proxy.md",
            'from openai import OpenAI\n\nclient = OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="tk_…")   # a turnkeeper key\n\n# memory',
        ),
        service,
    )
    lines = printed.splitlines()
    assert lines[0] == "reply 2 to: And my name?"
    assert lines[1] == "reply 4 to: And a day trip?"
    assert lines[2].startswith("reply 5 to: Hello! (resp_")
    assert ("user", "My name is Ada.") in [
        (m["role"], m["content"]) for m in upstream.requests[1]["messages"]
    ]


def test_the_agents_default_model_example_runs(service: Service, upstream: Upstream) -> None:
    set_tracing_disabled(True)  # the SDK would send its traces to OpenAI
    printed = run(
        example("adapters.md", "import asyncio\n\nfrom agents import Agent, OpenAI"), service
    )
    answer, session_id = printed.strip().rsplit(" ", 1)
    assert answer == "reply 2 to: What state is it in?"
    with service.client("a") as http:
        stored = http.get(f"/v1/sessions/{session_id}/messages").json()["items"]
    assert [m["role"] for m in stored] == ["user", "assistant", "user", "assistant"]
