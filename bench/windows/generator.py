"""A deterministic generator of long conversations with planted facts and known evidence.

`generate(variant)` writes one conversation between a user and their assistant: a system
message, then 9–11 *sittings* (a cold prompt cache at each start) of about 55 turns, each a
greeting, two or three *threads* of the user's life (`vocabulary.THREADS`: a remodel, a trip, a
job search…) and a goodbye. Within a thread the user chats (filler that uses the thread's words),
states a fact once (a name, a date, a number, an identifier), now and then changes one (an
update), and asks the assistant to call a tool (an assistant turn with a tool call, the tool's
JSON result, the assistant's reply; an order's tracking number or a booking code is a fact that
only the tool result holds). Questions come later, often sittings later, in the flow of the
chat: a user turn asking about a fact stated at least `Shape.min_age` turns before, half of them
in words that avoid the statement's (`Fact.rephrased`), answered by the assistant's next turn.

Every question knows its evidence: the seq of the turn that stated the fact (and of the update
that replaced it) — and the generator checks what it promises: the answer is in the evidence
turns and in no other turn before the question. The same `variant` gives the same conversation
on every machine (`random.Random` of a string is stable across runs and platforms).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from random import Random

from windows.conversations import Conversation, Question, Turn
from windows.vocabulary import (
    ACKS,
    ANSWERS,
    ASIDES,
    CITIES,
    CLOSING_REPLIES,
    CLOSINGS,
    FIRST,
    FOLLOW_UPS,
    GREETING_REPLIES,
    GREETINGS,
    ITEMS,
    MENTIONS,
    PETS,
    QUESTION_LEADS,
    SMALL_TALK,
    SMALL_TALK_REPLIES,
    THREADS,
    TOOLS,
    TOPICS,
    Fact,
    Thread,
    Tool,
)

_SLOT = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Shape:
    """How big a generated conversation is."""

    sittings: tuple[int, int] = (9, 11)
    """How many sittings (inclusive range)."""
    threads: int = 8
    """How many of the vocabulary's threads one conversation follows."""
    segments: tuple[int, int] = (2, 3)
    """Threads visited in one sitting."""
    exchanges: tuple[int, int] = (7, 11)
    """User–assistant exchanges in one visit to a thread."""
    questions: tuple[int, int] = (2, 4)
    """Questions asked along the way in one sitting (fewer in the first)."""
    catch_up: float = 0.8
    """The share of the facts never asked about that the last sitting asks about, one after
    the other (the user checking that everything is straight before a busy week)."""
    min_age: int = 12
    """The fewest turns between a fact's last mention and a question about it."""
    earlier_sittings: float = 0.8
    """The share of questions about a fact last mentioned in an earlier sitting (the others may
    ask about one from earlier in the same sitting)."""


@dataclass
class _Planted:
    """A fact stated in the conversation, and what became of it."""

    fact: Fact
    value: str
    slots: dict[str, str]
    seqs: list[int]
    old: str | None = None
    asked: bool = False


@dataclass
class _Writer:
    """Appends turns and keeps the facts, the questions and the draw."""

    rng: Random
    persona: dict[str, str]
    turns: list[Turn] = field(default_factory=list)
    planted: list[_Planted] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    used_values: list[str] = field(default_factory=list)
    sitting: int = 0
    calls: int = 0

    def fill(self, text: str, slots: dict[str, str] | None = None) -> str:
        known = {**self.persona, **(slots or {})}
        return _SLOT.sub(lambda match: known.get(match.group(1), match.group(0)), text)

    def add(self, role: str, content: str, **extra: object) -> int:
        seq = len(self.turns) + 1
        self.turns.append(Turn(seq, role, content, self.sitting, **extra))  # type: ignore[arg-type]
        return seq

    def user(self, text: str, slots: dict[str, str] | None = None) -> int:
        return self.add("user", self.fill(text, slots))

    def assistant(self, text: str, slots: dict[str, str] | None = None) -> int:
        return self.add("assistant", self.fill(text, slots))

    def reply(self, thread: Thread | None, *, lead: str = "", sentences: int = 2) -> int:
        """An assistant turn of `sentences` sentences from the thread's pool (or small talk's)."""
        pool = list(thread.replies if thread else SMALL_TALK_REPLIES)
        chosen = self.rng.sample(pool, min(sentences, len(pool)))
        if self.rng.random() < 0.5:
            chosen.insert(self.rng.randint(0, len(chosen)), self.rng.choice(ASIDES))
        return self.assistant(" ".join([lead, *chosen]).strip())

    def fresh_value(self, fact: Fact) -> str:
        """A value no other fact of this conversation has, nor contains, nor is part of."""
        for _ in range(200):
            value = fact.value(self.rng)
            low = value.lower()
            if all(low not in used and used not in low for used in self.used_values):
                self.used_values.append(low)
                return value
        raise RuntimeError(f"no fresh value for {fact.key}")

    def call_id(self) -> str:
        self.calls += 1
        letters = "".join(self.rng.choice("abcdefghijkmnpqrstuvwxyz0123456789") for _ in range(8))
        return f"call_{letters}{self.calls}"


