"""Where encryption's append cost goes on SQLite: the append of `bench_encryption.py`'s turns
with encryption off, on, and on with one part taken away at a time, interleaved turn by turn
in one process so the shared machine's noise falls on every variant alike.

    .venv/bin/python bench/profile_encryption.py [--sessions N]

- **off**: no `encryption_key`.
- **on**: as deployed.
- **on, sealing skipped**: the encrypting store with `seal_draft` handing the draft back as
  it is: the wrapper alone (its key lookup, the message handed back built from the draft).
- **on, sealed and thrown away**: sealing done, its output not stored (plaintext rows): on
  minus this is what the larger rows cost the database.

Also: the first append of each session (its data key made, wrapped and written to the key
store, which syncs to disk: `synchronous = FULL`), apart from the others. Writes
bench/results/profile-encryption.md.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import turnkeeper
from bench_encryption import KEY, _turn
from turnkeeper.encryption import store as encrypting
from turnkeeper.types import MessageDraft

RESULTS = Path(__file__).parent / "results" / "profile-encryption.md"
SEAL = encrypting.seal_draft


def _skipped(key: object, draft: MessageDraft) -> MessageDraft:
    return draft


def _thrown_away(key: encrypting.DataKey, draft: MessageDraft) -> MessageDraft:
    SEAL(key, draft)
    return draft


VARIANTS: dict[str, Callable[..., MessageDraft] | None] = {
    "off": None,
    "on": SEAL,
    "on, sealing skipped": _skipped,
    "on, sealed and thrown away": _thrown_away,
}


@contextmanager
def _sealing(seal: Callable[..., MessageDraft] | None) -> Iterator[None]:
    encrypting.seal_draft = seal or SEAL  # type: ignore[assignment]
    try:
        yield
    finally:
        encrypting.seal_draft = SEAL


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--turns", type=int, default=25)
    args = parser.parse_args()
    later: dict[str, list[float]] = {name: [] for name in VARIANTS}
    first: dict[str, list[float]] = {name: [] for name in VARIANTS}
    with tempfile.TemporaryDirectory() as tmp:
        services = {
            name: turnkeeper.open(
                f"sqlite:///{Path(tmp) / f'{index}.db'}",
                **({} if seal is None else {"encryption_key": KEY}),
            )
            for index, (name, seal) in enumerate(VARIANTS.items())
        }
        order = list(VARIANTS)
        for session in range(args.sessions):
            for service in services.values():
                service.get_or_create_session(f"trip-{session}")
            for turn in range(args.turns):
                order = order[1:] + order[:1]
                for name in order:
                    with _sealing(VARIANTS[name]):
                        for index, (role, text, fields) in enumerate(_turn(turn)):
                            start = time.perf_counter()
                            services[name].append(f"trip-{session}", role, text, **fields)
                            took = time.perf_counter() - start
                            (first if turn == 0 and index == 0 else later)[name].append(took)
        for service in services.values():
            service.close()
    off = statistics.median(later["off"])
    lines = [
        "# Where encryption's append cost goes (SQLite)",
        "",
        f"`.venv/bin/python bench/profile_encryption.py --sessions {args.sessions}`: "
        f"{args.sessions} sessions × {args.turns} turns × 4 appends per variant, interleaved"
        " turn by turn in one process on a shared 2-core machine (expect ±3% of noise).",
        "",
        "| variant | append: median | / off | first append of a session: median |",
        "|---|---|---|---|",
    ]
    for name in VARIANTS:
        median = statistics.median(later[name])
        lines.append(
            f"| {name} | {median * 1e3:.3f} ms | {median / off:.3f}× |"
            f" {statistics.median(first[name]) * 1e3:.2f} ms |"
        )
    print("\n".join(lines))
    RESULTS.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
