"""Windows: what they hold and what they cost, per policy, on long conversations.

    .venv/bin/python bench/bench_windows.py [--quick] [--conversations N] [--jobs N]
        [--strategy NAME | --strategy package.module:attribute] [--only TEXT]

Generates long multi-sitting conversations with planted facts and questions whose evidence turns
are known (`windows.generator`), replays each through every policy at 2,000, 4,000 and 8,000
tokens, and reports per policy: evidence recall, whether the answer is in the window, and the
share of input a provider bills as cached and the bill relative to uncached, under the OpenAI
and the Anthropic rule, chatting turn by turn (`windows.replay`, `windows.billing`).

The policies (rows): every strategy the library registers (today `full` — with no budget, the
ceiling —, `recent`, `sliding_window`, `truncate`, `summarize`; a strategy added to the library
later appears by itself), each `--strategy` given (a registered name, or a `turnkeeper.Strategy`
object or class as `module:attribute`, importable from the working directory or bench/), the
two references of issue 27 (`windows.policies`), and the anchors' own policies with their real
packages (`windows.anchors`; the `bench` extra installs them). `--only TEXT` keeps the rows whose
label contains TEXT.

Results go to bench/results/windows.md, docs/benchmarks.md between the `bench:windows` markers
and docs/images/windows-recall-bill.svg (`--quick`: two conversations, to
bench/results/windows-quick.md only; `--only`/`--strategy`: to bench/results/windows-custom.md
unless `--name` says otherwise). Conversations run in `--jobs` processes (default 2), each on a
SQLite file of its own in a temporary directory.
"""

from __future__ import annotations

import argparse
import importlib
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import turnkeeper  # noqa: E402
from bench_http import publish  # noqa: E402
from turnkeeper.tokens import counter_for  # noqa: E402
from windows import report  # noqa: E402
from windows.billing import Rendering, library_places_breakpoints, o200k  # noqa: E402
from windows.conversations import Conversation  # noqa: E402
from windows.generator import generate  # noqa: E402
from windows.policies import HeldCut, Policy, Relevance, Strategy  # noqa: E402
from windows.replay import Scores, replay  # noqa: E402

BUDGETS = (2000, 4000, 8000)
PICTURE = ROOT / "docs" / "images" / "windows-recall-bill.svg"
RESULTS = HERE / "results"
ENCODING = "o200k_base"
UNBUDGETED = ("full",)
"""Strategies that never leave a turn out: replayed once with no budget, the recall ceiling."""


@dataclass(frozen=True)
class Plan:
    """What every worker replays (picklable: workers build their policies from it)."""

    budgets: tuple[int, ...]
    strategies: tuple[str, ...]
    limits: dict[int, int]
    only: tuple[str, ...] = ()
    anchors: bool = True
    directory: str = ""
    extra: tuple[str, ...] = ()


