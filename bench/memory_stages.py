"""Where a server process's memory goes: its resident set (RSS) after each stage of start-up and
of its first requests, each measured in a fresh interpreter.

    python bench/memory_stages.py [--against REV] [--encoding o200k_base]

Stages, in order: the interpreter alone; `import turnkeeper`; the tokenizer loaded (the first
exact count); the server's modules imported; the app built (`create_app`); the app started on a
SQLite file (its lifespan: the store open) and one append and one context request answered;
the first `/mcp` request answered. With `--against REV` (e.g. `main`) the same stages of the
package as of that git revision run first, and the table shows both side by side.

Results are printed as a Markdown table and written to bench/results/memory-stages.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from contextlib import nullcontext
from datetime import UTC, datetime
from pathlib import Path

from bench_http import source_at

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "memory-stages.md"

STAGES = """
import json, sys

def rss_mib():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")

def stage(name):
    print(json.dumps([name, rss_mib()]), flush=True)

database, encoding = sys.argv[1], sys.argv[2]
stage("interpreter")
import turnkeeper
stage("import turnkeeper")
from turnkeeper.tokens import counter_for
counter_for(encoding).count_text("the first exact count loads the tokenizer")
stage(f"tokenizer loaded ({encoding})")
from fastapi.testclient import TestClient
import turnkeeper.server.app
stage("server modules imported")
from turnkeeper.config import load_settings
app = turnkeeper.server.app.create_app(
    load_settings(database_url=database, auth=False, token_encoding=encoding)
)
stage("app built")
with TestClient(app, base_url="http://127.0.0.1:8000") as client:
    client.post("/v1/sessions", json={"key": "k"}).raise_for_status()
    client.post("/v1/sessions/k/messages", json={"role": "user", "content": "hi"})
    client.get("/v1/sessions/k/context").raise_for_status()
    stage("app started, one append and one context answered")
    client.post(
        "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Accept": "application/json, text/event-stream"},
    ).raise_for_status()
    stage("first /mcp request answered")
"""


def stages(source: Path, encoding: str) -> list[tuple[str, float]]:
    """The RSS (MiB) after each stage, in a fresh interpreter importing the package at `source`."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PYTHONPATH": str(source), "TURNKEEPER_CONFIG": os.devnull}
        database = f"sqlite:///{Path(tmp) / 'stages.db'}"
        run = subprocess.run(
            [sys.executable, "-c", STAGES, database, encoding],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
    return [tuple(json.loads(line)) for line in run.stdout.splitlines()]  # type: ignore[misc]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", default="", help="Also the package as of this git revision.")
    parser.add_argument("--encoding", default="o200k_base")
    args = parser.parse_args()
    columns: list[tuple[str, list[tuple[str, float]]]] = []
    with source_at(args.against) if args.against else nullcontext(ROOT / "src") as before:
        if args.against:
            columns.append((f"@{args.against}", stages(before, args.encoding)))
    columns.append(("this checkout", stages(ROOT / "src", args.encoding)))
    header = " | ".join(f"{name} MiB | {name} +MiB" for name, _ in columns)
    lines = [
        f"RSS by stage, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC (`python bench/memory_stages.py"
        f"{f' --against {args.against}' if args.against else ''}`), Python"
        f" {sys.version.split()[0]}: resident MiB after each stage, and what the stage added.",
        "",
        f"| stage | {header} |",
        "|---|" + "---:|" * (2 * len(columns)),
    ]
    for index, (name, _) in enumerate(columns[-1][1]):
        cells = []
        for _, measured in columns:
            rss = measured[index][1]
            added = rss - measured[index - 1][1] if index else rss
            cells.append(f"{rss:.1f} | {'+' if index else ''}{added:.1f}")
        lines.append(f"| {name} | {' | '.join(cells)} |")
    report = "\n".join(lines) + "\n"
    print(report)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(report, encoding="utf-8")


if __name__ == "__main__":
    main()
