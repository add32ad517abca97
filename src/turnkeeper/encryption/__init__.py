"""Encryption at rest and crypto-shredding (docs/privacy.md), opt-in by `encryption_key`.

`encrypted_at_rest(store, url, settings)` is what `turnkeeper.assemble` calls: with a key, the store
behind an `EncryptedStore` whose data keys live in the key store; without one, the store as it
is — unless the database has encrypted sessions, which is one clear error at open rather than
ciphertext handed out as text (or plaintext written beside it).

The `cryptography` package is imported only when a key is configured
(`pip install 'turnkeeper[encryption]'`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from turnkeeper.config import Settings
from turnkeeper.errors import InvalidConfig
from turnkeeper.storage.base import Store

if TYPE_CHECKING:
    from turnkeeper.encryption.keys import MasterKeys

__all__ = [
    "ENCRYPTED_EXPORT_START",
    "configured_key",
    "configured_master_keys",
    "encrypted_at_rest",
]

ENCRYPTED_EXPORT_START = b'{"turnkeeper": "encrypted export"'
"""How the first line of an encrypted export starts (`turnkeeper.encryption.files`): what
`turnkeeper import` looks for, without importing the cipher."""


def configured_key(settings: Settings) -> str | None:
    """`encryption_key`, or the contents of `encryption_key_file`; None when neither is set."""
    if settings.encryption_key is not None and settings.encryption_key_file is not None:
        raise InvalidConfig("encryption_key_file", "set encryption_key or its file, not both")
    if settings.encryption_key_file is None:
        return settings.encryption_key
    try:
        return settings.encryption_key_file.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise InvalidConfig("encryption_key_file", f"cannot read it: {exc.strerror}") from None


def configured_master_keys(settings: Settings) -> MasterKeys | None:
    """The master keys `settings` configure (parsed and checked for form), or None."""
    text = configured_key(settings)
    if text is None:
        return None
    from turnkeeper.encryption.keys import parse_master_keys

    return parse_master_keys(text)


def encrypted_at_rest(store: Store, url: str, settings: Settings) -> Store:
    """`store` (the database `url`) behind encryption when `settings` hold a key (checked
    against the key store at once); else `store` itself, once nothing says the database is
    encrypted."""
    text = configured_key(settings)
    if text is None:
        _refuse_encrypted_without_key(url, settings)
        return store
    try:
        from turnkeeper.encryption.keys import parse_master_keys
        from turnkeeper.encryption.keystore import check_master_keys, open_key_store
        from turnkeeper.encryption.store import EncryptedStore, SessionKeys
    except ImportError as exc:  # pragma: no cover - depends on what is installed
        raise InvalidConfig(
            "encryption_key",
            f"needs the cryptography package ({exc}): pip install 'turnkeeper[encryption]'",
        ) from None
    master = parse_master_keys(text)
    key_store = open_key_store(settings.key_store, url)
    try:
        check_master_keys(master, key_store)
    except BaseException:
        key_store.close()
        raise
    return EncryptedStore(store, SessionKeys(master, key_store))


def _refuse_encrypted_without_key(url: str, settings: Settings) -> None:
    if settings.key_store is not None:
        raise InvalidConfig(
            "encryption_key",
            "key_store is set but no encryption_key (or encryption_key_file): the database's"
            " encrypted sessions cannot be read, and new ones would be written in plaintext",
        )
    scheme = url.split("://", 1)[0].lower() if "://" in url else "sqlite"
    if scheme != "sqlite":
        return
    from turnkeeper.storage.sql.sqlite import path_from_url

    path = path_from_url(url)
    keys = Path(f"{path}.keys")
    if keys.exists():
        raise InvalidConfig(
            "encryption_key",
            f"the database has sessions encrypted at rest (their key store {keys} is beside"
            " it): set encryption_key or encryption_key_file to open it",
        )
