"""The bead conversation routes, with the bead conversation service's response fields."""

from __future__ import annotations

import httpx

BEAD_CONVERSATION_FIELDS = {
    "session_id", "bead_id", "project_id", "messages", "created_at", "updated_at",
    "expires_at", "token_count",
}  # fmt: skip


def _bead_session(client: httpx.Client) -> str:
    session = client.post(
        "/v1/sessions", json={"subject": "bead-42", "metadata": {"agent_id": "a7"}}
    )
    client.post(
        f"/v1/sessions/{session.json()['id']}/messages/batch",
        json={"messages": [{"role": "system", "content": "You are a Go reviewer."},
                           {"role": "user", "content": "Investigate the leak"}]},
    )  # fmt: skip
    return str(session.json()["id"])


def test_get_conversation_has_the_bead_conversation_fields(client: httpx.Client) -> None:
    session_id = _bead_session(client)
    conversation = client.get(f"/api/v1/conversations/{session_id}").json()
    assert set(conversation) >= BEAD_CONVERSATION_FIELDS
    assert (conversation["bead_id"], conversation["project_id"]) == ("bead-42", "alpha")
    assert conversation["messages"][1]["content"] == "Investigate the leak"
    assert set(conversation["messages"][0]) == {"role", "content", "timestamp", "token_count"}
    assert conversation["token_count"] == sum(m["token_count"] for m in conversation["messages"])


def test_bead_conversation_finds_the_beads_session(client: httpx.Client) -> None:
    session_id = _bead_session(client)
    assert client.get("/api/v1/beads/bead-42/conversation").json()["session_id"] == session_id
    assert client.get("/api/v1/beads/bead-0/conversation").status_code == 404


def test_reset_keeps_the_system_message_and_the_session(client: httpx.Client) -> None:
    session_id = _bead_session(client)
    reset = client.post(
        f"/api/v1/conversations/{session_id}/reset", json={"keep_system_message": True}
    ).json()
    assert reset["session_id"] == session_id
    assert [m["role"] for m in reset["messages"]] == ["system"]


def test_delete_answers_success_and_message(client: httpx.Client) -> None:
    session_id = _bead_session(client)
    deleted = client.delete(f"/api/v1/conversations/{session_id}").json()
    assert deleted["success"] is True and session_id in deleted["message"]
    assert client.get(f"/api/v1/conversations/{session_id}").status_code == 404
