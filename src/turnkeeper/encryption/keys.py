"""Master keys and data keys, and the one cipher both use (AES-256-GCM).

A deployment configures master keys (`encryption_key`: `id:base64key,id:base64key`); each
session gets its own random data key, kept only wrapped (encrypted) by a master key in the key
store (`turnkeeper.encryption.keystore`). Destroying that wrapped key makes every copy of the
session's ciphertext unreadable, wherever it went (crypto-shredding).

Why AES-GCM (and not Fernet): it is authenticated (a changed byte fails to decrypt rather than
reading as other text), it binds associated data (a wrapped key to its session, a value to its
field), it runs in hardware on every current CPU, and its ciphertext is the plaintext plus 28
bytes, where Fernet adds a 57-byte header and pads to 16 bytes, then base64-encodes twice over
in a text column.

Stored values are encrypted *deterministically*: the nonce is a keyed BLAKE2b hash (a PRF, as
an HMAC is, at half an HMAC-SHA256's cost) of the field and the value under the
session's own second key (a synthetic IV, as AES-SIV builds it). The same value in the same
session and field is the same ciphertext, so a retried append compares equal to what it
stored (idempotency needs no decryption in the backend) — at the price that two equal values of
one session can be seen to be equal (docs/privacy.md). Different values never share a nonce
(short of a 96-bit hash collision), which is what AES-GCM needs.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from turnkeeper.errors import InvalidConfig, KeyUnavailable

__all__ = [
    "PREFIX",
    "DataKey",
    "MasterKeys",
    "generate_master_key",
    "parse_master_keys",
]

PREFIX = "tkenc1:"
"""How every encrypted text value starts (version 1 of the format): `tkenc1:` and the base64
of the nonce (12 bytes) and the AES-GCM ciphertext with its 16-byte tag."""
_PREFIX_LENGTH = len(PREFIX)

KEY_BYTES = 32
NONCE_BYTES = 12
_KEY_ID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def generate_master_key(key_id: str = "k1") -> str:
    """A new master key in `encryption_key`'s form: `id:` and 32 random bytes in base64."""
    return f"{key_id}:{base64.b64encode(os.urandom(KEY_BYTES)).decode()}"


@dataclass(frozen=True)
class MasterKeys:
    """The configured master keys by id; `current` wraps new data keys."""

    current: str
    keys: dict[str, bytes] = field(repr=False)

    def wrap(self, data_key: bytes, owner: str) -> tuple[str, bytes]:
        """`data_key` encrypted by the current master key, bound to the session `owner` (its
        associated data): the key id and `nonce + ciphertext`."""
        nonce = os.urandom(NONCE_BYTES)
        sealed = AESGCM(self.keys[self.current]).encrypt(nonce, data_key, owner.encode())
        return self.current, nonce + sealed

    def unwrap(self, key_id: str, wrapped: bytes, owner: str) -> bytes:
        """The data key `wrap` sealed; `KeyUnavailable` naming the master key when it is not
        configured, or does not open it (another key under the same id, or a changed row)."""
        key = self.keys.get(key_id)
        if key is None:
            raise KeyUnavailable(
                f"session {owner}'s data key is wrapped by master key {key_id!r}, which"
                f" encryption_key does not hold (it has {', '.join(sorted(self.keys))});"
                " add that key back to read it"
            )
        try:
            return AESGCM(key).decrypt(wrapped[:NONCE_BYTES], wrapped[NONCE_BYTES:], owner.encode())
        except InvalidTag:
            raise KeyUnavailable(
                f"master key {key_id!r} of encryption_key does not open session {owner}'s"
                " data key: it is not the key the key store was written with"
            ) from None


def parse_master_keys(text: str) -> MasterKeys:
    """`encryption_key`'s value: `id:base64key`, comma-separated, each key 32 bytes (standard
    or URL-safe base64); the first is current. `InvalidConfig` naming `encryption_key` says
    what is wrong, never echoing a key."""
    keys: dict[str, bytes] = {}
    for index, part in enumerate(piece.strip() for piece in text.split(",")):
        key_id, colon, encoded = part.partition(":")
        if not colon or not _KEY_ID.match(key_id):
            raise InvalidConfig(
                "encryption_key",
                f"key {index + 1} must be id:base64key (an id of letters, digits, _ . -);"
                " make one with `turnkeeper encryption generate-key`",
            )
        if key_id in keys:
            raise InvalidConfig("encryption_key", f"key id {key_id!r} is given twice")
        keys[key_id] = _decode_key(key_id, encoded.strip())
    if not keys:
        raise InvalidConfig("encryption_key", "holds no key")
    return MasterKeys(current=next(iter(keys)), keys=keys)


