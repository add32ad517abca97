"""Encrypted export files: a JSONL export or an expiry archive that holds no plaintext.

An export outlives the sessions in it — an archive is written just before they are deleted —
so it cannot be sealed with their data keys (deleting a session destroys its key). Each file
gets a fresh random *file key* instead, wrapped by the current master key, as the key store
wraps a session's data key: the file reads wherever `encryption_key` holds that master key,
and nowhere else.

The file is text, so it goes wherever an export goes (a file, a pipe, stdout):

    {"turnkeeper": "encrypted export", "format": 1, ...}      the header: key id, wrapped key
    <base64 of chunk 0>                                        AES-256-GCM, 64 KiB of JSONL each
    …
    <base64 of the last chunk>                                 sealed as the last one

Each chunk is AES-256-GCM under the file key with the header line as associated data (a
changed header opens nothing) and, as its nonce, its number and whether it is the last
(the STREAM construction of Hoang, Reyhanitabar, Rogaway and Vizár): a chunk moved,
dropped, repeated or cut off, or a file that ends before its last chunk, does not open. A
counter is a safe nonce here because the key is used for this one file only.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from turnkeeper.encryption.keys import KEY_BYTES, NONCE_BYTES, MasterKeys
from turnkeeper.errors import InvalidConfig, InvalidInput

__all__ = ["SealedWriter", "opened_lines"]

FORMAT = 1
CHUNK_BYTES = 64 * 1024
_FILE_KEY_AAD = b"turnkeeper encrypted export file key"
_KEY_CHECK = b"turnkeeper encrypted export key check"


class TextSink(Protocol):
    def write(self, text: str, /) -> int: ...


def _key_check(master_key: bytes) -> str:
    """A keyed hash of the master key, in the header: tells a wrong key (a clear error naming
    `encryption_key`) from a damaged file, which AES-GCM alone cannot."""
    return hashlib.blake2b(_KEY_CHECK, key=master_key, digest_size=16).hexdigest()


def _nonce(number: int, last: bool) -> bytes:
    return number.to_bytes(NONCE_BYTES - 1, "big") + (b"\x01" if last else b"\x00")


class SealedWriter:
    """A text stream that encrypts what is written to it onto `out`, a chunk at a time.

    `finish()` seals the last chunk; a file whose writer never finished (the export failed
    half-way) reads as cut off, never as a shorter export."""

    def __init__(self, out: TextSink, master: MasterKeys) -> None:
        self._out = out
        file_key = os.urandom(KEY_BYTES)
        nonce = os.urandom(NONCE_BYTES)
        current = master.keys[master.current]
        wrapped = nonce + AESGCM(current).encrypt(nonce, file_key, _FILE_KEY_AAD)
        header: dict[str, Any] = {  # what ENCRYPTED_EXPORT_START says
            "turnkeeper": "encrypted export",
            "format": FORMAT,
            "cipher": "AES-256-GCM",
            "chunk_bytes": CHUNK_BYTES,
            "master_key_id": master.current,
            "key_check": _key_check(current),
            "file_key": base64.b64encode(wrapped).decode(),
        }
        line = json.dumps(header)
        self._aad = line.encode()
        self._aead = AESGCM(file_key)
        self._pending = bytearray()
        self._number = 0
        out.write(line + "\n")

    def write(self, text: str, /) -> int:
        self._pending += text.encode()
        while len(self._pending) > CHUNK_BYTES:
            self._seal(bytes(self._pending[:CHUNK_BYTES]), last=False)
            del self._pending[:CHUNK_BYTES]
        return len(text)

    def finish(self) -> None:
        self._seal(bytes(self._pending), last=True)
        self._pending.clear()

    def _seal(self, data: bytes, *, last: bool) -> None:
        sealed = self._aead.encrypt(_nonce(self._number, last), data, self._aad)
        self._out.write(base64.b64encode(sealed).decode() + "\n")
        self._number += 1


def opened_lines(name: str, handle: BinaryIO, master: MasterKeys | None) -> Iterator[bytes]:
    """The JSONL lines of the encrypted export `name`, open as `handle`. The file is read
    twice: checked whole first, so that a damaged one imports nothing, then opened.
    `InvalidConfig` naming `encryption_key` when the key it needs is not configured or not
    the one it was written with; `InvalidInput` naming `file` when it was changed or cut
    short."""
    for _ in _chunks(name, _from_start(name, handle), master):  # all open, the last is there
        pass
    pending = b""
    for chunk in _chunks(name, _from_start(name, handle), master):
        pending += chunk
        *whole, pending = pending.split(b"\n")
        yield from whole
    if pending:
        yield pending


def _from_start(name: str, handle: BinaryIO) -> BinaryIO:
    try:
        handle.seek(0)
    except OSError:  # a pipe: io.UnsupportedOperation is an OSError
        raise InvalidInput(
            "file",
            f"{name} is an encrypted export, which is checked whole before it is"
            " imported: give a file, not a pipe",
        ) from None
    return handle


def _damaged(name: str, why: str) -> InvalidInput:
    return InvalidInput(
        "file",
        f"{name} is an encrypted export that {why}; it was changed or cut short after it"
        " was written (nothing was imported)",
    )


def _chunks(name: str, lines: Iterable[bytes], master: MasterKeys | None) -> Iterator[bytes]:
    stream = iter(lines)
    header_line = next(stream, b"").rstrip(b"\r\n")
    aead = AESGCM(_file_key(name, header_line, master))
    number, last = 0, False
    for raw in stream:
        if last:
            raise _damaged(name, "goes on after its last chunk")
        try:
            sealed = binascii.a2b_base64(raw.rstrip(b"\r\n"), strict_mode=True)
        except binascii.Error:
            raise _damaged(name, f"has a chunk that is not base64 (line {number + 2})") from None
        for last in (False, True):
            try:
                chunk = aead.decrypt(_nonce(number, last), sealed, header_line)
                break
            except InvalidTag:
                continue
        else:
            raise _damaged(name, f"has a chunk that does not decrypt (line {number + 2})")
        number += 1
        yield chunk
    if not last:
        raise _damaged(name, "ends before its last chunk")


def _file_key(name: str, header_line: bytes, master: MasterKeys | None) -> bytes:
    try:
        header = json.loads(header_line)
        key_id, check = header["master_key_id"], header["key_check"]
        wrapped = base64.b64decode(header["file_key"], validate=True)
        if header["format"] != FORMAT or not isinstance(key_id, str):
            raise ValueError(header["format"])
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise _damaged(name, "has no readable header") from None
    if master is None:
        raise InvalidConfig(
            "encryption_key",
            f"is not set, and {name} is an encrypted export: set encryption_key (or"
            f" encryption_key_file) to master keys that hold key {key_id!r} to import it",
        )
    key = master.keys.get(key_id)
    if key is None:
        raise InvalidConfig(
            "encryption_key",
            f"{name} is encrypted with master key {key_id!r}, which encryption_key does not"
            f" hold (it has {', '.join(sorted(master.keys))})",
        )
    if check != _key_check(key):
        raise InvalidConfig(
            "encryption_key",
            f"master key {key_id!r} of encryption_key is not the key {name} was encrypted with",
        )
    try:
        return AESGCM(key).decrypt(wrapped[:NONCE_BYTES], wrapped[NONCE_BYTES:], _FILE_KEY_AAD)
    except InvalidTag:
        raise _damaged(name, "has a file key that does not open") from None
