"""The strategies a service knows by name: the built-ins (`context.strategies`' five and
`context.relevant`) and those registered with it. Apart from the strategies themselves, so that
a strategy's module builds on `context.strategies` without the registry importing it back."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from turnkeeper.context.relevant import Relevant
from turnkeeper.context.strategies import BUILT_INS, Strategy
from turnkeeper.errors import InvalidInput
from turnkeeper.types import StrategyName


def built_ins() -> list[Strategy]:
    """A fresh instance of each built-in strategy."""
    return [strategy() for strategy in (*BUILT_INS, Relevant)]


class Strategies:
    """The strategies a service knows by name: the built-ins, and those registered with it."""

    def __init__(self, strategies: Iterable[Strategy] = ()) -> None:
        self._by_name: dict[str, Strategy] = {}
        for strategy in (*built_ins(), *strategies):
            self.register(strategy)

    def register(self, strategy: Strategy) -> Strategy:
        """Make `strategy` known by its `name` (which no other registered strategy has).
        Returns it, so a class can be registered where it is made."""
        if not isinstance(strategy, Strategy):
            raise InvalidInput("strategy", f"must be a turnkeeper.Strategy, got {strategy!r}")
        name = strategy.name
        if not isinstance(name, str) or not name.strip():
            raise InvalidInput("strategy", f"{type(strategy).__name__} needs a name")
        if name in self._by_name:
            raise InvalidInput("strategy", f"a strategy named {name!r} is registered already")
        self._by_name[str(name)] = strategy
        return strategy

    def resolve(self, strategy: Strategy | StrategyName | str) -> Strategy:
        """The strategy object for a name (or the object itself)."""
        if isinstance(strategy, Strategy):
            return strategy
        found = self._by_name.get(str(strategy)) if isinstance(strategy, str) else None
        if found is None:
            names = ", ".join(self._by_name)
            raise InvalidInput("strategy", f"unknown strategy {strategy!r}; choose one of {names}")
        return found

    def __iter__(self) -> Iterator[Strategy]:
        return iter(self._by_name.values())

    def __contains__(self, name: object) -> bool:
        return name in self._by_name
