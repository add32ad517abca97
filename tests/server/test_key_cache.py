"""The service remembers API keys it verified (`api_key_cache`), and a revocation still
works: through the same service it is refused from the next request; made elsewhere (another
store over the same database, as the CLI or another replica does) the key keeps working until
its remembered verification lapses, and not after."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import turnkeeper
from turnkeeper.apikeys import ApiKeys

from .conftest import Service, Upstream, service_settings, start_service


def _status(service: Service, token: str) -> int:
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.get(f"{service.url}/v1/sessions", headers=headers).status_code


@pytest.fixture
def remembering(tmp_path: Path, upstream_server: tuple[Upstream, str]) -> Iterator[Service]:
    """A service that trusts a verified key for an hour."""
    yield from start_service(service_settings(tmp_path, upstream_server[1], api_key_cache="1h"))


def test_a_key_revoked_through_the_service_is_refused_at_once(remembering: Service) -> None:
    key, token = remembering.tk.keys.create("alpha")
    assert _status(remembering, token) == 200  # verified, and now remembered
    remembering.tk.keys.revoke(key.id)
    assert _status(remembering, token) == 401


def test_a_key_revoked_over_the_same_store_object_is_refused_at_once(
    remembering: Service,
) -> None:
    key, token = remembering.tk.keys.create("alpha")
    assert _status(remembering, token) == 200
    ApiKeys(remembering.tk.store).revoke(key.id)
    assert _status(remembering, token) == 401


def test_a_key_revoked_elsewhere_works_until_its_verification_lapses(
    remembering: Service, tmp_path: Path
) -> None:
    key, token = remembering.tk.keys.create("alpha")
    assert _status(remembering, token) == 200
    with turnkeeper.open(f"sqlite:///{tmp_path / 'service.db'}") as elsewhere:
        elsewhere.keys.revoke(key.id)
    assert _status(remembering, token) == 200  # remembered for an hour


def test_a_key_revoked_elsewhere_is_refused_once_its_verification_lapses(
    tmp_path: Path, upstream_server: tuple[Upstream, str]
) -> None:
    lifetime = 0.2
    settings = service_settings(tmp_path, upstream_server[1], api_key_cache=f"{lifetime}s")
    for service in start_service(settings):
        key, token = service.tk.keys.create("alpha")
        assert _status(service, token) == 200
        with turnkeeper.open(settings.database_url) as elsewhere:
            elsewhere.keys.revoke(key.id)
        time.sleep(2 * lifetime)
        assert _status(service, token) == 401


def test_a_wrong_secret_for_a_remembered_key_is_refused(remembering: Service) -> None:
    _, token = remembering.tk.keys.create("alpha")
    assert _status(remembering, token) == 200
    assert _status(remembering, token[:-4] + "AAAA") == 401


def test_with_the_cache_off_a_revocation_elsewhere_applies_at_once(
    tmp_path: Path, upstream_server: tuple[Upstream, str]
) -> None:
    settings = service_settings(tmp_path, upstream_server[1], api_key_cache="0")
    for service in start_service(settings):
        key, token = service.tk.keys.create("alpha")
        assert _status(service, token) == 200
        with turnkeeper.open(settings.database_url) as elsewhere:
            elsewhere.keys.revoke(key.id)
        assert _status(service, token) == 401
