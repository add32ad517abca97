"""The documentation's examples run as printed, and again.

Every ```python and ```sh block of every page under docs/ is either run here or named in
`NOT_RUN` with the reason (a new example fails this test until it is one or the other). A page's
runnable blocks run in page order in one fresh directory, like a reader pasting them one after
another, and then all again in the same directory: examples must not collide (each has its own
database or key) and must be re-runnable. Nothing stands in for a model except where a prelude
says so; no example may need the network.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.examples import blocks_of, run_in_order

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = sorted(path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.md"))

NOT_RUN = {
    "make run": "the make targets themselves",
    "pip install turnkeeper": "installs packages",
    "pip install 'turnkeeper[postgres,redis]'": "installs, and names hosts of a deployment",
    'tk = turnkeeper.open("postgresql://app@db.internal': "names a host of a deployment",
    "turnkeeper keys create --project acme": "starts the service and waits",
    "KEY=tk_…;": "talks to a running service with an API key",
    "from openai import OpenAI": "talks to a running service with an API key",
    "import anthropic": "talks to a running service with an API key",
    "export TURNKEEPER_LLM_BASE_URL": "talks to a model server on the reader's machine",
    "import turnkeeper\nfrom turnkeeper import AsyncChatTurns, ChatTurns": "calls the configured model",
    "import asyncio\n\nimport turnkeeper\nfrom agents import": "calls OpenAI's hosted model (needs OPENAI_API_KEY and the network)",
    "import asyncio\n\nfrom agents import Agent, OpenAIConversationsSession": "talks to a running service with an API key",
    "turnkeeper import ~/code/shop": "reads other systems' stores at placeholder paths",
    "pip install 'turnkeeper[otel]'": "installs packages",
    "export OTEL_EXPORTER_OTLP_ENDPOINT": "starts the service, sending spans to a collector",
}


def test_every_example_is_run_or_says_why_not() -> None:
    reasons = [
        example.first_line
        for page in PAGES
        for example in blocks_of(DOCS / page, NOT_RUN)
        if example.why_not_run
    ]
    assert len(reasons) >= len(NOT_RUN), reasons
    used = {start for start in NOT_RUN for page in PAGES for e in blocks_of(DOCS / page, {})
            if e.code.startswith(start)}  # fmt: skip
    assert used == set(NOT_RUN), f"reasons that match no example: {set(NOT_RUN) - used}"


@pytest.mark.parametrize(
    "page", [p for p in PAGES if any(not e.why_not_run for e in blocks_of(DOCS / p, NOT_RUN))]
)
def test_the_examples_of_a_page_run_together_and_again(page: str, tmp_path: Path) -> None:
    runnable = [e for e in blocks_of(DOCS / page, NOT_RUN) if not e.why_not_run]
    first, second = run_in_order(runnable, tmp_path, times=2)
    if page == "interfaces/adapters.md":  # the chat history is kept between the two runs
        langchain = next(
            i for i, e in enumerate(runnable) if "RunnableWithMessageHistory" in e.code
        )
        assert [first[langchain], second[langchain]] == ["4 messages seen\n", "8 messages seen\n"]
    if page == "concepts/windows.md":
        assert "dropped 287" in first[0] and first[0] == second[0]