def _decode_key(key_id: str, encoded: str) -> bytes:
    padded = encoded + "=" * (-len(encoded) % 4)
    try:
        raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidConfig("encryption_key", f"key {key_id!r} is not base64") from None
    if len(raw) != KEY_BYTES:
        raise InvalidConfig(
            "encryption_key", f"key {key_id!r} is {len(raw)} bytes; a key is {KEY_BYTES} bytes"
        )
    return raw


class DataKey:
    """One session's keys: the first half of `material` encrypts its values, the second
    derives their nonces; `owner` is the session the key was made for (a branch reads its
    source's copied values with a copy of the source's key, so values stay bound to the
    session that wrote them)."""

    __slots__ = (
        "_aads",
        "_aead",
        "_nonce_key",
        "_opened",
        "_opened_chars",
        "material",
        "opened_rows",
        "owner",
    )

    OPENED_CHARS = 256 * 1024
    """Most characters of plaintext a key remembers (see `decrypt`)."""

    def __init__(self, owner: str, material: bytes) -> None:
        self.owner = owner
        self.material = material
        self._aead = AESGCM(material[:KEY_BYTES])
        self._nonce_key = material[KEY_BYTES:]
        self._aads: dict[str, bytes] = {}
        self._opened: dict[str, str] = {}
        self._opened_chars = 0
        self.opened_rows: dict[int, tuple[Any, Any]] = {}
        """Rows the store layer opened with this key lately, by seq: (as stored, as opened).
        Kept here so they share the key's lifetime (and go when the session is deleted)."""

    def __repr__(self) -> str:
        return f"DataKey(owner={self.owner!r})"

    @staticmethod
    def new(owner: str) -> DataKey:
        return DataKey(owner, os.urandom(2 * KEY_BYTES))

    def _aad(self, purpose: str) -> bytes:
        """The associated data of a value of field `purpose`: this key's session and the field
        (a value moved to another field or session does not decrypt)."""
        aad = self._aads.get(purpose)
        if aad is None:
            aad = self._aads[purpose] = f"{self.owner}\x00{purpose}".encode()
        return aad

    def encrypt(self, text: str, purpose: str) -> str:
        """`text` as a stored value of field `purpose` (see the module docstring)."""
        data = text.encode()
        aad = self._aad(purpose)
        nonce = hashlib.blake2b(
            aad + b"\x00" + data, key=self._nonce_key, digest_size=NONCE_BYTES
        ).digest()
        sealed = self._aead.encrypt(nonce, data, aad)
        value = PREFIX + binascii.b2a_base64(nonce + sealed, newline=False).decode()
        self._remember(value, text)
        return value

    def decrypt(self, value: str, purpose: str) -> str:
        """The text `encrypt` sealed; `KeyUnavailable` when this key did not seal it.

        The values this key sealed or opened lately are remembered (up to `OPENED_CHARS`),
        as the process's window memo remembers windows: a chat turn builds its window from
        the messages the last turn's window opened, and opening them again was most of what
        encryption added to a build (bench/results/encryption.md). The stored value is the
        memo's key — the same session, field and text, so the same text. It lives as long as
        the key does in this process's memory (docs/privacy.md: a running process holds its
        keys), and goes with it when the session is deleted."""
        known = self._opened.get(value)
        if known is not None:
            return known
        try:
            raw = binascii.a2b_base64(value[_PREFIX_LENGTH:])
            data = self._aead.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], self._aad(purpose))
        except (InvalidTag, binascii.Error, ValueError):
            raise KeyUnavailable(
                f"a stored {purpose} of session {self.owner} does not decrypt with its data key"
                " (written under another key store, or changed at rest)"
            ) from None
        text = data.decode()
        self._remember(value, text)
        return text

    def _remember(self, value: str, text: str) -> None:
        if self._opened_chars + len(text) > self.OPENED_CHARS:
            self._opened.clear()
            self._opened_chars = 0
            if len(text) > self.OPENED_CHARS:
                return
        self._opened[value] = text
        self._opened_chars += len(text)
