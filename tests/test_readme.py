"""The README's examples run as printed, side by side in one directory, and again.

Every ```python and ```sh block of the README is either run here or named in `NOT_RUN` with the
reason (a new example fails this test until it is one or the other). The runnable ones run in
README order in one fresh directory, like a reader pasting them one after another, and then all
again in the same directory: examples must not collide (each has its own database or key) and
must be re-runnable. The only stand-in is the model the quickstart calls.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```(python|sh)\n(.*?)^```", re.MULTILINE | re.DOTALL)

NOT_RUN = {
    "make run": "the make targets themselves",
    "export TURNKEEPER_LLM_BASE_URL": "talks to a model server on the reader's machine",
    "import turnkeeper\nfrom turnkeeper import AsyncChatTurns": "calls the configured model",
    "from openai import OpenAI": "talks to a running service with an API key",
    "turnkeeper keys create --project acme": "starts the service and waits",
    "KEY=tk_…;": "talks to a running service with an API key",
    "import asyncio": "calls OpenAI's hosted model (needs OPENAI_API_KEY and the network)",
    "turnkeeper import backup.jsonl": "reads other teams' stores at placeholder paths",
    "pip install 'turnkeeper[postgres,redis]'": "installs, and names hosts of a deployment",
    'tk = turnkeeper.open("postgresql://app@db.internal': "names a host of a deployment",
}

# What a block that continues an earlier one needs, and the stand-in model.
PRELUDES = {
    'import turnkeeper\n\nwith turnkeeper.open("sqlite:///chat.db")': (
        "from types import SimpleNamespace\n"
        "def call_your_model(messages):\n"
        "    return SimpleNamespace(text='Found it.', prompt_tokens=40, completion_tokens=3)\n"
    ),
    "pending = turnkeeper.NewMessage": (
        "import turnkeeper\n"
        "tk = turnkeeper.open('sqlite:///chat.db')\n"
        "session, _ = tk.get_or_create_session('dev-task-F1-T3', project='acme')\n"
    ),
}


def _blocks() -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer((ROOT / "README.md").read_text())]


def _reason_not_run(code: str) -> str | None:
    return next((why for start, why in NOT_RUN.items() if code.startswith(start)), None)


def _prelude(code: str) -> str:
    return next((text for start, text in PRELUDES.items() if code.startswith(start)), "")


def test_every_example_is_run_or_says_why_not() -> None:
    blocks = _blocks()
    assert len(blocks) >= 10
    skipped = [code.split("\n")[0] for _, code in blocks if _reason_not_run(code)]
    assert len(skipped) == len(NOT_RUN), skipped  # each reason still matches a block


def test_the_examples_run_together_and_again(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("TURNKEEPER_")}
    env |= {
        "TURNKEEPER_CONFIG": os.devnull,
        "XDG_DATA_HOME": str(tmp_path / "data"),  # the default database, should one be used
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}",
        "PYTHONPATH": str(ROOT / "src"),
        "COLUMNS": "120",
    }
    runnable = [(kind, code) for kind, code in _blocks() if not _reason_not_run(code)]
    assert len(runnable) >= 5
    outputs: list[list[str]] = []
    for attempt in (1, 2):
        outputs.append([])
        for kind, code in runnable:
            command = (
                [sys.executable, "-c", _prelude(code) + code]
                if kind == "python"
                else ["bash", "-e", "-o", "pipefail", "-c", code]
            )
            done = subprocess.run(
                command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
            )
            first = code.split("\n")[0]
            assert done.returncode == 0, f"run {attempt} of `{first}`:\n{done.stderr}"
            outputs[-1].append(done.stdout)
    assert not (tmp_path / "data").exists(), "an example wrote into the default database"
    langchain = next(
        i for i, (_, code) in enumerate(runnable) if "RunnableWithMessageHistory" in code
    )
    assert [run[langchain] for run in outputs] == ["4 messages seen\n", "8 messages seen\n"]
