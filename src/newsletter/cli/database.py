"""The outbox itself: `outbox migrate` (the schema brought up to date on purpose, e.g. before
workers on several machines start) and `outbox info` (where it is and its schema version)."""

from __future__ import annotations

import click

from newsletter.cli.terminal import pass_settings
from newsletter.config.settings import Settings
from newsletter.database import LATEST, open_project_database


@click.group()
def outbox() -> None:
    """The delivery log: a SQLite file (default) or a PostgreSQL database ([outbox] url)."""


@outbox.command()
@pass_settings
def migrate(settings: Settings) -> None:
    """Apply the schema migrations the outbox lacks (every command also does on start)."""
    with open_project_database(settings, migrate=False) as box:
        before = box.backend.version()
        applied = box.backend.migrate()
        for migration in applied:
            click.echo(f"applied {migration.version}: {migration.about}")
        click.echo(
            f"{box.display}: schema version {box.backend.version()}"
            + (f" (was {before})" if applied else " (up to date)")
        )


@outbox.command()
@pass_settings
def info(settings: Settings) -> None:
    """Where the outbox is and its schema version."""
    with open_project_database(settings, migrate=False) as box:
        version = box.backend.version()
        state = "up to date" if version == LATEST else f"{LATEST - version} migration(s) to apply"
        click.echo(f"{box.backend.name}: {box.display}: schema version {version} ({state})")
