"""`RecentlyUsed`, the bounded map the per-process memos share, against a plain reference."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from turnkeeper.recent import RecentlyUsed

operations = st.lists(
    st.tuples(st.sampled_from(["get", "put", "forget", "change", "drop"]), st.integers(0, 5)),
    max_size=60,
)


@given(operations, st.integers(1, 4))
def test_it_behaves_as_a_list_of_the_most_recently_used(
    ops: list[tuple[str, int]], size: int
) -> None:
    memo: RecentlyUsed[int, int] = RecentlyUsed(size)
    reference: list[tuple[int, int]] = []  # oldest first
    for step, (op, key) in enumerate(ops):
        found = next((value for k, value in reference if k == key), None)
        if op == "get":
            assert memo.get(key) == found
            if found is not None:
                reference = [(k, v) for k, v in reference if k != key] + [(key, found)]
        elif op == "put":
            memo.put(key, step)
            reference = [(k, v) for k, v in reference if k != key] + [(key, step)]
            reference = reference[-size:]
        elif op == "forget":
            memo.forget(key)
            reference = [(k, v) for k, v in reference if k != key]
        elif op == "change":  # keeps its place
            memo.change(key, lambda value: value + 100)
            reference = [(k, v + 100 if k == key else v) for k, v in reference]
        else:  # a change to None forgets
            memo.change(key, lambda value: None)
            reference = [(k, v) for k, v in reference if k != key]
        assert len(memo) == len(reference)
        assert all((k in memo) for k, _ in reference)
    for key, value in reference:
        assert memo.get(key) == value
