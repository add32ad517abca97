"""The benchmark's tables and its picture (recall against bill, per policy)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

from windows.replay import Scores

Results = dict[str, dict[int, Scores]]
"""Per policy label, per budget: the scores over a data set's conversations."""


def save(results: Results, path: Path) -> None:
    """The raw counts behind the tables, to compare a later run with (`load`)."""
    data = {label: {str(b): s.as_json() for b, s in by.items()} for label, by in results.items()}
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def load(path: Path) -> Results:
    data = json.loads(path.read_text(encoding="utf-8"))
    return {
        label: {int(b): Scores.from_json(s) for b, s in by.items()} for label, by in data.items()
    }


def _k(budget: int) -> str:
    return f"{budget // 1000}k" if budget % 1000 == 0 else str(budget)


def _cells(values: Sequence[float], form: str) -> str:
    return " / ".join("—" if math.isnan(v) else format(v, form) for v in values)


def table(results: Results, budgets: Sequence[int]) -> list[str]:
    """One row per policy: recall, answer present, cached share and bill under each rule, and
    the tokens of a request, at each budget."""
    at = " / ".join(_k(b) for b in budgets)
    lines = [
        f"| policy | evidence recall, % ({at}) | answer in window, % | OpenAI rule: cached %"
        " | OpenAI rule: bill | Anthropic rule: cached % | Anthropic rule: bill"
        " | tokens a request |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, by_budget in results.items():
        rows = [by_budget[b] for b in budgets]
        lines.append(
            f"| {label} | {_cells([100 * s.recall for s in rows], '.1f')}"
            f" | {_cells([100 * s.answered for s in rows], '.1f')}"
            f" | {_cells([100 * s.openai.cached_share for s in rows], '.1f')}"
            f" | {_cells([s.openai.relative for s in rows], '.2f')}"
            f" | {_cells([100 * s.anthropic.cached_share for s in rows], '.1f')}"
            f" | {_cells([s.anthropic.relative for s in rows], '.2f')}"
            f" | {' / '.join(f'{s.window_tokens / max(s.windows, 1):,.0f}' for s in rows)} |"
        )
    return lines


CATEGORIES = ("same words", "other words", "updated fact")


def by_category(results: Results, budgets: Sequence[int]) -> list[str]:
    """Evidence recall per kind of question: asked in the evidence's words, in other words,
    or about a fact that was later changed (two evidence turns)."""
    at = " / ".join(_k(b) for b in budgets)
    lines = [
        "| policy | " + " | ".join(f"{c}: recall % ({at})" for c in CATEGORIES) + " |",
        "|---|" + "---:|" * len(CATEGORIES),
    ]
    for label, by_budget in results.items():
        cells = [
            _cells([100 * by_budget[b].recall_of(category) for b in budgets], ".1f")
            for category in CATEGORIES
        ]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def broken_pairs(results: Results, budgets: Sequence[int]) -> str | None:
    """A sentence naming the policies whose windows held a tool result without its call."""
    found = [
        f"{label} {_cells([100 * s.broken_pairs / max(s.windows, 1) for s in (by[b] for b in budgets)], '.1f')} %"
        for label, by in results.items()
        if any(by[b].broken_pairs for b in budgets)
    ]
    if not found:
        return None
    return (
        "Windows holding a tool result whose call was left out (a provider refuses such a "
        f"request), at {' / '.join(_k(b) for b in budgets)}: " + "; ".join(found) + "."
    )


def picture(results: Results, budget: int, path: Path, *, title: str) -> None:
    """Evidence recall against the bill at `budget`, one colour per policy (circles: the
    library's strategies, diamonds: the references, squares: the anchors), filled under the
    OpenAI rule and hollow under the Anthropic rule, joined by a line; written as an SVG that
    is the same bytes for the same results."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "turnkeeper-windows"
    figure, axes = plt.subplots(figsize=(9.6, 5.4))
    colours = plt.get_cmap("tab10").colors
    for index, (label, by_budget) in enumerate(results.items()):
        scores = by_budget[budget]
        colour = colours[index % len(colours)]
        shape = "D" if label.startswith("reference") else "o" if label.startswith("`") else "s"
        recall = 100 * scores.recall
        openai, anthropic = scores.openai.relative, scores.anthropic.relative
        tokens = scores.window_tokens / max(scores.windows, 1)
        name = f"{label.replace('`', '')}: {tokens:,.0f} tokens a request"
        axes.plot([openai, anthropic], [recall, recall], color=colour, linewidth=0.8, alpha=0.5)
        axes.scatter([openai], [recall], color=colour, marker=shape, s=48, zorder=3, label=name)
        axes.scatter(
            [anthropic], [recall], facecolors="none", edgecolors=[colour], marker=shape, s=48,
            zorder=3,
        )  # fmt: skip
    axes.set_xlabel(
        f"input bill at {budget:,} tokens, relative to uncached: filled, OpenAI rule; "
        "hollow, Anthropic rule"
    )
    axes.set_ylabel(f"evidence turns in the window at {budget:,} tokens, %")
    axes.set_title(title, fontsize=11)
    axes.set_xlim(0, 1.35)
    axes.set_ylim(-3, 103)
    axes.axvline(1.0, color="grey", linewidth=0.6, linestyle=":")
    axes.grid(True, linewidth=0.3, alpha=0.5)
    axes.legend(fontsize=7.5, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="svg", metadata={"Date": None})
    plt.close(figure)
