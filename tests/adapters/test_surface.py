"""The adapters' and importers' public names, and the rule that importing turnkeeper (or the
adapters package) loads no framework until an adapter is used."""

from __future__ import annotations

import subprocess
import sys

import turnkeeper.adapters
import turnkeeper.importers


def test_the_public_names_are_pinned() -> None:
    assert sorted(turnkeeper.adapters.__all__) == [
        "MissingExtra", "TurnkeeperChatMessageHistory", "TurnkeeperMiddleware",
        "TurnkeeperSession",
    ]  # fmt: skip
    assert sorted(turnkeeper.importers.__all__) == [
        "ImportReport", "SourceKind", "detect", "import_from",
    ]  # fmt: skip


def test_frameworks_load_only_when_an_adapter_is_used() -> None:
    probe = (
        "import sys, turnkeeper, turnkeeper.adapters as a\n"
        "before = [m in sys.modules for m in ('agents', 'langchain_core')]\n"
        "a.TurnkeeperSession\n"
        "print(before, 'agents' in sys.modules, 'langchain_core' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["[False,", "False]", "True", "False"]
