"""Where a request's time goes in `turnkeeper serve`: py-spy samples the server under
`bench_http.py`'s load, and the top of the profile goes to bench/results/http-profile-NAME.md.

    pip install py-spy   # into the bench's virtualenv only
    python bench/profile_http.py --name after [--seconds 20] [--backend sqlite|postgres] [--gil]

Sampled with `--idle` off (only threads running Python or waiting in C are counted, not idle
ones) and `--gil` off: a thread waiting for the database counts, so a slow commit shows.
The tables give, per function, the share of samples in which it is on the stack (inclusive)
and in which it is the innermost frame (self), over every server thread.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import nullcontext
from pathlib import Path

from bench_http import load, postgres_database, serving

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"

LAYERS = {
    "store: waiting for this process's earlier writers (the write queue)": ("WriteQueue.acquire",),
    "store: waiting for SQLite's write lock (BEGIN IMMEDIATE)": ("SQLiteStore._begin",),
    "store: commit (fsync, WAL checkpoint)": ("SQLiteStore._commit",),
    "store: other SQL": ("turnkeeper/storage/",),
    "cache wrapper (encode/decode)": ("turnkeeper/cache/",),
    "token counting": ("count_message", "count_text", "encode_ordinary"),
    "context build": ("turnkeeper/context/",),
    "auth (key verification)": ("ApiKeys.verify", "authenticate (turnkeeper"),
    "request log line": ("structlog", "logging/__init__", "EventLogger"),
    "metrics": ("prometheus_client",),
    "validation (pydantic)": ("pydantic", "validate_python", "_validate_inner"),
    "response serialization": (
        "serialize_response",
        "jsonable_encoder",
        "render (",
    ),
    "thread hand-off": ("run_sync", "to_thread", "Condition.notify", "_write_to_self"),
    "event loop: HTTP parsing and socket I/O": ("h11", "selector_events", "EpollSelector"),
    "event loop: scheduling": ("asyncio/",),
}
"""Each sample is put in the layer of its innermost frame that matches a needle (the first such
layer in this order), so a middleware that wraps everything does not claim its callees' time."""


def _idle(frames: list[str]) -> bool:
    """A thread waiting for work: a pool thread on its queue, the event loop in `select`."""
    return bool(frames) and (
        "EpollSelector.select" in frames[-1]
        or any("Queue.get (queue.py" in frame for frame in frames[-3:])
    )


def _layer(frames: list[str]) -> str:
    """The layer of the innermost frame that names one (see `LAYERS`)."""
    for frame in reversed(frames):
        for layer, needles in LAYERS.items():
            if any(needle in frame for needle in needles):
                return layer
    return "everything else (framework, routing, middlewares)"


def summarize(collapsed: Path, top: int) -> str:
    """The top frames (inclusive and self) and the layers of a py-spy raw (collapsed) file."""
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    layers: collections.Counter[str] = collections.Counter()
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        count = int(count_text)
        frames = stack.split(";")[1:]  # the first is the thread
        if _idle(frames):
            continue
        total += count
        for frame in set(frames):
            inclusive[frame] += count
        if frames:
            own[frames[-1]] += count
        layers[_layer(frames)] += count
    lines = [
        f"{total:,} samples of busy server threads (idle pool threads and the event loop"
        " waiting in select left out).",
        "",
        "| layer | share |",
        "|---|---|",
    ]
    lines += [f"| {name} | {n / total:.1%} |" for name, n in layers.most_common()]
    lines += ["", "| inclusive | function |", "|---|---|"]
    lines += [f"| {n / total:.1%} | `{f}` |" for f, n in inclusive.most_common(top)]
    lines += ["", "| self | function |", "|---|---|"]
    lines += [f"| {n / total:.1%} | `{f}` |" for f, n in own.most_common(top)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", required=True)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument(
        "--gil",
        action="store_true",
        help="Sample only the thread holding the GIL: where the server's CPU goes, no waits",
    )
    args = parser.parse_args()
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    with tempfile.TemporaryDirectory() as tmp:
        database = (
            nullcontext(f"sqlite:///{tmp}/profile.db")
            if args.backend == "sqlite"
            else postgres_database()
        )
        with database as url, serving(str(url), 1) as (base, token, pid):
            out = Path(tmp) / "profile.txt"
            recorder = subprocess.Popen(
                [spy, "record", "--pid", str(pid), "--format", "raw", "--output", str(out),
                 "--rate", "100", *(["--gil"] if args.gil else [])],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            tally, elapsed, _ = asyncio.run(load(base, token, args.clients, args.seconds))
            recorder.send_signal(2)  # SIGINT: py-spy writes the profile and stops
            recorder.wait(timeout=60)
            rate = (len(tally.append_ms) + len(tally.context_ms)) / elapsed
            header = (
                f"py-spy profile{' (GIL holder only: CPU)' if args.gil else ''} of `turnkeeper serve`"
                f" (one worker, {args.backend}) under"
                f" {args.clients} clients for {args.seconds:.0f} s: {rate:,.0f} req/s while"
                f" sampled; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores.\n\n"
                f"`python bench/profile_http.py --name {args.name} --backend {args.backend}"
                f"{' --gil' if args.gil else ''}`\n\n"
            )
            report = header + summarize(out, args.top) + "\n"
    target = RESULTS / f"http-profile-{args.name}.md"
    target.write_text(report, encoding="utf-8")
    print(report)


if __name__ == "__main__":
    main()
