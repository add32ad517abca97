"""Running the code blocks of a Markdown page as a reader would: in page order, in one directory.

Shared by the README's test and the documentation pages' test. A block is run unless its first
lines start with a key of the page's `not_run` map (the value says why); `preludes` give a block
that continues an earlier one what it needs (or a stand-in for a model), by its first lines.
Each block runs in a fresh interpreter or shell with no `TURNKEEPER_*` settings of this machine,
and the default database pointed into the directory, where no example may write.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```(python|sh)\n(.*?)^```", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Example:
    kind: str  # python or sh
    code: str
    why_not_run: str | None
    prelude: str = ""

    @property
    def first_line(self) -> str:
        return self.code.split("\n")[0]


def blocks_of(
    page: Path, not_run: dict[str, str], preludes: dict[str, str] | None = None
) -> list[Example]:
    """The page's python and sh blocks, in order."""
    examples = []
    for match in BLOCK.finditer(page.read_text(encoding="utf-8")):
        code = match.group(2)
        why = next((reason for start, reason in not_run.items() if code.startswith(start)), None)
        prelude = next((p for start, p in (preludes or {}).items() if code.startswith(start)), "")
        examples.append(Example(match.group(1), code, why, prelude))
    return examples


def run_in_order(examples: list[Example], directory: Path, *, times: int) -> list[list[str]]:
    """Run every example in order in `directory`, `times` times over; what each printed, per run.
    A failing example fails the test with its stderr."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("TURNKEEPER_")}
    env |= {
        "TURNKEEPER_CONFIG": os.devnull,
        "XDG_DATA_HOME": str(directory / "data"),  # the default database, should one be used
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}",
        "PYTHONPATH": str(ROOT / "src"),
        "COLUMNS": "120",
    }
    outputs: list[list[str]] = []
    for attempt in range(1, times + 1):
        outputs.append([])
        for example in examples:
            command = (
                [sys.executable, "-c", example.prelude + example.code]
                if example.kind == "python"
                else ["bash", "-e", "-o", "pipefail", "-c", example.code]
            )
            done = subprocess.run(
                command, cwd=directory, env=env, capture_output=True, text=True, timeout=120
            )
            assert done.returncode == 0, f"run {attempt} of `{example.first_line}`:\n{done.stderr}"
            outputs[-1].append(done.stdout)
    assert not (directory / "data").exists(), "an example wrote into the default database"
    return outputs