def generate(variant: int, shape: Shape = Shape()) -> Conversation:
    """Conversation number `variant` (the same one every time)."""
    rng = Random(f"turnkeeper-windows-{variant}")
    names = rng.sample(FIRST, 5)
    persona = {
        "user": names[0],
        "partner": names[1],
        "kid": names[2],
        "sister": names[3],
        "pet": names[4],
        "species": rng.choice(PETS),
        "city": rng.choice(CITIES),
        "item": rng.choice(ITEMS),
        "topic": rng.choice(TOPICS),
        "n": str(rng.randint(2, 8)),
    }
    writer = _Writer(rng, persona)
    writer.add("system", writer.fill(_SYSTEM))
    threads = rng.sample(list(THREADS), shape.threads)
    sittings = rng.randint(*shape.sittings)
    for sitting in range(sittings):
        writer.sitting = sitting
        _sitting(writer, threads, shape, first=sitting == 0, last=sitting == sittings - 1)
    questions = tuple(q for q in writer.questions if _holds(writer.turns, q))
    return Conversation(
        key=f"generated-{variant}",
        turns=tuple(writer.turns),
        questions=questions,
        notes={"persona": persona, "threads": [thread.name for thread in threads]},
    )


_SYSTEM = (
    "You are Juniper, the personal assistant of {user}. {user} lives with {partner}, their "
    "child {kid} and a {species} called {pet}; {user}'s sister is {sister}. Be warm, brief and "
    "practical. Remember what {user} tells you across conversations and answer questions about "
    "it exactly, with names, dates, numbers and codes as {user} gave them. When you need live "
    "information, call a tool: lookup_order (an order's status), book_restaurant (a table), "
    "get_weather (a forecast), calendar_events ({user}'s calendar) or web_search. Never invent "
    "a booking, a price or a tracking number; if you do not know, say so and offer to check."
)


def _sitting(
    writer: _Writer, threads: list[Thread], shape: Shape, *, first: bool, last: bool
) -> None:
    rng = writer.rng
    writer.user(rng.choice(GREETINGS))
    writer.assistant(rng.choice(GREETING_REPLIES))
    if rng.random() < 0.5:
        writer.user(rng.choice(SMALL_TALK))
        writer.reply(None, sentences=1)
    visits = rng.sample(threads, rng.randint(*shape.segments))
    slots = [rng.randint(*shape.exchanges) for _ in visits]
    wanted = rng.randint(*shape.questions) // (3 if first else 1)
    ask_at = set(rng.sample(range(sum(slots)), min(wanted, sum(slots))))
    step = 0
    for thread, exchanges in zip(visits, slots, strict=True):
        writer.user(rng.choice(thread.opener))
        writer.reply(thread)
        for _ in range(exchanges):
            if step in ask_at and _question(writer, shape):
                pass
            else:
                _exchange(writer, thread)
            step += 1
    if last:
        _catch_up(writer, shape)
    writer.user(rng.choice(CLOSINGS))
    writer.assistant(rng.choice(CLOSING_REPLIES))


def _exchange(writer: _Writer, thread: Thread) -> None:
    """One exchange on `thread`: a fact stated or updated, a tool call, or chat."""
    rng = writer.rng
    unsaid = [fact for fact in thread.facts if not any(p.fact is fact for p in writer.planted)]
    roll = rng.random()
    if unsaid and roll < 0.3:
        _state(writer, thread, rng.choice(unsaid))
    elif roll < 0.4 and _update(writer, thread):
        pass
    elif roll < 0.55:
        _tool(writer, _a_tool(writer))
    else:
        said = [line for fact in thread.facts for line in MENTIONS.get(fact.key, ())]
        lines = said if said and rng.random() < 0.5 else thread.chat
        follow = f" {rng.choice(FOLLOW_UPS)}" if rng.random() < 0.4 else ""
        writer.user(rng.choice(lines) + follow)
        writer.reply(thread, sentences=rng.randint(2, 3))


def _state(writer: _Writer, thread: Thread, fact: Fact) -> None:
    rng = writer.rng
    value = writer.fresh_value(fact)
    follow = f" {rng.choice(thread.chat)}" if rng.random() < 0.35 else ""
    seq = writer.user(rng.choice(fact.says) + follow, {"v": value})
    writer.planted.append(_Planted(fact, value, {}, [seq]))
    writer.reply(thread, lead=rng.choice(ACKS[:2]) if rng.random() < 0.5 else "")


