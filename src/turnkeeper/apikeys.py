"""API keys: how a caller proves which project it speaks for.

A key reads `tk_<id>_<secret>`. The id is public (it names the key in listings and logs); the
secret is 256 random bits, shown once when the key is made and stored only as its SHA-256. A
slow password hash would add nothing here: the secret is not guessable, so a fast hash with a
constant-time comparison is the whole defence, and verifying stays one indexed read per request.

This is core logic, not HTTP: the CLI (`turnkeeper keys …`) and the server both call it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from datetime import UTC, datetime

from turnkeeper.errors import Unauthenticated
from turnkeeper.storage.base import ApiKeyStore, Store, require
from turnkeeper.types import ApiKey
from turnkeeper.validation import check_name, check_text

PREFIX = "tk"
_ID_BYTES = 6
_SECRET_BYTES = 32


KeyStore = ApiKeyStore
"""The capability API keys need (its older name here)."""


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def parse_token(token: str) -> tuple[str, str] | None:
    """`tk_<id>_<secret>` → (id, secret); None when it is not shaped like a key."""
    prefix, _, rest = token.partition("_")
    key_id, _, secret = rest.partition("_")
    if prefix != PREFIX or not key_id or not secret or not key_id.isalnum():
        return None
    return key_id, secret


class ApiKeys:
    """Make, verify, list and revoke API keys over a store."""

    def __init__(
        self,
        store: Store | ApiKeyStore,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.store = require(store, ApiKeyStore, "API keys")
        self._clock = clock

    def create(
        self, project: str, *, name: str | None = None, admin: bool = False
    ) -> tuple[ApiKey, str]:
        """A new key for `project` (an admin key sees every project). Returns the record and
        the token, which is not stored and cannot be shown again."""
        checked = check_name("project", project)
        if checked is None:
            raise ValueError("project is required")
        key_id = secrets.token_hex(_ID_BYTES)
        secret = secrets.token_urlsafe(_SECRET_BYTES)
        key = ApiKey(
            id=key_id,
            project=checked,
            name=check_text("name", name, max_length=200) or "",
            admin=admin,
            created_at=self._clock(),
        )
        self.store.create_api_key(key, secret_hash=hash_secret(secret))
        return key, f"{PREFIX}_{key_id}_{secret}"

    def verify(self, token: str) -> ApiKey:
        """The active key `token` belongs to, or `Unauthenticated` (same message whatever the
        reason, so nobody learns which key ids exist)."""
        parsed = parse_token(token.strip())
        found = self.store.find_api_key(parsed[0]) if parsed else None
        if parsed is None or found is None:
            raise Unauthenticated("invalid API key")
        key, stored_hash = found
        if not hmac.compare_digest(stored_hash, hash_secret(parsed[1])) or not key.active:
            raise Unauthenticated("invalid API key")
        return key

    def list_keys(self, project: str | None = None) -> list[ApiKey]:
        """Keys (of `project`), oldest first, revoked ones included."""
        return self.store.list_api_keys(check_name("project", project))

    def revoke(self, key_id: str) -> ApiKey:
        """Revoke a key: every later request with it is refused. Raises `NotFound`."""
        return self.store.revoke_api_key(key_id, now=self._clock())
