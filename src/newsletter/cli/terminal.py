"""What every command shares: settings loaded once, errors turned into two lines and exit 1,
the common options, and text made safe for a terminal."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import update_wrapper
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from newsletter.errors import NewsletterError, display_path
from newsletter.fields import DEFAULT_LIST
from newsletter.formats.safetext import printable as printable  # the one cleaner, for every command

if TYPE_CHECKING:
    from newsletter.importers.subscribers import ListReport

F = TypeVar("F", bound=Callable[..., Any])


class Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except NewsletterError as exc:
            fail(exc)
        except OSError as exc:
            if not isinstance(exc.filename, str):
                raise
            # A path the user gave (--out, --csv, --site) or the project holds: name it.
            fail(
                NewsletterError(
                    f"{display_path(exc.filename)}: {exc.strerror or exc}",
                    hint="Check the path: its folder must exist and be yours to write in.",
                )
            )


def fail(exc: NewsletterError, code: int = 1) -> NoReturn:
    """What is wrong and how to fix it, on stderr; then exit with `code`. A message can quote a
    server's reply or a file's bytes: each of its lines is cleaned."""
    click.secho(f"error: {_lines(exc.message)}", fg="red", err=True)
    if exc.hint:
        click.echo(f"hint: {_lines(exc.hint)}", err=True)
    sys.exit(code)


def _lines(text: str) -> str:
    return "\n".join(printable(line) for line in text.split("\n"))


def pass_settings(func: F) -> F:
    """Load newsletter.toml (or --config) once, on first use, and pass it as `settings`."""

    @click.pass_context
    def wrapper(ctx: click.Context, /, *args: Any, **kwargs: Any) -> Any:
        obj = ctx.find_root().ensure_object(dict)
        if "settings" not in obj:
            # Imported here: the config's models cost ~0.1 s, which `--version`, `--help` and
            # a mistyped option do not need.
            from newsletter.config.settings import load_settings

            obj["settings"] = load_settings(obj.get("config"))
        return ctx.invoke(func, obj["settings"], *args, **kwargs)

    return update_wrapper(wrapper, func)  # type: ignore[return-value]


def context_passer(*, migrate: bool = True) -> Callable[[F], F]:
    """A decorator: the command's one CommandContext (context.py) passed as its first argument,
    over its settings; the database opened when a step first needs it (`existing_database()`
    for a step that only reads), once, and closed when the command ends, however it ends.
    `migrate=False`: opened as it is, for the commands that report or apply the schema."""

    def decorate(func: F) -> F:
        def with_context(settings: Any, /, *args: Any, **kwargs: Any) -> Any:
            # Imported here, as the settings are: `--help` loads none of the database's modules.
            from newsletter.context import CommandContext

            with CommandContext(settings, migrate=migrate) as context:
                return func(context, *args, **kwargs)

        return pass_settings(update_wrapper(with_context, func))  # type: ignore[return-value]

    return decorate


pass_context = context_passer()

issue_option = click.option("--issue", "number", type=int, required=True, help="Issue number.")
sample_list_option = click.option(
    "--list",
    "list_name",
    default=DEFAULT_LIST,
    show_default=True,
    help="The list whose headers the sample message carries.",
)
every_list_option = click.option(
    "--list", "list_name", default=None, help="Only this list (default: every list)."
)


def list_counts(list_name: str, report: ListReport) -> str:
    """One line of what reading a list found: rows kept, skipped, rejected."""
    counts = ", ".join(f"{n} {label}" for label, n in report.counts().items())
    return f"{list_name} ({report.path}): {counts}"