def _update(writer: _Writer, thread: Thread) -> bool:
    """Change a fact of `thread` stated long enough ago and not yet asked about or changed."""
    here = len(writer.turns)
    candidates = [
        planted
        for planted in writer.planted
        if planted.fact in thread.facts
        and planted.fact.update
        and planted.old is None
        and not planted.asked
        and here - planted.seqs[-1] >= 30
    ]
    if not candidates:
        return False
    rng = writer.rng
    planted = rng.choice(candidates)
    new = writer.fresh_value(planted.fact)
    seq = writer.user(rng.choice(planted.fact.update), {"v": new, "old": planted.value})
    planted.old, planted.value = planted.value, new
    planted.seqs.append(seq)
    writer.reply(thread, lead="That's annoying, but manageable.")
    return True


def _a_tool(writer: _Writer) -> tuple[Tool, dict[str, str]]:
    """A tool to call and its slots: an order is looked up for an item not looked up before,
    and a table booked once, so a question about either names one call."""
    tool = writer.rng.choice(TOOLS)
    if tool.fact is None:
        return tool, {}
    used = [p.slots.get("item") for p in writer.planted if p.fact is tool.fact]
    if tool.name == "lookup_order":
        left = [item for item in ITEMS if item not in used]
        if left:
            return tool, {"item": writer.rng.choice(left)}
    elif not used:
        return tool, {}
    return writer.rng.choice([t for t in TOOLS if t.fact is None]), {}


def _tool(writer: _Writer, chosen: tuple[Tool, dict[str, str]]) -> None:
    """The user asks, the assistant calls the tool, the result comes back, the assistant
    replies; a tool with a fact plants it in the result."""
    rng = writer.rng
    tool, slots = chosen
    writer.user(rng.choice(tool.request), slots)
    arguments = tool.arguments(rng, {**writer.persona, **slots})
    call_id = writer.call_id()
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": tool.name, "arguments": json.dumps(arguments)},
    }
    writer.add("assistant", "" if rng.random() < 0.5 else "Let me check.", tool_calls=(call,))
    value = writer.fresh_value(tool.fact) if tool.fact is not None else ""
    result = tool.result(rng, arguments, value)
    seq = writer.add("tool", writer.fill(json.dumps(result, indent=1)), tool_call_id=call_id)
    if tool.fact is not None:
        writer.planted.append(_Planted(tool.fact, value, slots, [seq]))
    writer.assistant(rng.choice(tool.reply), slots)


def _catch_up(writer: _Writer, shape: Shape) -> None:
    """Questions about most of what was never asked, one after the other."""
    rng = writer.rng
    writer.user("Can you help me check I have everything straight? A few quick questions.")
    writer.assistant("Of course, go ahead.")
    here = len(writer.turns) + 1
    left = [p for p in writer.planted if not p.asked and here - p.seqs[-1] >= shape.min_age]
    for planted in rng.sample(left, round(len(left) * shape.catch_up)):
        _question(writer, shape, planted)


def _question(writer: _Writer, shape: Shape, planted: _Planted | None = None) -> bool:
    """Ask about a fact last mentioned at least `min_age` turns ago, if there is one."""
    here = len(writer.turns) + 1
    eligible = [p for p in writer.planted if not p.asked and here - p.seqs[-1] >= shape.min_age]
    rng = writer.rng
    if rng.random() < shape.earlier_sittings:
        sitting_start = min(t.seq for t in writer.turns if t.sitting == writer.sitting)
        eligible = [p for p in eligible if p.seqs[-1] < sitting_start] or eligible
    if planted is None:
        if not eligible:
            return False
        planted = rng.choice(eligible)
    planted.asked = True
    rephrased = rng.random() < 0.5
    wording = rng.choice(planted.fact.rephrased if rephrased else planted.fact.asks)
    lead = rng.choice(QUESTION_LEADS)
    text = lead + (wording[0].lower() + wording[1:] if lead else wording)
    seq = writer.user(text, planted.slots)
    writer.questions.append(
        Question(
            seq=seq,
            answer=planted.value,
            evidence=tuple(planted.seqs),
            kind=planted.fact.kind,
            paraphrased=rephrased,
            previous=planted.old,
        )
    )
    writer.assistant(rng.choice(ANSWERS), {"v": planted.value})
    return True


def _holds(turns: list[Turn], question: Question) -> bool:
    """Whether the answer is in every evidence turn that states it and in no other turn before
    the question (an update's first turn holds the old value, its last the answer)."""
    answer = question.answer.lower()
    before = turns[: question.seq - 1]
    elsewhere = [t for t in before if t.seq not in question.evidence and answer in t.text.lower()]
    return not elsewhere and answer in turns[question.evidence[-1] - 1].text.lower()
