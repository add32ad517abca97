"""One documented exception tree for every turnkeeper interface.

Backends map their driver errors onto these once, at the boundary; the CLI turns any
`TurnkeeperError` into a single line on stderr, and (later) the HTTP app maps each class to a
problem response (`turnkeeper.server.problems`). Callers catch `TurnkeeperError` to handle all
of them.

    TurnkeeperError
    ├── NotFound
    │   └── SessionNotFound
    │       └── SessionErased    (the id is a tombstone: erased, never to come back; HTTP 410)
    ├── SessionExpired
    ├── Conflict                 (key taken, expected_last_seq stale, id reused, archived)
    │   ├── SessionHeld          (a legal hold keeps the session from delete and reset)
    │   ├── SeqConflict
    │   └── TurnInProgress       (another request is still answering this chat turn)
    ├── InvalidInput             (bad value supplied by a caller; names the field)
    │   ├── InvalidMessage
    │   │   └── ContentTooLarge  (content or a JSON value over its size limit)
    │   ├── MalformedRequest     (the request itself: a header sent twice)
    │   ├── InvalidConfig
    │   └── SearchTooSlow        (a search ran past `search_timeout`: narrow it)
    ├── ContextBudgetExceeded
    ├── BackendUnavailable
    ├── TooManyRequests          (this API key already runs as many of these as it may)
    ├── Unsupported              (the store lacks a capability the request needs)
    ├── KeyUnavailable           (encrypted content this process cannot open: HTTP 503)
    │   └── KeyDestroyed         (the session was deleted, its data key with it: HTTP 410)
    ├── Unauthenticated          (no API key, or one that is unknown or revoked)
    ├── Forbidden                (a project key asking for another project by name)
    └── UpstreamError            (the configured model endpoint failed or answered badly)
        └── UpstreamTimeout
"""

from __future__ import annotations


class TurnkeeperError(Exception):
    """Base of every error turnkeeper raises on purpose."""


class NotFound(TurnkeeperError):
    """Something addressed by id or key does not exist (or is not visible to the caller)."""


class SessionNotFound(NotFound):
    """No session has this id, or no session of the project has this key. `hint` says where it
    is, when the interface found it in another project the caller may see."""

    def __init__(self, ref: str, project: str | None = None, *, hint: str | None = None) -> None:
        where = f" in project {project!r}" if project else ""
        super().__init__(f"session {ref!r} not found{where}" + (f"; {hint}" if hint else ""))
        self.ref = ref
        self.project = project
        self.hint = hint


class SessionErased(SessionNotFound):
    """The session was erased (`erase`): its id is a tombstone, and nothing may bring it back —
    no append, import or fork. A `SessionNotFound` too, so code that handles a missing
    session handles it; HTTP answers it 410 Gone."""

    def __init__(self, session_id: str, project: str, erased_at: str) -> None:
        super().__init__(session_id)
        self.args = (
            f"session {session_id!r} was erased at {erased_at}; its id cannot be used again",
        )
        self.session_id = session_id
        self.project = project
        self.erased_at = erased_at


class SessionExpired(TurnkeeperError):
    """The session is past its `expires_at`; it is readable for audit but never served as live."""

    def __init__(self, session_id: str, expires_at: str) -> None:
        super().__init__(f"session {session_id} expired at {expires_at}")
        self.session_id = session_id
        self.expires_at = expires_at


class Conflict(TurnkeeperError):
    """The request is well-formed but clashes with the stored state."""


class SessionHeld(Conflict):
    """The session is under a legal hold (its own or its project's): deleting or resetting it
    would destroy what the hold keeps. Release the hold first."""

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"session {session_id} is under a legal hold: it can be deleted or reset once the "
            "hold is released"
        )
        self.session_id = session_id


class SeqConflict(Conflict):
    """An append carried `expected_last_seq`, and the session has moved on since."""

    def __init__(self, session_id: str, expected: int, actual: int) -> None:
        super().__init__(
            f"session {session_id}: expected_last_seq is {expected} but the last seq is {actual}"
        )
        self.session_id = session_id
        self.expected = expected
        self.actual = actual


class TurnInProgress(Conflict):
    """A retried chat turn is still being answered by the request that asked the model first,
    and this one waited as long as it may (`turnkeeper.attempts`). Nothing was stored or asked;
    the same request sent again after `retry_after` seconds gets the answer once there is one
    (HTTP 409 with `Retry-After`, as the IETF idempotency-key draft says of a request still
    being processed)."""

    def __init__(self, session_id: str, retry_after: int) -> None:
        super().__init__(
            f"this turn of session {session_id} is still being answered by an earlier request;"
            f" send the same request again in {retry_after} s to get its answer"
        )
        self.session_id = session_id
        self.retry_after = retry_after


