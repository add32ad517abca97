"""`turnkeeper encryption …`: a master key for `encryption_key`, and the last step of rotating
one (docs/privacy.md)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from turnkeeper.cli.app import DbOption, JsonOption, app, global_options
from turnkeeper.config import load_settings
from turnkeeper.errors import InvalidConfig

encryption = typer.Typer(
    help="Master keys of encryption at rest: make one, rewrap data keys after a rotation.",
    no_args_is_help=True,
)
app.add_typer(encryption, name="encryption")


@encryption.command("generate-key")
def generate_key(
    key_id: Annotated[
        str, typer.Option("--id", metavar="ID", help="The key's id (letters, digits, _ . -).")
    ] = "k1",
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Print a new master key (`id:` and 32 random bytes in base64) for `encryption_key`. To
    rotate, put the new key first: `TURNKEEPER_ENCRYPTION_KEY=new,old`. (No database is
    opened: --db is accepted, as by every command, and unused.)"""
    from turnkeeper.encryption.keys import generate_master_key, parse_master_keys

    key = generate_master_key(key_id)
    parse_master_keys(key)  # an id the setting would refuse is refused here
    json_output = json_output or global_options().json_output
    typer.echo(json.dumps({"encryption_key": key}) if json_output else key)


@encryption.command("rewrap")
def rewrap(db: DbOption = None, json_output: JsonOption = False) -> None:
    """Wrap every session's data key with the first key of `encryption_key` (the data is not
    touched); afterwards the other keys can be removed from the setting."""
    from turnkeeper.encryption import configured_key
    from turnkeeper.encryption.keys import parse_master_keys
    from turnkeeper.encryption.keystore import check_master_keys, open_key_store
    from turnkeeper.encryption.keystore import rewrap as rewrap_keys

    settings = load_settings(database_url=db or global_options().db)
    text = configured_key(settings)
    if text is None:
        raise InvalidConfig("encryption_key", "is not set: there is nothing to rewrap with")
    master = parse_master_keys(text)
    key_store = open_key_store(settings.key_store, settings.database_url)
    try:
        check_master_keys(master, key_store)
        count = rewrap_keys(master, key_store)
    finally:
        key_store.close()
    if json_output or global_options().json_output:
        typer.echo(json.dumps({"rewrapped": count, "master_key_id": master.current}))
    else:
        typer.echo(f"Rewrapped {count} data keys with master key {master.current!r}.")
