"""The storage contract suite: pytest test classes any `Store` runs to prove it keeps the
contract of `turnkeeper.storage.base` — ours (SQLite, PostgreSQL, the caches, `InMemoryStore`)
and yours.

Subclass a contract and give it a `store` fixture that yields a fresh, empty store::

    import pytest
    from turnkeeper.testing import StoreContract, SummaryContract

    class TestMyStore(StoreContract, SummaryContract):
        @pytest.fixture
        def store(self):
            store = MyStore(...)
            yield store
            store.close()

`StoreContract` covers the core `Store` every backend must have; `AgentStateContract`,
`SummaryContract`, `TraceContract`, `ApiKeyContract`, `AdminContract`, `TransferContract`,
`ForkContract`, `TurnAttemptContract`, `CutPointContract`, `ErasureContract`,
`RetentionContract` and `LockingContract` each cover one optional capability — mix in those
your store offers. `EncryptionContract` proves a store encrypting at rest leaves no user
content in the clear where it keeps things (docs/privacy.md). `FullStoreContract` is all of them but locking. The tests call the store directly, with fixed
times (`NOW`), so a failure names the rule the store broke.
"""

from __future__ import annotations

try:
    import pytest  # noqa: F401 - the contract classes are pytest test classes
except ImportError as exc:  # pragma: no cover - depends on what is installed
    raise ImportError(
        "turnkeeper.testing is a pytest suite and needs pytest: pip install pytest"
    ) from exc

from turnkeeper.testing.capabilities import (
    AdminContract,
    AgentStateContract,
    ApiKeyContract,
    FullStoreContract,
    LockingContract,
    SummaryContract,
    TraceContract,
    TransferContract,
    TurnAttemptContract,
)
from turnkeeper.testing.core import StoreContract
from turnkeeper.testing.cut_points import CutPointContract
from turnkeeper.testing.encryption import EncryptionContract
from turnkeeper.testing.erasure import ErasureContract
from turnkeeper.testing.forks import ForkContract
from turnkeeper.testing.retention import RetentionContract
from turnkeeper.testing.values import NOW, draft, new_session

__all__ = [
    "NOW",
    "AdminContract",
    "AgentStateContract",
    "ApiKeyContract",
    "CutPointContract",
    "EncryptionContract",
    "ErasureContract",
    "ForkContract",
    "FullStoreContract",
    "LockingContract",
    "RetentionContract",
    "StoreContract",
    "SummaryContract",
    "TraceContract",
    "TransferContract",
    "TurnAttemptContract",
    "draft",
    "new_session",
]
