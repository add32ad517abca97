"""API keys: how a caller proves which project it speaks for.

A key reads `tk_<id>_<secret>`. The id is public (it names the key in listings and logs); the
secret is 256 random bits, shown once when the key is made and stored only as its SHA-256. A
slow password hash would add nothing here: the secret is not guessable, so a fast hash with a
constant-time comparison is the whole defence, and verifying is one indexed read.

A service verifies the same few keys on every request, so verified keys are remembered for a
few seconds (`turnkeeper.cache.api_keys`, the `api_key_cache` setting): on PostgreSQL that read
is one of a request's few round trips. A revocation through any `ApiKeys` over the same store object (the
service's own, or the admin's in the same process) forgets the key at once; one made elsewhere
(another replica, the CLI) takes effect within the cache's lifetime.

This is core logic, not HTTP: the CLI (`turnkeeper keys …`) and the server both call it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from turnkeeper.cache.api_keys import verified_keys_of
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


def _matching(found: tuple[ApiKey, str] | None, secret: str) -> ApiKey | None:
    """The key of `found` (a record and its stored hash) if `secret` is its secret and it is
    active (a constant-time comparison), else None."""
    if found is None:
        return None
    key, stored_hash = found
    if not hmac.compare_digest(stored_hash, hash_secret(secret)) or not key.active:
        return None
    return key


class ApiKeys:
    """Make, verify, list and revoke API keys over a store."""

    def __init__(
        self,
        store: Store | ApiKeyStore,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        cache: timedelta | None = None,
    ) -> None:
        """`cache`: how long a verified key is trusted without reading the store (None or 0:
        always read it; the service passes its `api_key_cache` setting)."""
        self.store = require(store, ApiKeyStore, "API keys")
        self._clock = clock
        self._cache = cache if cache is not None and cache > timedelta(0) else None
        self._verified = verified_keys_of(self.store) if self._cache is not None else None

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
        remembered = self.remembered(token)
        if remembered is not None:
            return remembered
        parsed = parse_token(token.strip())
        found = self.store.find_api_key(parsed[0]) if parsed else None
        key = _matching(found, parsed[1]) if parsed else None
        if key is None or found is None:
            raise Unauthenticated("invalid API key")
        if self._verified is not None and self._cache is not None:
            self._verified.put(key, found[1], self._cache)
        return key

    def remembered(self, token: str) -> ApiKey | None:
        """`verify(token)` when that needs no read of the store (the key is remembered and the
        secret matches), else None: the server then verifies on a thread, off its event loop."""
        parsed = parse_token(token.strip())
        if parsed is None or self._verified is None:
            return None
        return _matching(self._verified.get(parsed[0]), parsed[1])

    def list_keys(self, project: str | None = None) -> list[ApiKey]:
        """Keys (of `project`), oldest first, revoked ones included."""
        return self.store.list_api_keys(check_name("project", project))

    def revoke(self, key_id: str) -> ApiKey:
        """Revoke a key: every later request with it is refused (at once by every `ApiKeys`
        over this store object; elsewhere once their cache of it lapses). Raises `NotFound`."""
        revoked = self.store.revoke_api_key(key_id, now=self._clock())
        verified_keys_of(self.store).forget(key_id)
        return revoked