class InvalidInput(TurnkeeperError):
    """A value supplied by the caller is not acceptable. `field` names it."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class InvalidMessage(InvalidInput):
    """A message to append is malformed (role, content, size, metadata, tool calls…)."""


class ContentTooLarge(InvalidMessage):
    """A message's content is larger than `max_message_bytes`, or a JSON value (metadata, tool
    calls) larger than `max_json_bytes` (HTTP 413, not 422: the cure is a smaller body, not a
    different value)."""


class MalformedRequest(InvalidInput):
    """The request is malformed as a whole rather than a value in it: a header that may appear
    once sent several times (HTTP 400). `field` names the header."""


class IdempotencyKeyReused(InvalidInput):
    """An `Idempotency-Key` already used in this session for a request with other messages
    (IETF httpapi idempotency-key draft: HTTP 422). A retry must repeat its request exactly;
    another request needs another key."""

    def __init__(self) -> None:
        super().__init__(
            "Idempotency-Key",
            "this key was already used in this session for a request with other messages;"
            " repeat that request unchanged to get its result, or use a new key",
        )


class InvalidConfig(InvalidInput):
    """A configuration value (file, environment or argument) is not acceptable."""


class SearchTooSlow(InvalidInput):
    """A full-text search ran longer than `search_timeout` and was stopped. The cure is a
    narrower query (HTTP 422 naming `q`), not the same one again."""

    def __init__(self, seconds: float) -> None:
        bound = f"{seconds:g} s" if seconds >= 1 else f"{seconds * 1000:g} ms"
        super().__init__(
            "q",
            f"the search took longer than {bound} and was stopped; narrow it: rarer words or"
            " a phrase, a session, a role, or a time range (since/until)",
        )
        self.seconds = seconds


class ContextBudgetExceeded(TurnkeeperError):
    """What must be in the window (the triggering message, or all of `full`) cannot fit."""

    def __init__(self, what: str, needed: int, budget: int) -> None:
        super().__init__(f"{what} needs {needed} tokens but the budget is {budget} tokens")
        self.what = what
        self.needed = needed
        self.budget = budget


class BackendUnavailable(TurnkeeperError):
    """The storage backend cannot be reached or refused to work."""


class TooManyRequests(TurnkeeperError):
    """The caller already runs as many requests of this kind at once as one API key may (HTTP
    429 with `Retry-After: retry_after`). Nothing was done; the same request later will be."""

    def __init__(self, message: str, *, retry_after: int = 1) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Unsupported(TurnkeeperError):
    """The configured store lacks an optional capability this request needs (summaries,
    agent states, API keys, …): the deployment cannot serve it, whatever the caller sends
    (HTTP 501). See `turnkeeper.storage.base.require`."""


class KeyUnavailable(TurnkeeperError):
    """Stored content is encrypted under a data key this process cannot open: its key is
    wrapped by a master key that `encryption_key` no longer holds (or not the key of that id
    it was written with), or a value does not open with its session's key (changed at rest,
    or written under another key store). Never garbage: the message says which
    (docs/privacy.md). The deployment's configuration is at fault, which no client can
    change: HTTP 503."""


class KeyDestroyed(KeyUnavailable):
    """The session's data key is not in the key store: the session was deleted, which
    destroyed its key first (crypto-shredding), and its rows are still here — a backup of the
    data restored after the delete, or a delete stopped between its two steps. What it stored
    can never be read again: HTTP 410, as an expired session."""

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"session {session_id} was deleted: its data key is not in the key store (a"
            " deleted session's key is destroyed), so what it stored cannot be read again;"
            " if it was not deleted, key_store is not the key store its data was written with"
        )
        self.session_id = session_id


class Unauthenticated(TurnkeeperError):
    """The request carries no API key, or one that is malformed, unknown or revoked.

    The message never says which of these it was, so a caller cannot probe for key ids.
    """


class Forbidden(TurnkeeperError):
    """The caller is known but may not do this (a project key naming another project).

    Only raised where the caller named the other project itself; a session of another project
    addressed by id or key is `SessionNotFound`, so its existence is never revealed.
    """


class UpstreamError(TurnkeeperError):
    """The upstream model endpoint failed, refused the request or answered something unusable.

    `status` is the upstream's HTTP status when it answered (None when it could not be reached);
    `retry_after` its `Retry-After` header, passed on to the client; `unreachable` says the
    connection was refused (nothing was sent, so trying again is safe).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retry_after: str | None = None,
        unreachable: bool = False,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after
        self.unreachable = unreachable

    @property
    def refused(self) -> bool:
        """The upstream answered that the request itself is wrong (a 4xx other than a timeout,
        a conflict or a rate limit): the same request again gets the same answer."""
        return self.status is not None and 400 <= self.status < 500 and self.status not in (
            408, 409, 429,
        )  # fmt: skip


class UpstreamTimeout(UpstreamError):
    """The upstream model did not answer within `llm_timeout`."""
