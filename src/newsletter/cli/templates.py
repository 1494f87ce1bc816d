"""The email templates on the command line: `templates` (each of the package's and what the
project has of it), `templates eject` (copies into the project, recorded), `templates diff`
(a copy against the package's template now) and `templates follow` (a change taken by hand)."""

from __future__ import annotations

import difflib

import click

from newsletter.cli.terminal import pass_settings
from newsletter.config.settings import Settings
from newsletter.errors import TemplateError, display_path
from newsletter.rendering.ejected import RECORD, eject, follow, shipped_dir, states


@click.group(invoke_without_command=True)
@pass_settings
@click.pass_context
def templates(ctx: click.Context, settings: Settings) -> None:
    """List the email templates: for each of the package's, whether the project uses the
    package's, an ejected copy (edited or not; behind the package's or not), or a file of its
    own. A project's templates folder ([paths] templates, templates/email/) wins file by file
    over the package's."""
    if ctx.invoked_subcommand is not None:
        return
    folder = display_path(settings.templates_dir)
    for state in states(settings.templates_dir):
        if state.kind == "shipped":
            line = "the package's"
        elif state.kind == "own":
            line = f"your own {display_path(state.path)} (not ejected: nothing to compare)"
        else:
            assert state.copy is not None
            line = f"ejected from {state.copy.version} on {state.copy.day}, " + (
                "edited" if state.edited else "unedited"
            )
            if state.behind:
                line += (
                    f"; the package's has changed since: `newsletter templates diff {state.name}`"
                )
        click.echo(f"{state.name:<14} {line}")
    click.echo(f"copies go to {folder}/ (`newsletter templates eject NAME`)")


@templates.command(name="eject")
@click.argument("names", nargs=-1)
@click.option("--force", is_flag=True, help="Replace a copy the project has (its edits are lost).")
@pass_settings
def eject_command(settings: Settings, names: tuple[str, ...], force: bool) -> None:
    """Copy the package's templates NAMES (default: all) into the project's templates folder,
    where they override the package's, and record what each was copied from in its
    ejected.toml: `check` then warns when the installed package's template changes after."""
    written = eject(settings.templates_dir, list(names), force=force)
    for path in written:
        click.echo(f"wrote {display_path(path)}")
    click.echo(
        f"recorded in {display_path(settings.templates_dir / RECORD)}; edit the copies, commit "
        "both (a copy you leave as it was is better deleted: the package's is then used)"
    )


@templates.command()
@click.argument("name")
@pass_settings
def diff(settings: Settings, name: str) -> None:
    """What the package's template NAME has that the project's copy has not, as a unified diff
    (- your copy, + the package's now)."""
    state = next((s for s in states(settings.templates_dir) if s.name == name), None)
    if state is None or not state.exists:
        raise TemplateError(
            f"{display_path(settings.templates_dir / name)}: the project has no copy of {name!r}",
            hint="`newsletter templates` lists the copies; `newsletter templates eject NAME` "
            "takes one.",
        )
    mine = state.path.read_text(encoding="utf-8").splitlines(keepends=True)
    theirs = (shipped_dir() / name).read_text(encoding="utf-8").splitlines(keepends=True)
    lines = list(
        difflib.unified_diff(mine, theirs, display_path(state.path), f"the package's {name}")
    )
    if not lines:
        click.echo(f"{display_path(state.path)}: the same as the package's")
    for line in lines:
        click.echo(line, nl=not line.endswith("\n"))


@templates.command(name="follow")
@click.argument("names", nargs=-1, required=True)
@pass_settings
def follow_command(settings: Settings, names: tuple[str, ...]) -> None:
    """Record that the copies NAMES now follow the installed package's templates (you took
    their change into your copy by hand): `check` stops warning about them."""
    for copy in follow(settings.templates_dir, list(names)):
        click.echo(f"{copy.name}: follows the package's template of {copy.version}")
