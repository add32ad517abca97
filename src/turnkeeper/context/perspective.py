"""An agent's perspective on a multi-agent conversation (the multi-agent runner's
`buildAgentMessages`).

Pure over data: given the stored messages before the triggering event, the trigger, the agent's
name and its `last_processed_seq`, it builds exactly the multi-agent runner's list:

1. the full history before the trigger, in order: the user's messages as `user`, the agent's own
   as `assistant` (its own tool results stay `tool`), other agents' as `system` with `[name]:`
   attribution, system events (phase transitions, hand-offs, a system prompt) as `system`;
2. the "MESSAGES WHILE YOU WERE AWAY" block: one `system` message holding, again, every message of
   the other participants after `last_processed_seq` (the runner: "the check no longer excludes
   messages already in allPreviousMessages", so the block repeats them on purpose, to alert the
   agent), only when there is one. An agent at 0 has processed nothing: the whole history is new
   to it and arrives as history, so it gets no block (the runner's p-tagging at the start and
   mid-conversation);
3. the "=== NEW INTERACTION ===" marker, only when the block was added;
4. the trigger, exactly once, mapped by the same role rules.

Under a token budget the block, marker and trigger are never dropped (if they cannot fit the
build fails); when the history does not fit, its older part is replaced by the session's summary
(the same rolling checkpoints `summarize` uses), or, if no summary can be had, by the
sliding-window note saying how many messages were left out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from turnkeeper.context.formats import wire_name
from turnkeeper.context.selection import (
    Selection,
    SummarizerFailed,
    sliding_window_marker,
    summary_note,
)
from turnkeeper.context.summarizer import Summarizer
from turnkeeper.errors import ContextBudgetExceeded
from turnkeeper.tokens import REPLY_PRIMING, TokenCounter
from turnkeeper.types import ContextMessage, JSONObject, Message, Role

AWAY_HEADER = "MESSAGES WHILE YOU WERE AWAY:"
NEW_INTERACTION = "=== NEW INTERACTION ==="
EVENT_KEY = "event"
"""The `metadata` key that marks a stored system event (`phase_transition`, `handoff`)."""


class Said(Protocol):
    """What the perspective reads of a message: a stored `Message` or a pending draft."""

    @property
    def id(self) -> str: ...
    @property
    def role(self) -> Role: ...
    @property
    def content(self) -> str: ...
    @property
    def author(self) -> str | None: ...
    @property
    def tool_calls(self) -> tuple[JSONObject, ...] | None: ...
    @property
    def tool_call_id(self) -> str | None: ...


def speaker(message: Said) -> str:
    """The name a message is attributed to: its author, else its role."""
    return message.author or message.role.value


class Perspective:
    """Builds one agent's view. `render` turns a stored message into a window entry with its
    stored token count (the builder's); other entries are counted with `counter`."""

    def __init__(
        self,
        counter: TokenCounter,
        *,
        agent: str,
        last_processed_seq: int,
        render: Callable[[Message], ContextMessage],
        summarizer: Summarizer | None = None,
        summary_share: float = 0.25,
        max_summary_tokens: int = 1024,
    ) -> None:
        self.counter = counter
        self.agent = agent
        self.last_processed_seq = last_processed_seq
        self.render = render
        self.summarizer = summarizer
        self.summary_share = summary_share
        self.max_summary_tokens = max_summary_tokens
        self._own_calls: set[str] = set()
        self._callers: dict[str, str] = {}  # tool call id → the agent that made the call

    # -- roles ------------------------------------------------------------------------------

    def is_own(self, message: Said) -> bool:
        """The agent's own turn: authored by it, or a tool result answering its own call."""
        if message.role is Role.TOOL and message.author is None:
            return message.tool_call_id in self._own_calls
        return message.author == self.agent and message.role in (Role.ASSISTANT, Role.TOOL)

    def _entry(self, message: Said, seq: int | None, kind: str) -> ContextMessage:
        for call in message.tool_calls or ():
            if "id" in call and message.author:
                self._callers[str(call["id"])] = message.author
        if self.is_own(message):
            self._own_calls.update(str(c["id"]) for c in message.tool_calls or () if "id" in c)
            if isinstance(message, Message):
                return self.render(message)
            return self._counted(message.role, message.content, seq, kind, message)
        if message.role in (Role.USER, Role.SYSTEM):
            return self._counted(message.role, message.content, seq, kind, message)
        return self._counted(Role.SYSTEM, self.attributed(message), seq, kind, message)

    def attributed(self, message: Said) -> str:
        """Another agent's turn as text: `[name]: what it said` (a tool call or result says so)."""
        text = message.content
        if not text and message.tool_calls:
            names = (str((c.get("function") or {}).get("name", "")) for c in message.tool_calls)
            text = "called " + ", ".join(name for name in names if name)
        if message.role is Role.TOOL:
            caller = message.author or self._callers.get(message.tool_call_id or "", "tool")
            return f"[{caller}] tool result: {text}"
        return f"[{speaker(message)}]: {text}"

    def _counted(
        self, role: Role, content: str, seq: int | None, kind: str, message: Said
    ) -> ContextMessage:
        own = self.is_own(message)
        tool_calls = message.tool_calls if own else None
        tool_call_id = message.tool_call_id if own else None
        tokens = self.counter.count_message(
            role,
            content,
            name=wire_name(role, message.author),  # `to_openai` sends it
            tool_calls=tool_calls,
            tool_call_id=tool_call_id,
        )
        return ContextMessage(
            role=role, content=content, tokens=tokens, kind=kind, seq=seq,
            message_id=message.id, author=message.author, tool_calls=tool_calls,
            tool_call_id=tool_call_id,
        )  # fmt: skip

    def _note(self, text: str, kind: str = "marker") -> ContextMessage:
        return ContextMessage(
            Role.SYSTEM, text, self.counter.count_message(Role.SYSTEM, text), kind
        )

    # -- the list ---------------------------------------------------------------------------

    def away(self, earlier: Sequence[Message]) -> list[Message]:
        """The other participants' messages after `last_processed_seq` (none for an agent at 0,
        which gets them all as history). Events the agent itself recorded (its phase change,
        its hand-off) are its own: never news to it."""
        if self.last_processed_seq <= 0:
            return []
        return [
            m
            for m in earlier
            if m.seq > self.last_processed_seq and m.author != self.agent and not self.is_own(m)
        ]

    def __call__(
        self, earlier: Sequence[Message], trigger: Said, budget: int, *, pending: bool
    ) -> Selection:
        """The view for answering `trigger`, given every stored message before it, oldest
        first. `pending` says the trigger is not stored yet."""
        self._own_calls.clear()
        self._callers.clear()
        history = self._paired([self._entry(m, m.seq, "message") for m in earlier], earlier)
        missed = self.away(earlier)
        fixed: list[ContextMessage] = []
        if missed:
            lines = "\n\n".join(self._away_line(m) for m in missed)
            fixed = [self._note(f"{AWAY_HEADER}\n\n{lines}"), self._note(NEW_INTERACTION)]
        seq = None if pending else getattr(trigger, "seq", None)
        fixed.append(self._entry(trigger, seq, "pending" if pending else "message"))
        used = REPLY_PRIMING + sum(entry.tokens for entry in fixed)
        if used > budget:
            raise ContextBudgetExceeded("the triggering message", used, budget)
        if used + sum(entry.tokens for entry in history) <= budget:
            return Selection(messages=(*history, *fixed), left_out=0)
        return self._shortened(earlier, history, fixed, budget - used)

    def _paired(
        self, entries: list[ContextMessage], messages: Sequence[Message]
    ) -> list[ContextMessage]:
        """`entries` with every tool result that does not follow its call (through a run of
        results) turned into attributed text: a model API rejects a result without its call,
        and the agent still learns what the tool said."""
        out: list[ContextMessage] = []
        for entry, message in zip(entries, messages, strict=True):
            if entry.role is Role.TOOL and not _answers_previous(out, entry):
                text = self.attributed(message)
                tokens = self.counter.count_message(
                    Role.SYSTEM, text, name=wire_name(Role.SYSTEM, message.author)
                )
                entry = ContextMessage(
                    Role.SYSTEM, text, tokens, seq=entry.seq, message_id=entry.message_id,
                    author=message.author,
                )  # fmt: skip
            out.append(entry)
        return out

    def _away_line(self, message: Message) -> str:
        if message.role in (Role.USER, Role.SYSTEM):
            return f"[{speaker(message)}]: {message.content}"
        return self.attributed(message)

    def _shortened(
        self,
        earlier: Sequence[Message],
        history: list[ContextMessage],
        fixed: list[ContextMessage],
        room: int,
    ) -> Selection:
        """The history's newest part that fits, after a leading system message if it fits too,
        with the older part summarized (or, failing that, noted as left out)."""
        head = history[:1] if history and history[0].role is Role.SYSTEM else []
        room -= sum(entry.tokens for entry in head)
        reserve = min(int(room * self.summary_share), self.max_summary_tokens)
        start = self._tail_start(history, len(head), room - reserve)
        left = list(earlier[len(head) : start])
        note = None
        if self.summarizer is not None and left:
            tail_tokens = sum(entry.tokens for entry in history[start:])
            try:
                note = summary_note(
                    self.summarizer, left, room - tail_tokens, self.counter,
                    max_summary_tokens=self.max_summary_tokens,
                )  # fmt: skip
            except SummarizerFailed:
                note = None
        if note is None:  # the sliding-window result: the newest that fit beside the note
            start = self._tail_start(history, len(head), room - self._marker_cost(len(earlier)))
            left = list(earlier[len(head) : start])
            note = self._note(sliding_window_marker(len(left)))
            summarized: tuple[int, ...] = ()  # dropped: the builder names them
        else:
            summarized = tuple(m.seq for m in left)
        chosen = (*head, note, *history[start:], *fixed)
        used = REPLY_PRIMING + sum(entry.tokens for entry in chosen)
        budget = room + sum(entry.tokens for entry in (*head, *fixed)) + REPLY_PRIMING
        if used > budget:  # not even the note fits beside what is never dropped
            raise ContextBudgetExceeded("the triggering message with its notes", used, budget)
        return Selection(messages=chosen, left_out=len(left), summarized=summarized)

    def _marker_cost(self, left_out: int) -> int:
        return self._note(sliding_window_marker(left_out)).tokens

    @staticmethod
    def _tail_start(history: list[ContextMessage], floor: int, room: int) -> int:
        """Where the newest entries fitting `room` begin (never on a lone tool result)."""
        start = len(history)
        used = 0
        while start > floor and used + history[start - 1].tokens <= room:
            start -= 1
            used += history[start].tokens
        while start < len(history) and history[start].role is Role.TOOL:
            start += 1
        return start


def _answers_previous(window: list[ContextMessage], result: ContextMessage) -> bool:
    """True when `result` answers a call of the assistant message before the run of tool
    results that ends `window`."""
    index = len(window) - 1
    while index >= 0 and window[index].role is Role.TOOL:
        index -= 1
    if index < 0 or window[index].role is not Role.ASSISTANT:
        return False
    calls = window[index].tool_calls or ()
    return result.tool_call_id in {str(call.get("id")) for call in calls}
