"""A window and its report read well when printed, and the report's numbers agree."""

from __future__ import annotations

from turnkeeper import StrategyName, Turnkeeper


def _chat(tk: Turnkeeper, questions: int) -> str:
    session = tk.create_session()
    tk.append(session, "system", "Be brief.")
    for i in range(questions):
        tk.append(session, "user", f"question number {i} with some words in it to cost tokens")
    return session.id


def test_a_printed_report_says_what_was_kept_and_left_out(tk: Turnkeeper) -> None:
    session_id = _chat(tk, 30)
    window = tk.context(
        session_id, strategy=StrategyName.SLIDING_WINDOW, max_tokens=200, reserved_tokens=0
    )
    report = window.report
    assert report.messages_dropped == len(report.dropped_seqs) + report.dropped_unread
    assert report.messages_dropped + report.messages_included == report.messages_in_store == 31
    text = str(report)
    assert text.splitlines()[0] == (
        f"sliding_window window: {report.messages_included} of 31 stored messages, "
        f"{report.tokens_used} / 200 tokens (o200k_base)"
    )
    assert f"dropped {report.messages_dropped}" in text
    assert f"{report.dropped_unread} older ones" in text
    assert f"marker: {report.markers[0]}" in text
    assert "ContextReport(" not in text


def test_a_printed_window_lists_its_messages_after_the_report(tk: Turnkeeper) -> None:
    session_id = _chat(tk, 3)
    window = tk.context(session_id, strategy=StrategyName.FULL)
    lines = str(window).splitlines()
    assert lines[0].startswith("full window: 4 of 4 stored messages")
    assert lines[-1].split() == ["#4", "user", str(window.messages[-1].tokens), "question",
                                 "number", "2", "with", "some", "words", "in", "it", "to", "cost",
                                 "tokens"]  # fmt: skip


def test_an_empty_window_costs_no_tokens(tk: Turnkeeper) -> None:
    session = tk.create_session()
    window = tk.context(session)
    assert window.messages == ()
    assert window.report.tokens_used == 0
    assert "0 of 0 stored messages, 0 / " in str(window.report)
