"""`newsletter report`: what readers read of one send, from the delivery log and its click
events, as text, and on request as a self-contained HTML file and as CSV."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from newsletter.cli.terminal import issue_option, pass_context
from newsletter.clicks.gather import gather_report
from newsletter.clicks.page import render_html
from newsletter.clicks.tables import render_text, write_report_csv
from newsletter.config.settings import Settings
from newsletter.database import Database
from newsletter.errors import ConfigError, display_path
from newsletter.sequences.overview import issue_of
from newsletter.subjects.run import report_lines

if TYPE_CHECKING:
    # Loaded when the command runs (terminal.context_passer), not by its --help.
    from newsletter.context import CommandContext

_FILE = click.Path(dir_okay=False, writable=True, path_type=Path)


@click.command()
@issue_option
@click.option(
    "--list",
    "list_name",
    default=None,
    help="The list the issue went to (default: its one subscriber list).",
)
@click.option(
    "--html", "html_path", type=_FILE, default=None, help="Also write the report as one HTML file."
)
@click.option(
    "--csv", "csv_path", type=_FILE, default=None, help="Also write it as CSV (- for stdout)."
)
@pass_context
def report(
    context: CommandContext,
    number: int,
    list_name: str | None,
    html_path: Path | None,
    csv_path: Path | None,
) -> None:
    """What readers read of an issue's send: per section and item, people's clicks beside
    machine requests (the manual, "What readers read"); the messages sent per minute; bounces,
    complaints and unsubscribes as rates of the messages sent. Figures under [privacy]
    min_count show as "< 5". A welcome sequence's step: --issue its key (`newsletter
    sequences` shows it)."""
    settings, database = context.settings, context.existing_database()
    issue = issue_of(settings, database, number)  # an issue, or a sequence step by its key
    if database is None:
        click.echo(f"issue {number}: nothing sent yet (no delivery log)")
        return
    name = chosen_list(settings, database, number, list_name)
    if name is None:
        click.echo(f"issue {number}: nothing sent yet")
        return
    made = gather_report(database, settings, issue, name)
    subject_test = report_lines(database, settings, number, name)
    to_stdout = csv_path is not None and str(csv_path) == "-"
    if not to_stdout:
        click.echo(render_text(made, shutil.get_terminal_size((100, 24)).columns), nl=False)
        for line in subject_test:
            click.echo(line)
    if html_path is not None:
        html_path.write_text(render_html(made, language=settings.newsletter.language), "utf-8")
        click.echo(f"wrote {display_path(html_path)}", err=True)
    if csv_path is not None:
        if to_stdout:
            write_report_csv(made, sys.stdout)
        else:
            with csv_path.open("w", encoding="utf-8", newline="") as handle:
                rows = write_report_csv(made, handle)
            click.echo(f"wrote {rows} rows to {display_path(csv_path)}", err=True)


def chosen_list(
    settings: Settings, database: Database, number: int, list_name: str | None
) -> str | None:
    """`list_name`, or the one subscriber list (else the one list) the issue went to; None
    when it went to none. Several: the user says which."""
    sent = database.deliveries.lists_of(number)
    if list_name is not None:
        if list_name not in sent and list_name not in settings.lists:
            settings.mailing_list(list_name)  # raises, naming the lists there are
        return list_name
    real = [name for name in sent if not _staging(settings, name)]
    candidates = real or sent
    if len(candidates) > 1:
        raise ConfigError(
            f"issue {number} went to {len(candidates)} lists ({', '.join(candidates)})",
            hint=f"Say which with --list, e.g. --list {candidates[0]}.",
        )
    return candidates[0] if candidates else None


def _staging(settings: Settings, name: str) -> bool:
    chosen = settings.lists.get(name)
    return chosen is not None and chosen.staging
