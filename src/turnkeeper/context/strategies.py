"""Context strategies: objects that say how a window is chosen, and the registry of them by name.

A strategy (`Strategy`, exported as `turnkeeper.Strategy`) declares everything a build needs to
know about it, so the service's `context()` knows none of them by name:

- its budget rule (`budget_rule`: the token limit and the reserve, from the caller's arguments
  and the settings);
- its defaults (`include_internal`: whether it sees internal messages unless told);
- what it may remember (`uses_checkpoints`: whether it may read and extend the session's stored
  summary checkpoints; a `HoldsCut` strategy starts its window at the session's stored cut
  point, `Build.cut`, and reports where the window's cut point is now, which the service
  stores);
- and the selection itself (`select`), a pure function of the history's units, the budget and
  the build's options (`Build`), sharing the invariant-keeping machinery of `context.selection`.
  A strategy that recalls older turns by relevance finds them through `Build.retriever` (the
  store's full-text index, `context.retrieval`) or a retriever of its own; `relevant` lives in
  `context.relevant`.

The six built-ins are registered by name in every service (`Strategies`); a caller passes a
name or a strategy object, and may register its own (`tk.strategies.register(...)`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from turnkeeper.config import Settings
from turnkeeper.context.retrieval import Retriever
from turnkeeper.context.selection import (
    CutRule,
    Marker,
    Plan,
    Selection,
    SummarizerFailed,
    cut_of,
    everything,
    fit_marker,
    hold_cut,
    is_system,
    note_after_system,
    recent_marker,
    sliding_window_marker,
    stands_alone,
    start,
    summary_note,
    system_note,
    take_tail,
    truncate_marker,
)
from turnkeeper.context.summarizer import Summarizer
from turnkeeper.context.units import Turns, Unit
from turnkeeper.errors import ContextBudgetExceeded, InvalidInput
from turnkeeper.tokens import TokenCounter, context_window_for_model
from turnkeeper.types import ContextMessage, CutMode, Message, Session, StrategyName


@dataclass(frozen=True, slots=True)
class Build:
    """What one build gives its strategy besides the history and the budget."""

    counter: TokenCounter
    """The target model's tokenizer (notes and summaries are counted with it)."""
    keep_recent: int
    """How many recent messages the caller asked to keep (`recent`, `summarize`)."""
    summarizer: Summarizer
    """The summarizer of this build (its stored checkpoints when `uses_checkpoints` allows)."""
    max_messages: int | None = None
    """The most stored messages a window may hold where a strategy caps them
    (`max_history_messages`; `truncate` uses it)."""
    session: Session | None = None
    """The session as read for this build (its version, message count and stored tokens);
    None for a build over a history with no session (a preview, a test)."""
    retriever: Retriever | None = None
    """The service's retriever (the store's full-text index), for a strategy that recalls
    older turns by relevance (`relevant`); None when there is none."""
    cut: CutRule = field(default_factory=CutRule)
    """The session's stored cut point and the settings' rule for it (`window_cut`, the
    watermarks): where a `HoldsCut` strategy starts its window."""


class Strategy:
    """A context strategy. Subclass it, give it a `name`, and implement `select`.

    `select(turns, budget, build)` returns a `Selection`: the window's entries in order and how
    many stored messages were left out. `newest_that_fit` does the common work (a head, then the
    newest units that fit, and a marker naming what was left out); `turnkeeper.context.selection`
    holds the rest of the machinery the built-ins use. `select` must depend on nothing but its
    arguments and the strategy's own configuration: a service remembers the last window per
    session version (`cache.windows`) unless the strategy `uses_checkpoints` or says its window
    depends on more (`window_per_version` False).
    """

    name: str = ""
    """The name callers use (`tk.context(..., strategy=name)`) and reports show."""
    include_internal: bool = True
    """Whether the strategy sees internal messages when the caller does not say."""
    uses_checkpoints: bool = False
    """What it may remember: True lets a build that sees every message read and extend the
    session's stored summary checkpoints (`summarize`); nothing else is kept between builds."""
    window_per_version: bool = True
    """Whether its window depends on nothing but the session as stored (and the build's
    arguments), so that a service may remember it per session version (`cache.windows`).
    False for one that asks something outside the store (`relevant` with a retriever of
    the caller's, whose answers may change while the session does not)."""

    def budget_rule(
        self,
        settings: Settings,
        *,
        budget_tokens: int | None,
        reserved_tokens: int | None,
        model: str,
    ) -> tuple[int, int]:
        """The build's token limit and the part of it reserved (the window gets the rest).

        `budget_tokens`, else the strategy's `default_budget`; `reserved_tokens`, else the
        default reserve, which belongs to the default budget: a caller who gives
        `budget_tokens` without `reserved_tokens` has nothing reserved."""
        default_limit, default_reserve = self.default_budget(settings, model)
        limit = budget_tokens or default_limit
        reserve = default_reserve if budget_tokens is None else 0
        return limit, reserve if reserved_tokens is None else reserved_tokens

    def default_budget(self, settings: Settings, model: str) -> tuple[int, int]:
        """The limit and the reserve of a build whose caller gives no budget: by default the
        `budget_tokens` setting, else `budget_ratio` × the model's context window, with
        nothing reserved."""
        window = context_window_for_model(model, settings.default_context_window)
        return settings.budget_tokens or math.floor(window * settings.budget_ratio), 0

    def select(self, turns: Turns, budget: int, build: Build) -> Selection:
        """The window's entries for `turns` within `budget` tokens (reply priming included)."""
        raise NotImplementedError(f"{type(self).__name__} must implement select()")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} strategy {self.name!r}>"


