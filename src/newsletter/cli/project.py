"""`newsletter init`: a newsletter project of your own, from a few answers (scaffold.py)."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import replace
from pathlib import Path

import click

from newsletter.config.configfile import CONFIG_NAME
from newsletter.config.settings import load_settings
from newsletter.errors import ConfigError, display_path
from newsletter.setup.scaffold import ISSUE, Choices, add_workflow, check_choices, create_project

_DEFAULTS = Choices()


@click.command()
@click.argument(
    "folder", type=click.Path(file_okay=False, path_type=Path), default=Path(), required=False
)
@click.option("--name", default=None, help=f"The newsletter's name [{_DEFAULTS.name}].")
@click.option(
    "--language",
    default=None,
    help=f"Its language tag: en, zh-CN, ... (the first issue is written in it) "
    f"[{_DEFAULTS.language}].",
)
@click.option(
    "--sender",
    default=None,
    help=f"The address issues come from, also the staging list's reader [{_DEFAULTS.sender}].",
)
@click.option(
    "--base-url",
    default=None,
    help=f"Where `newsletter serve` will answer readers [{_DEFAULTS.base_url}].",
)
@click.option(
    "--smtp-host",
    default=None,
    help=f"The mail server; {_DEFAULTS.smtp_host} is the capture server, `newsletter "
    f"mailbox` [{_DEFAULTS.smtp_host}].",
)
@click.option(
    "--yes", "-y", is_flag=True, help="Ask nothing: the defaults for every choice not given."
)
@click.option(
    "--ci",
    type=click.Choice(["github", "none"]),
    default="github",
    show_default=True,
    help="github: also write .github/workflows/newsletter.yml, which checks every issue a pull"
    " request changes (in a folder that is a project already, only that file is written);"
    " none: no workflow.",
)
@click.pass_context
def init(
    ctx: click.Context,
    folder: Path,
    name: str | None,
    language: str | None,
    sender: str | None,
    base_url: str | None,
    smtp_host: str | None,
    yes: bool,
    ci: str,
) -> None:
    """Start a newsletter of your own in FOLDER (default: here, made if missing).

    Asks for each choice not given as an option (--yes: the defaults), checking each answer as
    it is typed (a refused one is said, and its question asked again), then writes
    newsletter.toml (every choice commented), issues/1.md in the newsletter's language, an empty
    subscribers.csv, staging.csv with you as its reader, .gitignore, a README for the editors,
    and the project's secret in .newsletter/secret (0600, ignored by git, never shown: back it
    up; every unsubscribe and click link is signed with it). NEWSLETTER_SECRET, when set, wins
    over the file. A folder that already holds a project is left as it is (exit code 1); a
    README.md there is kept, and a .gitignore there gets the lines it lacks.

    It also writes .github/workflows/newsletter.yml (--ci none: not): on every pull request,
    GitHub installs this version of newsletter, checks each issue file the pull request changes
    (`check --format github`: the findings on its lines) and keeps the SARIF logs as an
    artifact. `newsletter init --ci github` in a project writes only that file.

    \b
    Then, with no other step:
      cd FOLDER
      newsletter mailbox &                       the capture server on port 1025
      newsletter send --issue 1 --list staging   a test send, to you
    """

    asked = ctx.get_parameter_source("ci") is click.core.ParameterSource.COMMANDLINE
    if ci == "github" and asked and (folder / CONFIG_NAME).exists():
        _add_workflow(folder)
        return

    today = dt.date.today()
    answered = Choices()

    def ask(field: str, value: str | None, question: str) -> None:
        """One choice: the option's value, else the answer typed, checked at once (issue 41:
        a bad sender found after the last question cost every answer); a refused answer is
        said and the same question asked again, a refused option is the error."""
        nonlocal answered
        default = getattr(_DEFAULTS, field)
        while True:
            interactive = value is None and not yes
            chosen = str(click.prompt(question, default=default)) if interactive else value
            candidate = replace(answered, **{field: default if chosen is None else chosen})
            try:
                check_choices(candidate, folder, today)
            except ConfigError as exc:
                if not interactive:
                    raise
                click.echo(f"error: {_unflagged(exc.message)}", err=True)
                continue
            answered = candidate
            return

    ask("name", name, "Newsletter name")
    ask("language", language, "Language (en, zh-CN, ...)")
    ask("sender", sender, "Sender address (yours: the test list's reader)")
    ask("base_url", base_url, "Site address (where `newsletter serve` answers)")
    ask("smtp_host", smtp_host, "SMTP host (127.0.0.1: the capture server)")
    choices = answered
    created = create_project(folder, choices, today, workflow=ci == "github")
    where = display_path(created.root.resolve())
    click.echo(f"Created the newsletter {choices.name!r} in {where}:")
    for path in created.files:
        click.echo(f"  {display_path(path.resolve())}")
    for path in created.kept:
        click.echo(f"  {display_path(path.resolve())} (kept as it was)")
    click.echo(
        f"The project's secret is in {display_path(created.secret_file.resolve())}: back it up"
        " (a password manager). If it is lost, every unsubscribe and click link already sent"
        " stops working."
    )
    click.echo("Next:")
    if where != ".":
        click.echo(f"  cd {where}")
    if created.local_smtp:
        click.echo("  newsletter mailbox &                        # the capture server")
    click.echo(f"  newsletter preview --issue 1                # {ISSUE}")
    click.echo("  newsletter send --issue 1 --list staging    # a test send, to you")


def _add_workflow(root: Path) -> None:
    """The workflow alone, for a project made before init wrote one: it watches the project's
    own issue folder, which must be inside the project (the repository's root)."""
    settings = load_settings(root / CONFIG_NAME)
    try:
        issues = settings.issues_dir.resolve().relative_to(root.resolve())
    except ValueError:
        raise ConfigError(
            f"[paths] issues is {display_path(settings.issues_dir)}, outside the project: the"
            " workflow checks the issue files of the repository it is in",
            hint="Keep the issues in a folder of the project, or write the workflow by hand.",
        ) from None
    written = add_workflow(root, issues.as_posix())
    click.echo(f"Created {display_path(written.resolve())}: on every pull request it checks the")
    click.echo(f"issue files in {issues.as_posix()}/ that the pull request changes. Commit it.")


def _unflagged(message: str) -> str:
    """A choice's error without its flag (`--sender: `): the question asked again names it."""
    return "\n".join(re.sub(r"^--[a-z-]+: ", "", line) for line in message.splitlines())
