"""Help output that reads like gh's and git's, applied to the click objects typer builds.

Typer has no setting for these, so `readable_help` adjusts the built commands of this app (and
only those) before they run; `TurnkeeperGroup.main` calls it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from typer.core import TyperArgument, TyperOption

__all__ = ["readable_help"]


def readable_help(command: Any) -> None:
    """Help that reads like gh's and git's: a flag shows no type (typer would print `<bool>`),
    an argument is its metavar alone (not also `<str>` or `<list[str]>`; `SESSION`,
    `[SESSION]...` in the usage line, not `{SESSION}`), and an option without a metavar gets
    one (`N` for numbers, else its name). An option with choices lists them as words in its
    help, which wraps between them (as a metavar, `full|recent|sliding_window|…` is one long
    word that a narrow terminal breaks mid-name). Typer has no setting for these, so the built
    click objects of this app are adjusted before they run."""
    for param in getattr(command, "params", ()):
        if isinstance(param, TyperArgument):
            overrides = {"display_type_rich": _no_type, "_usage_display_name": _usage_of(param)}
            for name, override in overrides.items():
                setattr(param, name, override)
        elif isinstance(param, TyperOption) and param.metavar is None:
            param.metavar = _metavar_of(param)
            _list_choices(param)
    if not hasattr(command, "_turnkeeper_help_option"):
        setattr(command, "_turnkeeper_help_option", command.get_help_option)  # noqa: B010
        setattr(command, "get_help_option", _flag_help(command._turnkeeper_help_option))  # noqa: B010
    for sub in getattr(command, "commands", {}).values():
        readable_help(sub)


def _metavar_of(option: TyperOption) -> str:
    if option.is_flag:
        return ""
    if option.type_descriptor.annotation is int:
        return "N"
    return (option.name or "value").upper().replace("_", "-")


def _list_choices(option: TyperOption) -> None:
    choices = option.type_descriptor.choices if option.type_descriptor.is_choice else None
    if not choices:
        return
    names = [str(getattr(choice, "value", choice)) for choice in choices]
    listed = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]
    option.help = f"{option.help or ''} One of {listed}.".strip()


def _usage_of(argument: TyperArgument) -> Callable[[], str]:
    name = argument.display_name_raw
    shown = name if argument.required else f"[{name}]"
    return lambda: shown + ("..." if argument.nargs != 1 else "")


def _flag_help(
    get_help_option: Callable[[Any], TyperOption | None],
) -> Callable[[Any], TyperOption | None]:
    def readable(ctx: Any) -> TyperOption | None:
        option = get_help_option(ctx)
        if option is not None:
            option.metavar = ""
        return option

    return readable


def _no_type(ctx: Any) -> None:
    return None