def newest_that_fit(
    turns: Turns,
    budget: int,
    counter: TokenCounter,
    *,
    marker: Marker,
    head: ContextMessage | None = None,
    limit: int | None = None,
    cut: CutRule | None = None,
) -> Selection:
    """`head` (kept if it fits), then the newest units that fit `budget`, at most `limit`
    stored messages, with `marker(left_out)` as a note when anything is left out.

    With a `cut` rule in `stable` mode the units are those of the window held at the cut
    point (`selection.hold_cut`), and the selection names the cut point it holds now."""
    plan, older = start(turns, budget, head, limit=limit)
    held = cut is not None and cut.mode is CutMode.STABLE
    if cut is not None and held:
        widest = system_note(counter, marker(max(1, turns.total()))).tokens
        hold_cut(plan, older, budget, limit=limit, rule=cut, reserve=widest)
    else:
        take_tail(plan, older, budget, limit=limit)
    plan.total = turns.total()
    fit_marker(plan, budget, marker, counter)
    note_after_system(plan, turns)
    return plan.selection(turns.loaded(), cut=cut_of(plan, turns.next_seq()) if held else None)


class Full(Strategy):
    """Every message, in order; fails rather than leave any turn out."""

    name = StrategyName.FULL

    def select(self, turns: Turns, budget: int, build: Build) -> Selection:
        trigger, older = turns.units()
        plan = everything(turns, trigger, list(older), None, build.counter)
        if plan.tokens > budget:
            raise ContextBudgetExceeded("the full history", plan.tokens, budget)
        note_after_system(plan, turns)
        return plan.selection(turns.loaded())


class HoldsCut(Strategy):
    """A strategy that leaves older turns out, from a cut point held per session.

    `cut` is `"stable"` (the window starts at the session's stored cut point, which stays put
    while the window fits and moves when it overflows, so the prefix stays cacheable) or
    `"slide"` (the oldest turn that fits, chosen again for every build); None follows the
    strategy's `default_cut`, and where that is None the `window_cut` setting."""

    default_cut: CutMode | None = None
    """The mode when none is given: None follows the `window_cut` setting."""

    def __init__(self, *, cut: CutMode | str | None = None) -> None:
        if cut is not None and cut not in tuple(CutMode):
            choices = ", ".join(mode.value for mode in CutMode)
            raise InvalidInput("cut", f"unknown cut mode {cut!r}; choose one of {choices}")
        self.cut = self.default_cut if cut is None else CutMode(cut)

    def rule(self, build: Build) -> CutRule:
        """The build's cut rule, in this strategy's own mode if it has one."""
        return build.cut if self.cut is None else replace(build.cut, mode=self.cut)


class Recent(HoldsCut):
    """The last `keep_recent` user-facing messages that fit.

    It slides unless given `cut="stable"`: its promise is the last N, and its windows are
    seldom as large as the 1,024 tokens a provider caches at the least
    (`bench/results/windows-cut-points.md`), so a held cut point would only make them shorter.
    """

    name = StrategyName.RECENT
    include_internal = False
    default_cut = CutMode.SLIDE

    def select(self, turns: Turns, budget: int, build: Build) -> Selection:
        return newest_that_fit(
            turns, budget, build.counter, marker=recent_marker, limit=build.keep_recent,
            cut=self.rule(build),
        )  # fmt: skip


class SlidingWindow(HoldsCut):
    """The system message and the most recent messages that fit."""

    name = StrategyName.SLIDING_WINDOW

    def select(self, turns: Turns, budget: int, build: Build) -> Selection:
        opening = turns.opening()
        head = opening if is_system(opening) else None
        return newest_that_fit(
            turns, budget, build.counter, marker=sliding_window_marker, head=head,
            cut=self.rule(build),
        )  # fmt: skip