def strategy_of(spec: str) -> str | turnkeeper.Strategy:
    """A strategy name, or the `turnkeeper.Strategy` a `module:attribute` names (a class is
    instantiated with no arguments), importable from the working directory or bench/."""
    if ":" not in spec:
        return spec
    module, _, attribute = spec.partition(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    found = getattr(importlib.import_module(module), attribute)
    strategy = found() if isinstance(found, type) else found
    if not isinstance(strategy, turnkeeper.Strategy):
        raise SystemExit(f"--strategy {spec}: not a turnkeeper.Strategy ({strategy!r})")
    return strategy


def policies(plan: Plan, tk: turnkeeper.Turnkeeper) -> list[Policy]:
    counter = counter_for(ENCODING)
    chosen: list[Policy] = []
    for spec in (*plan.strategies, *plan.extra):
        strategy = strategy_of(spec)
        name = strategy if isinstance(strategy, str) else strategy.name
        chosen.append(Strategy(tk, strategy, budgeted=str(name) not in UNBUDGETED))
    chosen += [Relevance(counter), HeldCut(counter)]
    if plan.anchors:
        from windows.anchors import AgentsSessionLimit, LangChainTrim, LlamaIndexMemory

        chosen += [
            LangChainTrim(counter),
            AgentsSessionLimit(counter, plan.limits),
            LlamaIndexMemory(counter, o200k()),
        ]
    return [p for p in chosen if not plan.only or any(text in p.label for text in plan.only)]


def run_conversation(plan: Plan, conversation: Conversation) -> dict[str, dict[int, Scores]]:
    """Every policy at every budget on one conversation (in a worker process)."""
    started = time.perf_counter()
    rendering = Rendering()
    results: dict[str, dict[int, Scores]] = {}
    path = Path(plan.directory) / f"{conversation.key}.db"
    with turnkeeper.open(f"sqlite:///{path}") as tk:
        for policy in policies(plan, tk):
            if policy.budgeted:
                results[policy.label] = {
                    budget: replay(conversation, policy, budget, rendering)
                    for budget in plan.budgets
                }
            else:
                once = replay(conversation, policy, max(plan.budgets), rendering)
                results[policy.label] = dict.fromkeys(plan.budgets, once)
    print(f"  {conversation.key}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return results


def run(plan: Plan, conversations: Sequence[Conversation], jobs: int) -> report.Results:
    totals: report.Results = {}
    with ProcessPoolExecutor(jobs) as pool:
        done = pool.map(run_conversation, [plan] * len(conversations), conversations)
        for results in done:
            for label, by_budget in results.items():
                mine = totals.setdefault(label, {b: Scores() for b in plan.budgets})
                for budget, scores in by_budget.items():
                    mine[budget].merge(scores)
    return totals


def describe(conversations: Sequence[Conversation]) -> str:
    counter = counter_for(ENCODING)
    tokens = [
        sum(
            counter.count_message(
                t.role, t.content, tool_calls=t.tool_calls, tool_call_id=t.tool_call_id
            )
            for t in c.turns
        )
        for c in conversations
    ]
    turns = sum(len(c.turns) for c in conversations)
    questions = [q for c in conversations for q in c.questions]
    evidence = [q.seq - q.evidence[-1] for q in questions]
    tools = sum(t.role == "tool" for c in conversations for t in c.turns)
    return (
        f"{len(conversations)} generated conversations ({turns:,} turns, {tools:,} of them "
        f"tool results; {statistics.mean(c.sittings for c in conversations):.1f} sittings and "
        f"{statistics.mean(tokens):,.0f} tokens each on average), {len(questions)} questions "
        f"({100 * sum(q.paraphrased for q in questions) / len(questions):.0f}% worded apart "
        f"from their evidence; {sum(len(q.evidence) > 1 for q in questions)} about an updated "
        f"fact), asked a median of {statistics.median(evidence):.0f} turns after their evidence"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="two conversations, not published")
    parser.add_argument("--conversations", type=int, help="how many (default 6; --quick 2)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument(
        "--strategy", action="append", default=[], help="add a strategy: NAME or module:attr"
    )
    parser.add_argument("--only", action="append", default=[], help="rows whose label has TEXT")
    parser.add_argument("--no-anchors", action="store_true", help="skip the anchors' packages")
    parser.add_argument("--name", help="results name (bench/results/NAME.md)")
    args = parser.parse_args()
    custom = bool(args.only or args.strategy)
    name = args.name or (
        "windows-quick" if args.quick else "windows-custom" if custom else "windows"
    )
    count = args.conversations or (2 if args.quick else 6)
    started = time.perf_counter()
    conversations = [generate(variant) for variant in range(count)]
    counter = counter_for(ENCODING)
    with turnkeeper.open("memory://") as tk:
        registered = tuple(str(strategy.name) for strategy in tk.strategies)
        for spec in args.strategy:  # a bad one fails here, not in a worker
            try:
                tk.strategies.resolve(strategy_of(spec))
            except turnkeeper.InvalidInput as error:
                raise SystemExit(f"--strategy {spec}: {error}") from None
    limits = {}
    if not args.no_anchors:
        from windows.anchors import items_limit

        limits = {budget: items_limit(conversations, budget, counter) for budget in BUDGETS}
    with tempfile.TemporaryDirectory(prefix="bench-windows-") as directory:
        plan = Plan(
            budgets=BUDGETS,
            strategies=registered,
            limits=limits,
            only=tuple(args.only),
            anchors=not args.no_anchors,
            directory=directory,
            extra=tuple(args.strategy),
        )
        results = run(plan, conversations, args.jobs)
    elapsed = time.perf_counter() - started
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = children.ru_utime + children.ru_stime + time.process_time()
    command = "python bench/bench_windows.py" + "".join(f" {a}" for a in sys.argv[1:])
    lines = [
        f"Windows on {describe(conversations)}; replayed through the public API on a SQLite "
        f"file, a request at every user turn and tool result "
        f"({next(iter(next(iter(results.values())).values())).windows:,} a policy and budget). "
        f"{datetime.now(UTC):%Y-%m-%d}: {elapsed / 60:.1f} min ({cpu / 60:.1f} min of CPU) on "
        f"a shared 2-core machine, load average {os.getloadavg()[0]:.1f} at the end "
        f"(`{command}`).",
        "",
        *report.table(results, BUDGETS),
        "",
        _notes(limits, results),
        "",
        "Evidence recall by how the question is asked:",
        "",
        *report.by_category(results, BUDGETS),
        "",
    ]
    publish(name, "\n".join(line for line in lines if line is not None))
    report.save(results, RESULTS / f"{name}.json")
    if name == "windows":
        report.picture(
            results,
            4000,
            PICTURE,
            title=f"Evidence recall against the input bill at 4,000 tokens ({count} conversations)",
        )
        print(f"picture: {PICTURE.relative_to(ROOT)}")


def _notes(limits: dict[int, int], results: report.Results) -> str:
    notes = [
        "Recall: the share of all questions' evidence turns whose message is in the window; "
        "answer in window: the answer string anywhere in the window's text (notes and "
        "summaries count). Bill: the input billed, cached tokens at 0.1× (Anthropic: written at "
        "1.25×), over the same tokens uncached (1.00: caching saved nothing); a cold cache at "
        "the first request of every sitting.",
        "Anthropic rule: "
        + (
            "every window is sent with the breakpoints `to_anthropic(window, cache=True)` "
            "places (as sent without `cache=True`, nothing is cached: a bill of 1.00)."
            if library_places_breakpoints()
            else "today's `to_anthropic` places no `cache_control`, so as sent every row's "
            "Anthropic bill is 1.00; the column places the two usual breakpoints (the system "
            "prompt and the last block) on each window, to show what its stability allows."
        ),
    ]
    if limits:
        notes.append(
            "openai-agents: N = "
            + " / ".join(f"{limits[b]}" for b in BUDGETS)
            + " items, the largest under which no window of these conversations exceeds the "
            "budget. LlamaIndex: `Memory.from_defaults(token_limit=budget)`, its defaults otherwise."
        )
    broken = report.broken_pairs(results, BUDGETS)
    if broken:
        notes.append(broken)
    return "\n".join(f"- {note}" for note in notes)


if __name__ == "__main__":
    main()
