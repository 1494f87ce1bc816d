"""The `newsletter` group: the root options, and every command registered from its family.

Every NewsletterError becomes a message on stderr (what is wrong, then how to fix it) and exit
code 1; nothing the user can cause ends in a traceback.
"""

from __future__ import annotations

from pathlib import Path

import click

from newsletter.cli import author, database, lists, sending, servers
from newsletter.cli.terminal import Group


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Config file (default: ./newsletter.toml). Its folder is the project root.",
)
@click.version_option(package_name="newsletter")
@click.pass_context
def cli(ctx: click.Context, config: Path | None) -> None:
    """Turn an issue file into responsive email, preview it, and send it to every subscriber
    exactly once.

    \b
    The editor's day:
      newsletter preview --issue 14            look at it live in a browser
      newsletter check --issue 14              pre-send checks
      newsletter send --issue 14 --list staging   a test send
      newsletter send --issue 14               deliver to the main list
    """
    ctx.ensure_object(dict)["config"] = config


for command in (
    author.build,
    author.check,
    author.preview,
    lists.subscribers,
    lists.unsubscribe,
    lists.suppressions,
    lists.bounces,
    sending.send,
    sending.status,
    database.outbox,
    servers.mailbox,
    servers.serve,
):
    cli.add_command(command)


def main() -> None:
    cli(prog_name="newsletter")