class Truncate(HoldsCut):
    """The first message and the most recent that fit after the reserve, at most
    `max_history_messages`, under its own budget setting (`max_context_tokens`)."""

    name = StrategyName.TRUNCATE

    def default_budget(self, settings: Settings, model: str) -> tuple[int, int]:
        """`max_context_tokens`, with the `reserved_tokens` setting reserved."""
        return settings.max_context_tokens, settings.reserved_tokens

    def select(self, turns: Turns, budget: int, build: Build) -> Selection:
        opening = turns.opening()
        head = opening if stands_alone(opening) else None
        return newest_that_fit(
            turns, budget, build.counter, marker=truncate_marker, head=head,
            limit=build.max_messages, cut=self.rule(build),
        )  # fmt: skip


class Summarize(HoldsCut):
    """The system message, a summary of the older turns, and the last `keep_recent` verbatim.

    When everything fits it is `full`. Otherwise the verbatim tail may use the budget left after
    the trigger and head minus `summary_share` of it, reserved for the summary (capped at
    `max_summary_tokens`). A summary that does not fit is asked for again, shorter; if none
    fits, the left-out turns get the sliding-window marker instead.

    With a stable cut the verbatim tail starts at the session's cut point, the summary covers
    what lies before it (one stored checkpoint, the same text while the cut stays) and its
    room is a share of the budget less the head, not of what the turn leaves: so the window's
    prefix changes only when the cut moves.
    """

    name = StrategyName.SUMMARIZE
    uses_checkpoints = True

    def __init__(
        self,
        *,
        summary_share: float = 0.25,
        max_summary_tokens: int = 1024,
        attempts: int = 4,
        cut: CutMode | str | None = None,
    ) -> None:
        super().__init__(cut=cut)
        self.summary_share = summary_share
        self.max_summary_tokens = max_summary_tokens
        self.attempts = attempts

    def select(self, turns: Turns, budget: int, build: Build) -> Selection:
        opening = turns.opening()
        head = opening if is_system(opening) else None
        plan, rest = start(turns, budget, head)
        units = list(rest)
        whole = everything(turns, plan.trigger, units, head, build.counter)
        rule = self.rule(build)
        held = rule if rule.mode is CutMode.STABLE else None
        if whole.tokens <= budget:
            return whole.selection(turns.loaded(), cut=None if held is None else 0)
        reserve = self._reserve(budget, plan, stable=held is not None)
        limit = build.keep_recent + (1 if plan.head is not None else 0)  # K excludes the head
        if held is None:
            take_tail(plan, iter(units), budget - reserve, limit=limit)
        else:
            hold_cut(plan, iter(units), budget - reserve, limit=limit, rule=held, reserve=0)
        plan.total = whole.total
        kept = {message.seq for message in plan.messages()}
        left = [message for message in turns.loaded() if message.seq not in kept]
        room = budget - plan.tokens
        try:
            plan.note = self._summary(build, left, room if held is None else min(room, reserve))
        except SummarizerFailed:  # the sliding_window result, from the units already read
            plan = Plan(plan.trigger, whole.total, head)
            if plan.head is not None and plan.tokens > budget:
                plan.head = None
            return _without_summary(plan, turns, units, budget, build.counter, held)
        cut = None if held is None else cut_of(plan, turns.next_seq())
        if plan.note is not None:
            return plan.selection(turns.loaded(), summarized=True, cut=cut)
        fit_marker(plan, budget, sliding_window_marker, build.counter)
        return plan.selection(turns.loaded(), cut=cut)

    def _reserve(self, budget: int, plan: Plan, *, stable: bool) -> int:
        """The summary's room: `summary_share` of what the trigger and head leave, or with a
        stable cut of what the head leaves (the same every turn), capped."""
        room = budget - (plan.tokens if not stable else plan.tokens - plan.trigger.tokens)
        return min(int(room * self.summary_share), self.max_summary_tokens)

    def _summary(self, build: Build, messages: list[Message], room: int) -> ContextMessage | None:
        return summary_note(
            build.summarizer, messages, room, build.counter,
            max_summary_tokens=self.max_summary_tokens, attempts=self.attempts,
        )  # fmt: skip


def _without_summary(
    plan: Plan,
    turns: Turns,
    units: list[Unit],
    budget: int,
    counter: TokenCounter,
    held: CutRule | None,
) -> Selection:
    """What `sliding_window` selects from `plan` (trigger and head) and the units read, in
    `held`'s stable mode or sliding: `summarize`'s window when its summarizer fails."""
    if held is None:
        take_tail(plan, iter(units), budget, limit=None)
    else:
        widest = system_note(counter, sliding_window_marker(max(1, plan.total))).tokens
        hold_cut(plan, iter(units), budget, limit=None, rule=held, reserve=widest)
    fit_marker(plan, budget, sliding_window_marker, counter)
    cut = None if held is None else cut_of(plan, turns.next_seq())
    return plan.selection(turns.loaded(), cut=cut)


BUILT_INS: tuple[type[Strategy], ...] = (Full, Recent, SlidingWindow, Truncate, Summarize)
"""The built-in strategies this module defines, in the order a service lists them (the
registry, `context.registry`, adds `relevant`, which builds on them)."""
