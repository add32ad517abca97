"""Import a desktop agents app's session files into turnkeeper (`--from session-files`).

The app is named in its own directory names; docs/compatibility.md maps its words onto ours.

Three kinds of file, all found under a project root (or given one by one):

- `.dagent-worktrees/{featureId}/.dagent/sessions/{sessionId}.json` — a `ConversationSession`
  (`id`, `type`, `featureId`, `taskId?`, `createdAt`, `updatedAt`, `status`, `messages`);
- the old `{featureId}/.dagent/chat.json` — `{"entries": [{role, content, timestamp}]}`;
- the old `{featureId}/.dagent/nodes/{taskId}/session.json` — the dev agent's appended
  messages (an object with `messages` or `entries`, or a bare array).

The session id becomes the key; the old files get the ids the app's own migration plan gives
them (`pm-feature-{featureId}`, `dev-task-{featureId}-{taskId}`), so an old file and its
successor land in the same turnkeeper session, the old messages first. `type` becomes the kind,
`featureId` the subject (the unit of work) and,
with `taskId`, session metadata. Per message, `metadata.internal` becomes `internal`, `metadata.tokens` the usage, the
agent type the author of assistant turns, and the rest of the metadata (`toolUse`, `iteration`…)
is kept as is, with the message's own id as `dagent_id`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from turnkeeper.errors import InvalidInput
from turnkeeper.importers.base import (
    Batch,
    ImportReport,
    ImportTarget,
    SourceMessage,
    build_batch,
    derived_id,
    parse_time,
)
from turnkeeper.importers.located import Located, load
from turnkeeper.types import NewMessage, Session, SessionStatus, Usage
from turnkeeper.validation import check_name

SESSION, CHAT, NODE = "session", "chat", "node"
_ARRAY_KEYS = ("messages", "entries")


@dataclass
class _Conversation:
    """Everything read for one session key, over all the files that hold it."""

    key: str
    kind: str
    feature: str
    task: str | None
    origin: str
    created_at: datetime | None = None
    updated_at: datetime | None = None
    status: SessionStatus = SessionStatus.ACTIVE
    messages: list[SourceMessage] = field(default_factory=list)


def file_kind(path: Path) -> str | None:
    """Which of the three files `path` is, by where it sits (None: none of them)."""
    parent = path.parent
    if path.suffix == ".json" and parent.name == "sessions" and parent.parent.name == ".dagent":
        return SESSION
    if path.name == "chat.json":
        return CHAT
    if path.name == "session.json" and parent.parent.name == "nodes":
        return NODE
    return None


def find_files(root: Path) -> list[Path]:
    """The session files under `root`, the old kinds first so their messages come first."""
    if root.is_file():
        return [root]
    worktrees = root / ".dagent-worktrees"  # a project root: don't walk its node_modules
    base = worktrees if worktrees.is_dir() else root
    found = [path for path in base.rglob("*.json") if file_kind(path) is not None]
    return sorted(found, key=lambda path: (file_kind(path) == SESSION, str(path)))


def read_batches(
    tk: ImportTarget, root: Path, report: ImportReport, project: str
) -> Iterator[Batch]:
    """One batch per session key found under `root` (a directory or a single file)."""
    conversations: dict[str, _Conversation] = {}
    for path in find_files(root):
        try:
            _read_file(path, conversations, report)
        except json.JSONDecodeError as exc:
            problem = exc.msg.removesuffix(" at")  # json's messages end in " at" (a position)
            report.errors.append(
                f"{path}:{exc.lineno}: not valid JSON ({problem}, column {exc.colno})"
            )
        except OSError as exc:
            report.errors.append(f"{path}: cannot read: {exc.strerror}")
        except (ValueError, InvalidInput) as exc:  # the session object's own fields: line 1
            report.errors.append(f"{path}:1: {exc}")
    for conversation in conversations.values():
        yield _batch(tk, conversation, report, project)


def _read_file(path: Path, conversations: dict[str, _Conversation], report: ImportReport) -> None:
    document = load(path.read_text(encoding="utf-8"), _ARRAY_KEYS)
    body = document.value
    kind = file_kind(path) or (SESSION if isinstance(body, dict) and "type" in body else CHAT)
    fields = body if isinstance(body, dict) else {}
    if kind == SESSION and not isinstance(body, dict):
        raise ValueError("a session file must hold a JSON object")
    if document.array_key is None and not isinstance(body, list):
        raise ValueError("no messages array (expected 'messages' or 'entries')")
    feature = _text(fields, "featureId") or _feature_from_path(path, kind)
    task = _text(fields, "taskId") or (path.parent.name if kind == NODE else None)
    if kind == SESSION:
        key = _text(fields, "id") or path.stem
        session_type = _text(fields, "type") or key.rsplit("-" + feature, 1)[0]
    elif kind == NODE:
        key, session_type = f"dev-task-{feature}-{task}", "dev-task"
    else:
        key, session_type = f"pm-feature-{feature}", "pm-feature"
    check_name("session id", key)
    created_at, updated_at = _time(fields, "createdAt"), _time(fields, "updatedAt")
    conversation = conversations.get(key)
    if conversation is None:
        conversation = _Conversation(key, session_type, feature, task, f"{path}:1")
        conversations[key] = conversation
    if kind == SESSION:  # the new file's session fields win over the old files'
        conversation.kind, conversation.origin = session_type, f"{path}:1"
        conversation.created_at, conversation.updated_at = created_at, updated_at
        if fields.get("status") == "archived":
            conversation.status = SessionStatus.ARCHIVED
    conversation.messages.extend(_messages(path, document.elements, conversation, report))


def _text(fields: dict[str, Any], name: str) -> str | None:
    value = fields.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, not {value!r}")
    return value


def _time(fields: dict[str, Any], name: str) -> datetime | None:
    return None if fields.get(name) is None else parse_time(fields[name], name)


def _feature_from_path(path: Path, kind: str) -> str:
    """The feature a file belongs to: the directory holding its `.dagent` folder."""
    for ancestor in path.parents:
        if ancestor.name == ".dagent":
            return ancestor.parent.name
    return (path.parents[2] if kind == NODE else path.parent).name


def _messages(
    path: Path, elements: Iterable[Located], conversation: _Conversation, report: ImportReport
) -> Iterator[SourceMessage]:
    """The file's messages; one that cannot be read is reported by its line and left out.
    A message without a time gets the one before it (or the session's creation time)."""
    previous = conversation.messages[-1].created_at if conversation.messages else None
    for element in elements:
        where = f"{path}:{element.line}"
        try:
            message, previous, identity = _message(
                element.value, previous or conversation.created_at
            )
        except ValueError as exc:
            report.errors.append(f"{where}: {exc}")
            continue
        yield SourceMessage(where, identity, message, previous)


def _message(raw: Any, fallback: datetime | None) -> tuple[NewMessage, datetime, str]:
    if not isinstance(raw, dict):
        raise ValueError("a message must be a JSON object")
    metadata = raw.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise ValueError("metadata must be a JSON object")
    extra = {k: v for k, v in metadata.items() if k not in ("internal", "tokens")}
    if raw.get("id") is not None:
        extra["dagent_id"] = raw["id"]
    stamp = raw.get("timestamp")
    created_at = parse_time(stamp) if stamp is not None else fallback
    if created_at is None:
        raise ValueError("missing timestamp")
    role, content = raw.get("role"), raw.get("content")
    if not isinstance(role, str):
        raise ValueError("missing role")
    if not isinstance(content, str):
        raise ValueError("content must be text")
    agent = metadata.get("agentType")
    message = NewMessage(
        role=role,
        content=content,
        author=agent if role == "assistant" and isinstance(agent, str) else None,
        internal=metadata.get("internal") is True,
        usage=_usage(metadata.get("tokens")),
        metadata=extra,
    )
    identity = str(raw["id"]) if raw.get("id") is not None else f"{role}|{stamp}|{content}"
    return message, created_at, identity


def _usage(tokens: Any) -> Usage | None:
    if tokens is None:
        return None
    if not isinstance(tokens, dict):
        raise ValueError("metadata.tokens must be {input, output}")
    counts = (tokens.get("input", 0), tokens.get("output", 0))
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts):
        raise ValueError("metadata.tokens.input and .output must be non-negative integers")
    return Usage(*counts)


def _batch(
    tk: ImportTarget, conversation: _Conversation, report: ImportReport, project: str
) -> Batch:
    times = [m.created_at for m in conversation.messages]
    created = min([*times, *filter(None, [conversation.created_at])], default=datetime.now(UTC))
    metadata: dict[str, Any] = {"source": "dagent", "featureId": conversation.feature}
    if conversation.task is not None:
        metadata["taskId"] = conversation.task
    session = Session(
        id=derived_id("dagent", project, conversation.key),
        project=project,
        created_at=created,
        updated_at=conversation.updated_at or (max(times) if times else created),
        key=conversation.key,
        subject=conversation.feature,
        kind=conversation.kind,
        status=conversation.status,
        metadata=metadata,
    )
    return build_batch(tk, session, conversation.origin, conversation.messages, report)
