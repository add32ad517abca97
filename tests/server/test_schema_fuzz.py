"""Schemathesis over the published OpenAPI schema, against the live service: whatever a client
sends that the schema allows (and much that it does not), the answer is never a 5xx and always
matches what the schema documents (status, content type, body)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode, checks

from .anthropic_upstream import AnthropicUpstream, make_anthropic_app
from .conftest import Service, service_settings, start_service
from .live import LiveServer
from .upstream import Upstream


@pytest.fixture(scope="module")
def running(
    tmp_path_factory: pytest.TempPathFactory, upstream_server: tuple[Upstream, str]
) -> Iterator[Service]:
    """One service for the whole run, with the example session of the schema present."""
    state = upstream_server[0]  # answering, whatever a test before left it doing
    state.mode, state.failures, state.gate, state.stream_gate = "ok", 0, None, None
    with LiveServer(make_anthropic_app(AnthropicUpstream())) as anthropic:
        settings_ = service_settings(
            tmp_path_factory.mktemp("fuzz"), upstream_server[1],
            anthropic_base_url=anthropic.url, anthropic_api_key="anthropic-secret",
        )  # fmt: skip
        yield from _serve(settings_)


def _serve(settings_: Any) -> Iterator[Service]:
    for service in start_service(settings_):
        with service.client("a") as alpha:
            alpha.post("/v1/sessions", json={"key": "support-42", "subject": "ticket-42"})
            alpha.post(
                "/v1/sessions/support-42/messages",
                json={"role": "user", "content": "My order arrived broken."},
            )
        yield service


CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
]
EXAMPLES_PER_OPERATION = 25  # per generation mode (valid, then invalid input)
SHARDS = 4
"""The operations are probed in this many tests, each taking every SHARDS-th one, so that the
suite's workers share the few minutes the whole schema takes."""


@pytest.mark.parametrize("shard", range(SHARDS))
def test_every_answer_is_documented_and_never_a_server_error(running: Service, shard: int) -> None:
    """Each operation of the schema gets its own hypothesis run (schemathesis' pytest plugin
    is not usable with this pytest, so the operations are driven here directly)."""
    schema = schemathesis.openapi.from_url(f"{running.url}/openapi.json")
    auth = {"Authorization": f"Bearer {running.keys['a']}"}
    operations = sorted(
        (result.ok() for result in schema.get_all_operations()), key=lambda op: op.label
    )
    assert len(operations) >= 18

    for operation, mode in itertools.product(operations[shard::SHARDS], GenerationMode):

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
        )
        def probe(case: Any) -> None:
            response = case.call(base_url=running.url, headers={**(case.headers or {}), **auth})
            case.validate_response(response, checks=CHECKS)

        try:
            probe()
        except Unsatisfiable:  # an operation without inputs has no invalid ones
            assert mode is GenerationMode.NEGATIVE, operation.label
    assert httpx.get(f"{running.url}/healthz").status_code == 200
