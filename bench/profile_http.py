"""Where a request's time goes in `turnkeeper serve`: py-spy samples the server under
`bench_http.py`'s load, and the top of the profile goes to bench/results/http-profile-NAME.md.

    pip install py-spy   # into the bench's virtualenv only
    python bench/profile_http.py --name after [--seconds 20] [--backend sqlite|postgres] [--gil]
    python bench/profile_http.py --name r26 --gil --against a20e4c8   # where the extra CPU went

With `--against REV` the server as of that git revision is profiled too, in the same run, and
the report compares the two per request: CPU milliseconds per request in each layer and the
functions whose inclusive time per request grew the most.

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
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from bench_http import load, postgres_database, serving, source_at

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
    "event loop: HTTP parsing and socket I/O": (
        "h11/_",  # the h11 package itself, not uvicorn's h11_impl.py that runs every request
        "H11Protocol.",
        "selector_events",
        "EpollSelector",
    ),
    "routes and turnkeeper's server code": ("turnkeeper/server/",),
    "framework (FastAPI, Starlette, uvicorn's ASGI cycle)": ("fastapi/", "starlette/", "uvicorn/"),
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


@dataclass
class Profile:
    """One server's samples, folded by function and by layer."""

    requests: int
    total: int = 0
    inclusive: collections.Counter[str] = field(default_factory=collections.Counter)
    own: collections.Counter[str] = field(default_factory=collections.Counter)
    layers: collections.Counter[str] = field(default_factory=collections.Counter)

    def per_request_ms(self, samples: int, rate: int) -> float:
        """Samples taken at `rate` per second → milliseconds per request."""
        return samples / rate * 1000 / max(self.requests, 1)


def fold(collapsed: Path, requests: int) -> Profile:
    """A py-spy raw (collapsed) file, idle threads left out."""
    profile = Profile(requests)
    for line in collapsed.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        count = int(count_text)
        frames = stack.split(";")[1:]  # the first is the thread
        if _idle(frames):
            continue
        profile.total += count
        for frame in set(frames):
            profile.inclusive[frame] += count
        if frames:
            profile.own[frames[-1]] += count
        profile.layers[_layer(frames)] += count
    return profile


def summarize(profile: Profile, top: int) -> str:
    """The top frames (inclusive and self) and the layers of one profile."""
    total = max(profile.total, 1)
    lines = [
        f"{profile.total:,} samples of busy server threads (idle pool threads and the event loop"
        " waiting in select left out).",
        "",
        "| layer | share |",
        "|---|---|",
    ]
    lines += [f"| {name} | {n / total:.1%} |" for name, n in profile.layers.most_common()]
    lines += ["", "| inclusive | function |", "|---|---|"]
    lines += [f"| {n / total:.1%} | `{f}` |" for f, n in profile.inclusive.most_common(top)]
    lines += ["", "| self | function |", "|---|---|"]
    lines += [f"| {n / total:.1%} | `{f}` |" for f, n in profile.own.most_common(top)]
    return "\n".join(lines)


def compare(before: Profile, after: Profile, rate: int, top: int) -> str:
    """Milliseconds of sampled time per request, before and after, by layer and by function."""

    def ms(profile: Profile, samples: int) -> str:
        return f"{profile.per_request_ms(samples, rate):.3f}"

    lines = [
        f"Per request: {ms(before, before.total)} ms before, {ms(after, after.total)} ms after"
        f" ({before.requests:,} and {after.requests:,} requests sampled).",
        "",
        "| layer | before ms/req | after ms/req |",
        "|---|---|---|",
    ]
    layers = sorted(set(before.layers) | set(after.layers), key=lambda n: -after.layers[n])
    lines += [
        f"| {n} | {ms(before, before.layers[n])} | {ms(after, after.layers[n])} |" for n in layers
    ]
    growth = {
        name: after.per_request_ms(after.inclusive[name], rate)
        - before.per_request_ms(before.inclusive[name], rate)
        for name in set(before.inclusive) | set(after.inclusive)
    }
    lines += ["", "| grew by ms/req | before | after | function (inclusive) |", "|---|---|---|---|"]
    for name, delta in sorted(growth.items(), key=lambda item: -item[1])[:top]:
        lines.append(
            f"| {delta:+.3f} | {ms(before, before.inclusive[name])}"
            f" | {ms(after, after.inclusive[name])} | `{name}` |"
        )
    return "\n".join(lines)


RATE = 100
"""Samples per second per thread."""


def sample(
    spy: str, source: Path, args: argparse.Namespace, tmp: str, tag: str
) -> tuple[Profile, float]:
    """Serve turnkeeper from `source`, load it for `args.seconds` under py-spy; (profile, req/s)."""
    database = (
        nullcontext(f"sqlite:///{tmp}/profile-{tag}.db")
        if args.backend == "sqlite"
        else postgres_database()
    )
    with database as url, serving(str(url), 1, source) as (base, token, pid):
        out = Path(tmp) / f"profile-{tag}.txt"
        recorder = subprocess.Popen(
            [spy, "record", "--pid", str(pid), "--format", "raw", "--output", str(out),
             "--rate", str(RATE), *(["--gil"] if args.gil else [])],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        tally, elapsed, _ = asyncio.run(load(base, token, args.clients, args.seconds))
        recorder.send_signal(2)  # SIGINT: py-spy writes the profile and stops
        recorder.wait(timeout=60)
        requests = len(tally.append_ms) + len(tally.context_ms)
    return fold(out, requests), requests / elapsed


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
    parser.add_argument("--against", default="", help="Also profile this git revision, compare")
    args = parser.parse_args()
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    command = (
        f"`python bench/profile_http.py --name {args.name} --backend {args.backend}"
        f"{' --gil' if args.gil else ''}{f' --against {args.against}' if args.against else ''}`"
    )
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        after, rate = sample(spy, ROOT / "src", args, tmp, "after")
        header = (
            f"py-spy profile{' (GIL holder only: CPU)' if args.gil else ''} of `turnkeeper serve`"
            f" (one worker, {args.backend}) under {args.clients} clients for"
            f" {args.seconds:.0f} s: {rate:,.0f} req/s while sampled"
        )
        if args.against:
            source = stack.enter_context(source_at(args.against))
            before, before_rate = sample(spy, source, args, tmp, "before")
            header += f" ({before_rate:,.0f} req/s at {args.against})"
            body = compare(before, after, RATE, args.top) + "\n\n## This checkout\n\n"
        else:
            body = ""
        header += (
            f"; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores.\n\n{command}\n\n"
        )
        report = header + body + summarize(after, args.top) + "\n"
    target = RESULTS / f"http-profile-{args.name}.md"
    target.write_text(report, encoding="utf-8")
    print(report)


if __name__ == "__main__":
    main()
