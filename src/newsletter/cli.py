"""The `newsletter` command: parse arguments, load settings once, call one library function, print.

Every NewsletterError becomes a message on stderr (what is wrong, then how to fix it) and exit
code 1; nothing the user can cause ends in a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import update_wrapper
from pathlib import Path
from typing import Any, TypeVar

import click

from newsletter.errors import NewsletterError
from newsletter.settings import load_settings

F = TypeVar("F", bound=Callable[..., Any])


class Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except NewsletterError as exc:
            fail(exc)


def fail(exc: NewsletterError) -> None:
    click.secho(f"error: {exc.message}", fg="red", err=True)
    if exc.hint:
        click.echo(f"hint: {exc.hint}", err=True)
    sys.exit(1)


def pass_settings(func: F) -> F:
    """Load newsletter.toml (or --config) once, on first use, and pass it as `settings`."""

    @click.pass_context
    def wrapper(ctx: click.Context, /, *args: Any, **kwargs: Any) -> Any:
        obj = ctx.ensure_object(dict)
        if "settings" not in obj:
            obj["settings"] = load_settings(obj.get("config"))
        return ctx.invoke(func, obj["settings"], *args, **kwargs)

    return update_wrapper(wrapper, func)  # type: ignore[return-value]


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


def main() -> None:
    cli(prog_name="newsletter")

