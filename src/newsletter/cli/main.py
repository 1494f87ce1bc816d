"""The `newsletter` group: the root options, and every command registered from its family.

Every NewsletterError becomes a message on stderr (what is wrong, then how to fix it) and exit
code 1; nothing the user can cause ends in a traceback. A command's module is imported only when
that command runs (or help lists it): `send` does not pay for the preview server, the IMAP
client or the spam scorer at every start.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from pathlib import Path

import click

from newsletter.cli.terminal import Group
from newsletter.distribution import DISTRIBUTION

# Every command, in the order help lists them: name -> the cli module that defines it.
COMMANDS = {
    "init": "project",
    "new": "author",
    "build": "author",
    "check": "author",
    "diff": "reviewing",
    "shots": "reviewing",
    "preview": "author",
    "templates": "templates",
    "subscribers": "lists",
    "unsubscribe": "lists",
    "suppressions": "lists",
    "bounces": "lists",
    "send": "sending",
    "status": "status",
    "schedule": "scheduling",
    "sequences": "sequences",
    "report": "reports",
    "outbox": "database",
    "mailbox": "servers",
    "serve": "servers",
    "worker": "servers",
    "doctor": "production",
    "deploy": "production",
}


class LazyGroup(Group):
    """A group whose commands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        family = COMMANDS.get(cmd_name)
        if family is None:
            return None
        command = getattr(importlib.import_module(f"newsletter.cli.{family}"), cmd_name)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Config file (default: ./newsletter.toml). Its folder is the project root.",
)
@click.version_option(package_name=DISTRIBUTION)
@click.pass_context
def cli(ctx: click.Context, config: Path | None) -> None:
    """Turn an issue file into responsive email, preview it, and send it to every subscriber
    exactly once.

    \b
    A newsletter of your own:
      newsletter init mynews --yes             a project: config, issue 1, lists, secret

    \b
    The editor's day:
      newsletter new                           start the next issue from the last
      newsletter preview --issue 14            look at it live in a browser
      newsletter check --issue 14              pre-send checks
      newsletter diff --issue 14               what readers would see change since the last commit
      newsletter shots --issue 14              screenshots at 375 and 680 px, light and dark
      newsletter send --issue 14 --list staging   a test send
      newsletter send --issue 14               deliver to the main list
      newsletter send --issue 14 --at "2026-12-02 08:00"   ... at that time (a worker sends it)
      newsletter report --issue 14             what readers read (with [tracking] on)
      newsletter sequences                     welcome sequences: steps, readers, next due
    """
    ctx.ensure_object(dict)["config"] = config


def main() -> None:
    """The console script. It exits without tearing the interpreter down: every command has
    closed its files and connections by then, and freeing the heap object by object only keeps
    the user (or the script that runs a send) waiting."""
    try:
        cli(prog_name="newsletter")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError):  # a reader that went away (`| head`) is no error
            stream.flush()
    os._exit(code)
