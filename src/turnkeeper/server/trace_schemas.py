"""The HTTP shapes of turn traces (`turnkeeper.traces`): what the model saw for one reply."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from turnkeeper.records import seq_runs
from turnkeeper.traces import TurnTrace, WindowDiff

SeqRun = Annotated[list[int], Field(min_length=2, max_length=2)]
"""`[first, last]`: the seqs from `first` to `last`, both included (a report's and a trace's
seq sets go out as runs, so naming a long conversation's dropped messages stays short)."""


class TraceEntryPublic(BaseModel):
    """One entry of the window as it was sent."""

    model_config = ConfigDict(from_attributes=True)

    role: str
    content: str
    tokens: int = Field(description="Tokens of the entry, as counted by the trace's encoding.")
    kind: str = Field(description="message, marker, summary, pending or instructions.")
    seq: int | None = Field(description="The stored message it renders (null: marker, summary).")
    author: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    internal: bool = Field(
        default=False, description="An internal message (sent to the model, kept from users)."
    )


class UsagePublic(BaseModel):
    input_tokens: int = Field(description="Prompt tokens, cache reads and writes included.")
    output_tokens: int
    cache_read_input_tokens: int | None = Field(
        None,
        description="Of the input, tokens read from the provider's prompt cache (OpenAI's "
        "`prompt_tokens_details.cached_tokens`, Anthropic's `cache_read_input_tokens`).",
    )
    cache_creation_input_tokens: int | None = Field(
        None, description="Of the input, tokens written to the provider's prompt cache (Anthropic)."
    )


class TracePublic(BaseModel):
    """What the model saw for the reply at `seq`, how that window was built, and its cost."""

    model_config = ConfigDict(from_attributes=True)

    session_id: str
    seq: int = Field(description="The reply this trace belongs to.")
    turn_seq: int = Field(description="The turn it answered.")
    source: str = Field(description="Where the turn came from: chat, proxy, ui, cli or library.")
    model: str
    strategy: str
    budget: int
    encoding: str
    kept_seqs: list[int] = Field(description="Stored messages the window carried, in order.")
    dropped_seqs: list[SeqRun] = Field(
        description="Every message left out and not summarized, as runs `[first, last]`: as "
        "many as the window's marker says, older ones the build never read included."
    )
    summarized_seqs: list[SeqRun] = Field(description="The summarized messages, as runs.")
    loaded_seqs: list[SeqRun] = Field(description="The messages the build read, as runs.")
    summary_covers_to_seq: int | None = Field(
        description="The summary checkpoint used (the seq it covers to), if any."
    )
    cut_seq: int | None = Field(
        None,
        description="The session's cut point the window was held at (0: none yet; null: the "
        "strategy holds none, or the trace is older than cut points).",
    )
    tokens_sent: int = Field(description="Tokens of the window as counted (reply priming too).")
    usage: UsagePublic | None = Field(description="The upstream's own count, when it sent one.")
    latency_ms: int = Field(description="From asking the model to its whole answer.")
    request_id: str | None
    stream: bool
    created_at: str
    window: list[TraceEntryPublic]

    @classmethod
    def from_domain(cls, trace: TurnTrace) -> TracePublic:
        return cls.model_validate(
            {name: getattr(trace, name) for name in cls.model_fields if hasattr(trace, name)}
            | {
                "dropped_seqs": seq_runs(trace.dropped_seqs),
                "summarized_seqs": seq_runs(trace.summarized_seqs),
                "loaded_seqs": seq_runs(trace.loaded_seqs),
            }
        )


class TraceResponse(TracePublic):
    """A trace, and how its window differs from the previous turn's."""

    previous_seq: int | None = Field(description="The previous traced reply (null: none).")
    entered: list[TraceEntryPublic] = Field(description="Entries new since the previous window.")
    left: list[TraceEntryPublic] = Field(description="Entries of the previous window left out.")
    stayed: int
    prefix_matched: bool | None = Field(
        None,
        description="Whether the previous window, as rendered, is the start of this one (what a "
        "provider's prompt cache can serve); null: no previous turn.",
    )
    prefix_broken_at: int | None = Field(
        None, description="When it is not: the index in `window` of the first message that differs."
    )

    @classmethod
    def of(cls, trace: TurnTrace, previous: TurnTrace | None, diff: WindowDiff) -> TraceResponse:
        base = TracePublic.from_domain(trace).model_dump()
        return cls.model_validate(
            base
            | {
                "previous_seq": previous.seq if previous else None,
                "entered": [TraceEntryPublic.model_validate(e) for e in diff.entered],
                "left": [TraceEntryPublic.model_validate(e) for e in diff.left],
                "stayed": diff.stayed,
                "prefix_matched": diff.prefix_matched,
                "prefix_broken_at": diff.prefix_broken_at,
            }
        )
