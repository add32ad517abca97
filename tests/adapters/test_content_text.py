"""`content_text`, the readable text the adapters store for a message's content: its shortcut
for one part with a text gives what the general rule (parts' texts joined by newlines) gives."""

from __future__ import annotations

from typing import Any

import pytest

from turnkeeper.adapters._common import content_text


class Text(str):
    pass


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        ([{"type": "output_text", "text": "hello", "annotations": []}], "hello"),
        ([{"type": "output_text", "text": ""}], ""),
        ([{"type": "refusal", "refusal": "no"}], "no"),
        ([{"type": "input_image"}], "[input_image]"),
        ([{"type": "output_text", "text": 3}], "[output_text]"),
        ([{"type": "output_text", "text": Text("sub")}], "sub"),
        (["plain"], "plain"),
        ([{"text": "a"}, {"text": ""}, {"text": "b"}], "a\nb"),
        ([], ""),
    ],
)
def test_the_text_of_content_parts(parts: list[Any], expected: str) -> None:
    text = content_text(parts)
    assert text == expected
    assert type(text) is str
