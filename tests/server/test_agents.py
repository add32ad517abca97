"""Multi-agent routes, the agent perspective over HTTP, summaries, the conversation context
object, and the LLM summarizer against the recording upstream model."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.conftest import Clock, make_sqlite_store
from turnkeeper.context.perspective import AWAY_HEADER, NEW_INTERACTION
from turnkeeper.context.summarizer import LLMSummarizer
from turnkeeper.errors import UpstreamError
from turnkeeper.llm import LLMClient
from turnkeeper.service import Turnkeeper, default_summarizer
from turnkeeper.tokens import counter_for
from turnkeeper.types import NewMessage

from .conftest import Upstream, service_settings


@pytest.fixture
def team(client: httpx.Client) -> str:
    client.post("/v1/sessions", json={"key": "team", "phase": "chat"})
    client.post("/v1/sessions/team/messages", json={"role": "user", "content": "@pm @dev go"})
    client.post("/v1/sessions/team/agents/pm/responded", json={"reply": "Planned."})
    client.post(
        "/v1/sessions/team/agents/dev/responded", json={"reply": "Built.", "execution_ms": 900}
    )
    return "team"


def test_agent_perspective_over_http_follows_the_multi_agent_rules(
    client: httpx.Client, team: str
) -> None:
    client.post(f"/v1/sessions/{team}/messages", json={"role": "user", "content": "@pm status?"})
    window = client.get(f"/v1/sessions/{team}/context", params={"agent": "pm"}).json()
    assert [(m["role"], m["content"]) for m in window["messages"]] == [
        ("user", "@pm @dev go"),
        ("assistant", "Planned."),
        ("system", "[dev]: Built."),
        ("system", f"{AWAY_HEADER}\n\n[dev]: Built."),
        ("system", NEW_INTERACTION),
        ("user", "@pm status?"),
    ]


def test_phase_handoff_and_agent_state_routes(client: httpx.Client, team: str) -> None:
    event = client.post(
        f"/v1/sessions/{team}/phase",
        json={"phase": "verification", "by": "pm", "summary": "Built."},
    )
    assert event.status_code == 201
    assert event.json()["metadata"]["event"]["kind"] == "phase_transition"
    assert client.get(f"/v1/sessions/{team}").json()["phase"] == "verification"
    assert client.post(f"/v1/sessions/{team}/phase", json={"phase": "lunch"}).status_code == 422
    handoff = client.post(
        f"/v1/sessions/{team}/handoffs",
        json={"from_agent": "pm", "to_agent": "qa", "summary": "Test it"},
    ).json()
    assert handoff["content"] == "Hand-off from pm to qa.\nSummary: Test it"
    patched = client.patch(
        f"/v1/sessions/{team}/agents/dev", json={"provider_session_id": "claude-9"}
    ).json()
    assert (patched["provider_session_id"], patched["last_processed_seq"]) == ("claude-9", 3)
    assert [a["agent"] for a in client.get(f"/v1/sessions/{team}/agents").json()] == ["dev", "pm"]
    assert client.get(f"/v1/sessions/{team}/agents/qa").json()["last_processed_seq"] == 0
    assert client.get(f"/v1/sessions/{team}/stats").json()["execution_ms"] == 900


def test_conversation_context_and_summaries_routes(client: httpx.Client) -> None:
    client.post("/v1/sessions", json={"key": "chat"})
    messages = [
        {"role": "user" if n % 2 == 0 else "assistant", "content": f"Message {n}.",
         "metadata": {"referenced_ids": [f"e{n}"]}}
        for n in range(20)
    ]  # fmt: skip
    client.post("/v1/sessions/chat/messages/batch", json={"messages": messages})
    context = client.get("/v1/sessions/chat/conversation-context").json()
    assert context["message_count"] == 20 and not context["is_first_message"]
    assert len(context["recent_messages"]) == 10
    assert context["referenced_entities"] == [f"e{n}" for n in range(1, 20, 2)]
    assert context["planner_context"].startswith("Conversation summary: ")
    summaries = client.get("/v1/sessions/chat/summaries").json()
    assert [s["covers_to_seq"] for s in summaries] == [10]


def test_llm_summarizer_asks_the_fast_model_with_the_prompt_and_previous_summary(
    upstream: Upstream, upstream_server: tuple[Upstream, str], tmp_path: Path, clock: Clock
) -> None:
    settings = service_settings(
        tmp_path, upstream_server[1], summary_model="fast-model", summary_prompt="Be brief."
    )
    summarizer = default_summarizer(settings)
    assert isinstance(summarizer, LLMSummarizer) and summarizer.method == "llm:fast-model"
    tk = Turnkeeper(make_sqlite_store(tmp_path / "llm.db"), settings, clock=clock)
    session = tk.create_session(key="llm")
    tk.append_many(session, [NewMessage("user", f"q{n} " + "w " * 30) for n in range(40)])
    window = tk.context(session, strategy="summarize", budget_tokens=600, keep_recent=5)
    sent = upstream.requests[-1]
    assert sent["model"] == "fast-model"
    assert sent["messages"][0] == {"role": "system", "content": "Be brief."}
    assert "user: q0" in sent["messages"][1]["content"]
    assert any(m.kind == "summary" and "reply" in m.content for m in window.messages)
    assert [c.method for c in tk.summaries(session)] == ["llm:fast-model"]


def test_llm_summarizer_failure_is_an_upstream_error(
    upstream: Upstream, upstream_server: tuple[Upstream, str]
) -> None:
    upstream.mode = "error"
    client = LLMClient(f"{upstream_server[1]}/v1")
    summarizer = LLMSummarizer(client, model="fast")
    with pytest.raises(UpstreamError, match="500"):
        summarizer.summarize([], max_tokens=50, counter=counter_for("o200k_base"), previous="x")
    client.close()
