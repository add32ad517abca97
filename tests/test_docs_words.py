"""The README and the documentation name things by what they are: the words of the older
designs turnkeeper replaces appear only on the page that maps them (docs/compatibility.md).
An attribute that merely ends in one (OpenTelemetry's `gen_ai.request.seed`) is not one."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OLDER_WORDS = re.compile(
    r"bead|dagent|(?<![.\w])seeds?\b|go agents|anonymous chat|/api/v1/conversations",
    re.IGNORECASE,
)
MAPPING_PAGE = ROOT / "docs" / "compatibility.md"


def test_older_designs_words_appear_only_on_the_compatibility_page() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = [
        f"{page.relative_to(ROOT)}:{number}: {line.strip()}"
        for page in pages
        if page != MAPPING_PAGE
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        if OLDER_WORDS.search(line)
    ]
    assert found == []
    assert OLDER_WORDS.search(MAPPING_PAGE.read_text(encoding="utf-8"))  # the map is still there
