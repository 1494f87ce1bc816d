"""The outbox itself: `outbox migrate` (the schema brought up to date on purpose, e.g. before
workers on several machines start) and `outbox info` (where it is and its schema version)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from newsletter.cli.terminal import context_passer
from newsletter.database import LATEST

if TYPE_CHECKING:
    # Loaded when the command runs (terminal.context_passer), not by its --help.
    from newsletter.context import CommandContext

# The schema as it is: opening the outbox here must not migrate it first.
pass_unmigrated = context_passer(migrate=False)


@click.group()
def outbox() -> None:
    """The delivery log: a SQLite file (default) or a PostgreSQL database ([outbox] url)."""


@outbox.command()
@pass_unmigrated
def migrate(context: CommandContext) -> None:
    """Apply the schema migrations the outbox lacks (every command also does on start)."""
    box = context.database
    before = box.backend.version()
    applied = box.backend.migrate()
    for migration in applied:
        click.echo(f"applied {migration.version}: {migration.about}")
    click.echo(
        f"{box.display}: schema version {box.backend.version()}"
        + (f" (was {before})" if applied else " (up to date)")
    )


@outbox.command()
@pass_unmigrated
def info(context: CommandContext) -> None:
    """Where the outbox is and its schema version."""
    box = context.database
    version = box.backend.version()
    state = "up to date" if version == LATEST else f"{LATEST - version} migration(s) to apply"
    click.echo(f"{box.backend.name}: {box.display}: schema version {version} ({state})")
