"""Fixtures of the red-team suite: the HTTP service in process on loopback (as in
tests/server), and a snapshot of everything stored, to show a refused request changed nothing."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.conftest import (
    PROJECTS,
    Service,
    json_logs,  # the service's own JSON logs, as `turnkeeper serve` sets them up
    service_settings,
    start_service,
)
from tests.server.live import LiveServer
from tests.server.upstream import Upstream, make_app
from turnkeeper.service import Turnkeeper

__all__ = ["PROJECTS", "Service", "json_logs", "snapshot"]


@pytest.fixture(scope="package")
def upstream_server() -> Iterator[tuple[Upstream, str]]:
    state = Upstream()
    with LiveServer(make_app(state)) as live:
        yield state, live.url


@pytest.fixture(scope="module")
def hostile_service(
    tmp_path_factory: pytest.TempPathFactory, upstream_server: tuple[Upstream, str]
) -> Iterator[Service]:
    """One service per module, with a session `target` in project alpha holding two
    messages and a session `other` in project beta: the things hostile requests aim at."""
    tmp: Path = tmp_path_factory.mktemp("hostile")
    # an Anthropic upstream that cannot answer the Messages API: a request reaching it is a 502
    anthropic = {"anthropic_base_url": upstream_server[1], "anthropic_api_key": "ak-test"}
    for running in start_service(service_settings(tmp, upstream_server[1], **anthropic)):
        for who, key in (("a", "target"), ("b", "other")):
            with running.client(who) as http:
                assert http.post("/v1/sessions", json={"key": key}).status_code == 201
                for content in ("first", "second"):
                    sent = http.post(
                        f"/v1/sessions/{key}/messages", json={"role": "user", "content": content}
                    )
                    assert sent.status_code == 201
        yield running


def snapshot(tk: Turnkeeper) -> str:
    """Every session and message stored, as the JSONL export writes them."""
    out = io.StringIO()
    tk.transfer.export_sessions(list(tk.iter_session_ids()), out)
    return out.getvalue()
