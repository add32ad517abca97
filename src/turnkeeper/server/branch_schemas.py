"""The HTTP shapes of conversation branches (`turnkeeper.service.branches`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from turnkeeper.server.schemas import JSON, _FromDomain, _Request, _ttl, _ttl_seconds
from turnkeeper.validation import KEY_PATTERN


class ForkRequest(_Request):
    """Where to fork and what the branch is called."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"at_seq": 4, "title": "Try the other design"}]},
    )

    at_seq: int = Field(
        ge=0,
        le=2**31 - 1,
        description="The last seq the branch shares with the session (0: none of it).",
    )
    key: str | None = Field(
        None,
        pattern=KEY_PATTERN,
        description="Natural key of the branch (free among live sessions; no /).",
    )
    title: str | None = Field(None, max_length=1000, description="Default: the source's title.")
    metadata: JSON | None = Field(None, description="Default: the source's metadata.")
    ttl_seconds: float | None = _ttl_seconds(
        "Lifetime in seconds. Absent: the configured session_expiration; null: the branch"
        " never expires."
    )

    def fields(self) -> dict[str, Any]:
        """The keyword arguments of `Turnkeeper.fork` after the session and `at_seq`."""
        ttl = _ttl(self, self.ttl_seconds)
        return dict(key=self.key, title=self.title, metadata=self.metadata, ttl=ttl)


class BranchPublic(_FromDomain):
    """A fork: the branch, the session it came from, and the last seq they share."""

    session_id: str = Field(description="The branch.")
    parent_id: str = Field(description="The session it was forked from (may be deleted since).")
    forked_at_seq: int
    created_at: datetime


class BranchList(BaseModel):
    """Where a session came from, and the branches forked from it."""

    forked_from: BranchPublic | None = Field(description="null: not a branch.")
    branches: list[BranchPublic] = Field(description="Forks of this session, oldest first.")
