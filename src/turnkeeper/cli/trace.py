"""`turnkeeper trace SESSION SEQ`: what the model saw for one reply, and what changed since the
previous turn's window."""

from __future__ import annotations

from typing import Annotated

import typer

from turnkeeper.cli.app import Ctx, ProjectOption, SessionArg, app, command
from turnkeeper.records import plain
from turnkeeper.traces import TraceEntry, trace_of, window_diff


def _entry_line(sign: str, entry: TraceEntry) -> str:
    where = f"#{entry.seq}" if entry.seq is not None else entry.kind
    text = entry.content.replace("\n", " ")
    return f"{sign} {where} {entry.role}: {text[:80]}"


@command(app, "trace")
def trace(
    ctx: Ctx,
    session: SessionArg,
    seq: Annotated[int, typer.Argument(metavar="SEQ", min=1, help="The reply's seq.")],
    project: ProjectOption = None,
) -> None:
    """Show what the model saw for the reply at SEQ: the window exactly as sent, how it was
    built, what it cost, and what entered or fell out since the previous turn."""
    current, previous = trace_of(ctx.tk, session, seq, project=project)
    diff = window_diff(previous, current)
    if ctx.out.json:
        ctx.out.document(
            plain(current) | {"previous_seq": previous.seq if previous else None} | plain(diff)
        )
        return
    window = current.to_window()
    ctx.out.context(window, current.messages())
    usage = current.usage or {}
    ctx.out.note(
        f"reply #{current.seq} to #{current.turn_seq} via {current.source}"
        f" · model {current.model} · {current.latency_ms} ms"
        + (f" · usage {usage['input_tokens']} in / {usage['output_tokens']} out" if usage else "")
        + _cache_note(usage)
        + (f" · request {current.request_id}" if current.request_id else "")
    )
    if current.summary_covers_to_seq is not None:
        ctx.out.note(f"summary checkpoint used: covers #1..#{current.summary_covers_to_seq}")
    since = f"reply #{previous.seq}" if previous else "nothing (the first traced turn)"
    ctx.out.note(f"since {since}: {len(diff.entered)} entered, {len(diff.left)} left, "
                 f"{diff.stayed} stayed")  # fmt: skip
    if diff.prefix_matched is not None:
        ctx.out.note(_prefix_note(diff.prefix_broken_at, current.window))
    for sign, entries in (("+", diff.entered), ("-", diff.left)):
        for entry in entries:
            ctx.out.note(_entry_line(sign, entry).replace("[", "\\["))


def _prefix_note(broken_at: int | None, window: list[TraceEntry]) -> str:
    """Whether the previous window is this one's prefix (what a prompt cache can serve), and
    where it broke."""
    if broken_at is None:
        return "prefix: matched the previous turn's window (cacheable)"
    if broken_at >= len(window):
        return f"prefix: broken at message {broken_at} (this window is shorter)"
    entry = window[broken_at]
    where = f"#{entry.seq}" if entry.seq is not None else entry.kind
    return f"prefix: broken at message {broken_at} ({where} {entry.role})"


def _cache_note(usage: dict[str, int]) -> str:
    """The prompt cache's part of the input, when the upstream counted it."""
    read, written = usage.get("cache_read_input_tokens"), usage.get("cache_creation_input_tokens")
    if read is None and written is None:
        return ""
    return f" ({read or 0} read from the prompt cache, {written or 0} written to it)"
