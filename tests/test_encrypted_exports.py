"""Encrypted exports and archives (docs/privacy.md), through the CLI as a subprocess on real
SQLite files: `export --encrypt` and an encrypted store's expiry archive hold no plaintext,
read back into a fresh database after the sessions in them were deleted (their data keys
shredded), and refuse one clear error for a missing or wrong key, and one for a changed,
cut short or reordered file — before importing anything."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

import turnkeeper
from tests.hostile.served import run_cli
from turnkeeper.encryption.keys import generate_master_key
from turnkeeper.testing import NOW, draft
from turnkeeper.testing.encryption import CANARIES, canary_drafts

KEY = generate_master_key("k1")
OTHER_KEY = generate_master_key("k1")  # the same id, another key


def _canary_session(url: str, key: str = "canary", filler: int = 0) -> str:
    """A session whose content, metadata, tool arguments, tool result and trace each hold a
    canary (and `filler` messages of 1,000 bytes: several chunks of an encrypted export)."""
    with turnkeeper.open(url, encryption_key=KEY) as tk:
        session = tk.create_session(key=key)
        fillers = [draft(f"filler {n} " + "x" * 1000) for n in range(filler)]
        tk.store.append_messages(session.id, [*canary_drafts(), *fillers], now=NOW)
        return session.id


def _as_written(url: str, session_id: str) -> tuple[list[object], list[tuple[int, str]]]:
    with turnkeeper.open(url, encryption_key=KEY) as tk:
        messages = [
            (m.id, m.seq, m.role, m.content, m.metadata, m.tool_calls, m.tool_call_id)
            for m in tk.history(session_id)
        ]
        return messages, tk.store.read_traces(session_id, upto_seq=10**6, limit=10**6)


def _no_canary(data: bytes) -> None:
    for field, canary in CANARIES.items():
        assert canary.encode() not in data, field
    assert b"CANARY" not in data


ENV = {"TURNKEEPER_ENCRYPTION_KEY": KEY}


def _fails(*args: str, env: dict[str, str] | None = None) -> str:
    """A command that fails with one `error:` line, no traceback, nothing on stdout."""
    done = run_cli(*args, env=env)
    stderr = done.stderr.decode()
    assert done.returncode == 1 and done.stdout == b"", stderr
    assert stderr.count("\n") == 1 and stderr.startswith("error: "), stderr
    assert "Traceback" not in stderr
    return stderr


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, Path]:
    """A source database with a canary session (three chunks' worth), deleted after an
    encrypted export of it was written: (source URL, session id, export), and next to the
    export `written.json`, the session as written. Made once for the module (the export is a
    real `turnkeeper export --encrypt` process): the tests only read it, each writing its own
    files and databases in its own `tmp_path`."""
    tmp_path = tmp_path_factory.mktemp("exported")
    source = f"sqlite:///{tmp_path / 'source.db'}"
    session_id = _canary_session(source, filler=150)
    written = _as_written(source, session_id)
    out = tmp_path / "export.jsonl.enc"
    done = run_cli("export", "--encrypt", "-o", str(out), "--db", source, env=ENV)
    assert done.returncode == 0, done.stderr.decode()
    (tmp_path / "written.json").write_text(json.dumps(written, default=str))
    with turnkeeper.open(source, encryption_key=KEY) as tk:
        tk.delete_session(session_id)  # its data key is destroyed: the export must not need it
    return source, session_id, out


def test_an_encrypted_export_holds_no_plaintext_and_imports_whole_after_the_delete(
    exported: tuple[str, str, Path], tmp_path: Path
) -> None:
    _, session_id, out = exported
    data = out.read_bytes()
    _no_canary(data)
    assert b"filler" not in data and session_id.encode() not in data
    assert data.count(b"\n") >= 4  # the header and three chunks at least
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    done = run_cli("import", str(out), "--db", fresh, "--json", env=ENV)
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout)["messages_added"] == 154
    back = json.dumps(_as_written(fresh, session_id), default=str)
    assert back == (out.parent / "written.json").read_text()
    for canary in CANARIES.values():
        if canary != CANARIES["summary"]:  # an export carries no summaries
            assert canary in back
    again = run_cli("import", str(out), "--db", fresh, "--json", env=ENV)
    assert json.loads(again.stdout)["messages_added"] == 0


def test_a_missing_or_wrong_key_is_one_error_naming_encryption_key(
    exported: tuple[str, str, Path], tmp_path: Path
) -> None:
    _, _, out = exported
    plain = f"sqlite:///{tmp_path / 'plain.db'}"
    said = _fails("import", str(out), "--db", plain)
    assert "encryption_key: is not set" in said and "'k1'" in said
    other = f"sqlite:///{tmp_path / 'other.db'}"
    said = _fails("import", str(out), "--db", other, env={"TURNKEEPER_ENCRYPTION_KEY": OTHER_KEY})
    assert said.startswith("error: encryption_key: master key 'k1'") and "not the key" in said
    third = f"sqlite:///{tmp_path / 'third.db'}"
    elsewhere = generate_master_key("k9")
    said = _fails("import", str(out), "--db", third, env={"TURNKEEPER_ENCRYPTION_KEY": elsewhere})
    assert "encryption_key" in said and "master key 'k1'" in said and "(it has k9)" in said
    for url in (plain, other):
        with turnkeeper.open(url, encryption_key=OTHER_KEY if url == other else None) as tk:
            assert list(tk.iter_session_ids()) == []


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ("flip a byte", "has a chunk that does not decrypt (line 3)"),
        ("drop the last chunk", "ends before its last chunk"),
        ("swap two chunks", "has a chunk that does not decrypt (line 2)"),
        ("change the header", "has a chunk that does not decrypt (line 2)"),
        ("add a line", "goes on after its last chunk"),
        ("cut a chunk", "has a chunk that"),
    ],
)
def test_a_changed_file_is_one_file_error_and_imports_nothing(
    exported: tuple[str, str, Path], tmp_path: Path, change: str, says: str
) -> None:
    _, _, out = exported
    lines = out.read_bytes().splitlines(keepends=True)
    if change == "flip a byte":
        lines[2] = lines[2][:10] + (b"A" if lines[2][10:11] != b"A" else b"B") + lines[2][11:]
    elif change == "drop the last chunk":
        lines.pop()
    elif change == "swap two chunks":
        lines[1], lines[2] = lines[2], lines[1]
    elif change == "change the header":
        lines[0] = lines[0].replace(b'"chunk_bytes": 65536', b'"chunk_bytes": 65537')
    elif change == "add a line":
        lines.append(lines[-1])
    else:
        lines[-1] = lines[-1][: len(lines[-1]) // 2] + b"\n"
    changed = tmp_path / "changed.jsonl.enc"
    changed.write_bytes(b"".join(lines))
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    said = _fails("import", str(changed), "--db", fresh, env=ENV)
    assert said.startswith(f"error: file: {changed} is an encrypted export that {says}"), said
    assert "nothing was imported" in said
    with turnkeeper.open(fresh, encryption_key=KEY) as tk:
        assert list(tk.iter_session_ids()) == []


def test_export_encrypt_needs_the_key(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'plain.db'}"
    with turnkeeper.open(db) as tk:
        tk.append(tk.create_session(key="s"), "user", "hello")
    out = tmp_path / "out.enc"
    said = _fails("export", "--encrypt", "-o", str(out), "--db", db)
    assert said.startswith("error: encryption_key: is not set")
    assert not out.exists()


def test_an_encrypted_stores_archive_is_encrypted_and_reads_back_after_the_delete(
    tmp_path: Path,
) -> None:
    """Expiry archives what it deletes; on an encrypted store the archive is an encrypted
    export, readable with the master key though the sessions' own keys are gone."""
    url = f"sqlite:///{tmp_path / 'live.db'}"
    session_id = _canary_session(url)
    written = _as_written(url, session_id)
    archive_dir = tmp_path / "archive"
    with turnkeeper.open(url, encryption_key=KEY, archive_dir=archive_dir) as tk:
        tk.store.set_status(session_id, turnkeeper.SessionStatus.EXPIRED, now=NOW)
        report = tk.transfer.expire(delete=True, grace=timedelta(days=1))
        assert report.deleted == (session_id,)
        assert tk.store.keys.store.find(session_id) is None  # shredded
    assert report.archive_path is not None and report.archive_path.endswith(".jsonl.enc")
    archive = Path(report.archive_path)
    _no_canary(archive.read_bytes())
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    done = run_cli("import", str(archive), "--db", fresh, "--json", env=ENV)
    assert done.returncode == 0, done.stderr.decode()
    assert _as_written(fresh, session_id) == written
