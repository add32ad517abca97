"""The window benchmark's own parts (bench/windows): the generator keeps its promises (the same
conversation every time; every question's answer in its evidence turns and in no other turn
before it), the bills are what the providers' rules say on cases worked out by hand, and the
cut-point reference holds its cut until the window overflows."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

import turnkeeper
from turnkeeper.tokens import REPLY_PRIMING, counter_for

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from windows.billing import (  # noqa: E402
    AnthropicPromptCache,
    Bill,
    Block,
    Charge,
    OpenAIPrefixCache,
    Rendering,
    TooManyBreakpoints,
    anthropic_request,
    library_places_breakpoints,
    with_breakpoints,
)
from windows.conversations import Conversation, Turn  # noqa: E402
from windows.generator import Shape, generate  # noqa: E402
from windows.policies import BM25, HeldCut, Strategy  # noqa: E402
from windows.replay import replay  # noqa: E402

SMALL = Shape(sittings=(3, 3))
DIGEST = (
    "import hashlib, json, sys; sys.path.insert(0, sys.argv[1]);"
    "from windows.generator import generate;"
    "c = generate(5);"
    "print(hashlib.sha256(json.dumps([[t.seq, t.role, t.content, t.sitting, t.tool_calls,"
    " t.tool_call_id] for t in c.turns] + [[q.seq, q.answer, list(q.evidence)]"
    " for q in c.questions]).encode()).hexdigest())"
)


def _digest(conversation: Conversation) -> str:
    turns = [
        [t.seq, t.role, t.content, t.sitting, t.tool_calls, t.tool_call_id]
        for t in conversation.turns
    ]
    questions = [[q.seq, q.answer, list(q.evidence)] for q in conversation.questions]
    return hashlib.sha256(json.dumps(turns + questions).encode()).hexdigest()


# The generator


def test_the_same_variant_is_the_same_conversation_in_any_process() -> None:
    here = _digest(generate(5))
    assert here == _digest(generate(5))
    assert here != _digest(generate(6))
    for hashing in ("1", "2"):  # set and dict order must not leak into the draw
        env = {**os.environ, "PYTHONHASHSEED": hashing}
        out = subprocess.run(
            [sys.executable, "-c", DIGEST, str(BENCH)],
            env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
        assert out.stdout.strip() == here


@pytest.mark.parametrize("variant", [0, 1, 2])
def test_every_answer_is_in_its_evidence_and_in_no_other_turn_before_the_question(
    variant: int,
) -> None:
    conversation = generate(variant)
    turns = conversation.turns
    assert [t.seq for t in turns] == list(range(1, len(turns) + 1))
    assert len(turns) >= 400 and conversation.sittings >= 8
    assert len(conversation.questions) >= 25
    for question in conversation.questions:
        asked = turns[question.seq - 1]
        answer = question.answer.lower()
        assert asked.role == "user"
        assert answer not in asked.content.lower()
        assert all(seq < question.seq for seq in question.evidence)
        assert answer in turns[question.evidence[-1] - 1].text.lower()
        if question.previous is not None:  # an update: the first turn holds the old value
            assert len(question.evidence) == 2
            assert question.previous.lower() in turns[question.evidence[0] - 1].text.lower()
        others = [
            t.seq
            for t in turns[: question.seq - 1]
            if t.seq not in question.evidence and answer in t.text.lower()
        ]
        assert others == [], (question, others)


def test_questions_come_in_both_wordings_and_long_after_their_evidence() -> None:
    questions = [(c, q) for v in range(3) for c in [generate(v)] for q in c.questions]
    paraphrased = sum(q.paraphrased for _, q in questions)
    assert 0.3 < paraphrased / len(questions) < 0.7
    ages = sorted(q.seq - q.evidence[-1] for _, q in questions)
    assert ages[0] >= 12  # Shape.min_age
    assert ages[len(ages) // 2] > 100  # half are asked more than 100 turns later
    kinds = {q.kind for _, q in questions}
    assert kinds == {"name", "date", "number", "identifier"}
    in_tool_results = [q for c, q in questions if c.turns[q.evidence[-1] - 1].role == "tool"]
    assert in_tool_results  # some facts only a tool result holds


def test_tool_results_follow_the_assistant_turn_that_called_them() -> None:
    turns = generate(0).turns
    results = [t for t in turns if t.role == "tool"]
    assert len(results) > 20
    for result in results:
        caller = turns[result.seq - 2]
        assert caller.role == "assistant" and caller.tool_calls
        assert result.tool_call_id in {call["id"] for call in caller.tool_calls}


# The bills: OpenAI


def _request(*sizes: int, start: int = 0) -> list[tuple[int, ...]]:
    """A request of messages of `sizes` tokens, numbered from `start` (distinct tokens)."""
    messages, token = [], start
    for size in sizes:
        messages.append(tuple(range(token, token + size)))
        token += size
    return messages


def test_openai_bills_a_repeated_request_as_cached_in_whole_steps_of_128() -> None:
    cache = OpenAIPrefixCache()
    assert cache.charge(_request(1000, 1048)) == Charge(2048, read=0)  # cold
    assert cache.charge(_request(1000, 1048)) == Charge(2048, read=2048)  # 16 × 128
    cache.cold()
    cache.charge(_request(2000))
    assert cache.charge(_request(2000)) == Charge(2000, read=1920)  # 2000 // 128 × 128


def test_openai_caches_up_to_the_first_changed_token() -> None:
    cache = OpenAIPrefixCache()
    cache.charge(_request(1000, 500))
    changed = _request(1000, 500)
    changed[1] = (*changed[1][:100], -7, *changed[1][101:])  # token 1,100 differs
    assert cache.charge(changed) == Charge(1500, read=1024)
    assert cache.charge(_request(1000, 500)).read == 1024  # against the previous request only


def test_openai_caches_nothing_under_1024_shared_tokens() -> None:
    cache = OpenAIPrefixCache()
    cache.charge(_request(1023))
    assert cache.charge(_request(1023, 600)) == Charge(1623, read=0)
    bill = Bill()
    bill.add(Charge(2048, read=2048))
    bill.add(Charge(2048, read=0))
    assert bill.cached_share == 0.5
    assert bill.relative == pytest.approx((2048 * 0.1 + 2048) / 4096)


# The bills: Anthropic


def _blocks(*sizes: int, marks: tuple[int, ...] = (), prefix: str = "b") -> list[Block]:
    return [Block(f"{prefix}{i}", size, breakpoint=i in marks) for i, size in enumerate(sizes)]


def test_anthropic_writes_at_125_and_reads_at_01_the_prefix_a_breakpoint_repeats() -> None:
    cache = AnthropicPromptCache()
    first = cache.charge(_blocks(500, 1500, marks=(1,)))
    assert first == Charge(2000, read=0, written=2000)
    assert first.cost == 2000 * 1.25
    second = cache.charge(_blocks(500, 1500, 100, 200, marks=(3,)))
    assert second == Charge(2300, read=2000, written=300)
    assert second.cost == pytest.approx(2000 * 0.1 + 300 * 1.25)


def test_anthropic_caches_nothing_without_a_breakpoint_or_under_1024_tokens() -> None:
    cache = AnthropicPromptCache()
    for _ in range(2):
        assert cache.charge(_blocks(900, 900)) == Charge(1800)  # no breakpoint
    for _ in range(2):
        assert cache.charge(_blocks(600, 400, marks=(1,))) == Charge(1000)  # 1,000 < 1,024


def test_anthropic_looks_back_at_most_20_blocks_for_an_earlier_entry() -> None:
    base = [600, 600]
    cache = AnthropicPromptCache()
    cache.charge(_blocks(*base, marks=(1,)))
    near = _blocks(*base, *[10] * 20, marks=(21,))  # the entry is 20 blocks back
    assert cache.charge(near).read == 1200
    cache = AnthropicPromptCache()
    cache.charge(_blocks(*base, marks=(1,)))
    far = _blocks(*base, *[10] * 21, marks=(22,))  # 21 blocks back: not found
    assert cache.charge(far) == Charge(1410, read=0, written=1410)


def test_anthropic_refuses_more_than_four_breakpoints_and_forgets_when_cold() -> None:
    cache = AnthropicPromptCache()
    with pytest.raises(TooManyBreakpoints):
        cache.charge(_blocks(*[300] * 6, marks=(0, 1, 2, 3, 4)))
    cache.charge(_blocks(2000, marks=(0,)))
    cache.cold()
    assert cache.charge(_blocks(2000, marks=(0,))) == Charge(2000, written=2000)


# Rendering and replay through the library


def _small() -> Conversation:
    return generate(0, SMALL)


def _append(tk: turnkeeper.Turnkeeper, session: turnkeeper.Session, turns: Sequence[Turn]) -> None:
    for turn in turns:
        tk.append(session, turn.role, turn.content, tool_calls=turn.tool_calls,
                  tool_call_id=turn.tool_call_id)  # fmt: skip


def test_a_rendered_request_has_the_tokens_turnkeeper_counts_and_two_breakpoints(
    tmp_path: Path,
) -> None:
    rendering = Rendering()
    conversation = _small()
    with turnkeeper.open(f"sqlite:///{tmp_path / 'w.db'}") as tk:
        session, _ = tk.get_or_create_session("w")
        _append(tk, session, conversation.turns[:120])
        # 4,000 tokens: a held window is about half of it, over Anthropic's smallest cacheable
        # prefix (1,024 tokens), so the library places its breakpoints
        window = tk.context(session, strategy="sliding_window", budget_tokens=4000)
    request = rendering.openai(window)
    assert sum(len(message) for message in request) == window.report.tokens_used
    sent = with_breakpoints(turnkeeper.to_anthropic(window))
    blocks = rendering.anthropic(sent)
    marked = [index for index, block in enumerate(blocks) if block.breakpoint]
    assert marked == [0, len(blocks) - 1]
    assert "cache_control" not in json.dumps(turnkeeper.to_anthropic(window))  # untouched
    if library_places_breakpoints():  # the library's own marks are what the bench bills
        assert anthropic_request(window) == turnkeeper.to_anthropic(window, cache=True)
        marked = [b for b in rendering.anthropic(anthropic_request(window)) if b.breakpoint]
        assert 1 <= len(marked) <= 4


def test_a_replay_scores_within_budget_and_full_holds_every_evidence_turn(
    tmp_path: Path,
) -> None:
    conversation = _small()
    rendering = Rendering()
    with turnkeeper.open(f"sqlite:///{tmp_path / 'w.db'}") as tk:
        sliding = replay(conversation, Strategy(tk, "sliding_window"), 2000, rendering)
        full = replay(conversation, Strategy(tk, "full", budgeted=False), 2000, rendering)
    asks = sum(t.asks_the_model for t in conversation.turns)
    assert sliding.windows == full.windows == asks
    assert sliding.window_tokens <= 2000 * asks
    assert full.questions == len(conversation.questions) > 0
    assert full.recall == 1.0 and full.answered == 1.0
    assert sliding.recall < 1.0


def test_the_full_history_is_billed_as_its_previous_request_repeated(tmp_path: Path) -> None:
    """Within a sitting each `full` request starts with the previous one but for its reply
    priming, so OpenAI caches that many tokens rounded down to 128 (from 1,024 on), as counted
    by turnkeeper; the first request of a sitting is cold."""
    conversation = _small()
    expected, previous, sitting = 0, 0, None
    with turnkeeper.open(f"sqlite:///{tmp_path / 'w.db'}") as tk:
        session, _ = tk.get_or_create_session("counted")
        for turn in conversation.turns:
            _append(tk, session, [turn])
            if not turn.asks_the_model:
                continue
            used = tk.context(session, strategy="full", budget_tokens=10**7).report.tokens_used
            shared = previous - REPLY_PRIMING if turn.sitting == sitting else 0
            expected += shared // 128 * 128 if shared >= 1024 else 0
            previous, sitting = used, turn.sitting
        full = replay(conversation, Strategy(tk, "full", budgeted=False), 2000, Rendering())
    assert expected > 0
    assert full.openai.read == expected


def test_the_held_cut_stays_put_until_the_window_overflows_then_frees_half() -> None:
    conversation = _small()
    counter = counter_for("o200k_base")
    run = HeldCut(counter).start(conversation, 2000)
    notes: list[str] = []
    moved = 0
    for turn in conversation.turns:
        run.add(turn)
        if not turn.asks_the_model:
            continue
        window = run.window()
        assert window.report.tokens_used <= 2000
        note = "".join(m.content for m in window.messages if m.kind == "marker")
        if notes and note != notes[-1]:
            moved += 1
            assert window.report.tokens_used <= 1000  # half the budget free after a move
        notes.append(note)
    assert moved >= 3
    assert len(set(notes)) == moved + 1  # the note changes only when the cut moves


def test_bm25_ranks_the_document_sharing_the_rare_word_first() -> None:
    index = BM25()
    for text in ("the cat sat", "the dog sat", "a heron stood in the reeds", "the cat ran"):
        index.add(text)
    scores = index.scores("where was the heron", below=4)
    assert max(scores, key=scores.__getitem__) == 2
    assert set(index.scores("cat", below=4)) == {0, 3}
    assert set(index.scores("cat", below=3)) == {0}  # documents from `below` on are not scored
