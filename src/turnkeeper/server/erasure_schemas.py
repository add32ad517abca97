"""The HTTP shapes of erasure and legal holds (`turnkeeper.service.erasure`)."""

from __future__ import annotations

from datetime import datetime

from pydantic import ConfigDict, Field, StrictBool

from turnkeeper.server.schemas import _FromDomain, _Request
from turnkeeper.validation import NAME_PATTERN


class ErasureRequest(_Request):
    """What to erase: by `subject`, by `session`, or (neither given) every session of
    `project`. A project key works in its own project only; erasing by subject across every
    project (no `project`) takes an admin key."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"subject": "ticket-7"}, {"session": "support-42", "dry_run": True}]
        },
    )

    subject: str | None = Field(
        None,
        min_length=1,
        max_length=255,
        description="Erase every session whose subject is this (in `project` when given, else"
        " in every project: admin only).",
    )
    session: str | None = Field(
        None,
        min_length=1,
        max_length=255,
        description="Erase this session (id, or key in the project) and the branches forked"
        " from it.",
    )
    project: str | None = Field(
        None,
        pattern=NAME_PATTERN,
        description="The project to work in (a project key may name only its own); given alone,"
        " every session of it is erased.",
    )
    dry_run: StrictBool = Field(False, description="Say what would be erased; change nothing.")


class ErasureReceiptPublic(_FromDomain):
    """What an erasure did (or, `dry_run`, would do). Each erased id is a tombstone from now
    on: reading, appending to, forking or importing it answers 410."""

    erased_at: datetime
    sessions: list[str] = Field(description="The sessions erased.")
    held: list[str] = Field(description="Sessions matched but kept by a legal hold.")
    already_erased: list[str] = Field(description="Sessions asked for that were erased before.")
    messages: int
    summaries: int
    traces: int
    agent_states: int
    subject: str | None
    session: str | None
    project: str | None
    dry_run: bool


class LegalHoldPublic(_FromDomain):
    """A legal hold: on one session, or (`session_id` null) on every session of a project."""

    project: str
    session_id: str | None
    held_at: datetime
