"""The delivery log as the editor reads it: `status`, per issue and list: the counts per state,
the workers sending it now, what came back (bounces, complaints, the unsubscribes the issue
brought), a staging list's tests one by one, then each recipient not sent with the reply; last,
the issue's scheduled sends still to go, and those of the last week that did not go."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from newsletter.cli.terminal import every_list_option, issue_option, pass_context, printable
from newsletter.config.settings import Settings
from newsletter.database import Database
from newsletter.database.schedules import OPEN, ScheduleState
from newsletter.errors import display_path
from newsletter.issues import issue_path, list_issue_numbers
from newsletter.models import DeliveryStatus
from newsletter.schedule.when import describe_instant, span, wall_clock
from newsletter.send.lease import why_gone
from newsletter.send.testsend import local_time
from newsletter.spreadsheet import write_csv

if TYPE_CHECKING:
    # Loaded when the command runs (terminal.context_passer), not by its --help.
    from newsletter.context import CommandContext

# Scheduled sends that did not send, shown by `status` for a week after they ended.
UNSENT = (ScheduleState.MISSED, ScheduleState.FAILED, ScheduleState.STOPPED)
RECENT = 7 * 86_400


@click.command()
@issue_option
@every_list_option
@click.option(
    "--csv",
    "csv_path",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    default=None,
    help="Also write every row to this CSV file (- for stdout).",
)
@click.option("--all", "show_all", is_flag=True, help="List every row that is not sent.")
@pass_context
def status(
    context: CommandContext,
    number: int,
    list_name: str | None,
    csv_path: Path | None,
    show_all: bool,
) -> None:
    """Show an issue's delivery log: counts per state (and which relay carried what, with
    several relays), the workers sending it now, what came back (bounces, complaints, the
    unsubscribes the issue brought), a staging list's tests, then each recipient not sent with
    the server's reply; last, the issue's scheduled sends still to go (when, who booked them)
    and those of the last week that did not go (missed, failed, stopped), with why.

    An unsubscribe is the issue's when it came after that reader's message of the issue and
    before their next one on the list; a complaint is the issue's when it names the message
    (its VERP tag or Message-ID). An issue with no file and nothing in the log is an error
    (exit 1) naming the issues there are."""
    settings = context.settings
    database = context.existing_database()  # read only: no log, none made
    if (
        list_name is not None
        and list_name not in settings.lists
        # A list since dropped from the config still has its rows in the log.
        and (database is None or list_name not in database.deliveries.lists_of(number))
    ):
        settings.mailing_list(list_name)  # raises, naming the lists there are
    _known_issue(settings, database, number)
    if database is None:
        click.echo(f"issue {number}: nothing sent yet (no delivery log)")
        return
    limit = None if show_all else 50
    names = [list_name] if list_name else database.deliveries.lists_of(number)
    if not names:
        click.echo(f"issue {number}: nothing sent yet")
    for name in names:
        counts = database.deliveries.counts(number, name)
        click.echo(f"issue {number} -> {name}: {sum(counts.values())} recipients")
        for state, n in counts.items():
            if n:
                click.echo(f"  {state:<9} {n}")
        for line in _relays(settings, database, number, name):
            click.echo(line)
        for line in _tests(settings, database, number, name):
            click.echo(line)
        clock = database.backend.database_time()
        for worker in database.leases.workers(number, name, expired=True):
            doing = why_gone(worker, clock) or f"sending since {worker.started_at}"
            click.echo(
                f"  worker    {printable(worker.host)} pid {worker.pid}, {doing}"
                f" (last seen {worker.seen_at})"
            )
        for line in _after_sending(database, number, name, counts):
            click.echo(line)
        waiting = [s for s in DeliveryStatus if s != DeliveryStatus.SENT]
        rows = database.deliveries.rows(number, name, waiting)
        for row in rows[:limit]:
            code = row.smtp_code or ""
            reply = printable(f"{code} {row.smtp_reply}".strip())
            click.echo(f"  {row.state:<9} {printable(row.recipient)}  {reply}")
        if limit is not None and len(rows) > limit:
            click.echo(f"  ... and {len(rows) - limit} more (--all, or --csv FILE)")
    for line in _scheduled(database, number):
        click.echo(printable(line))
    if held := database.bounces.held_count():  # of every issue: they wait for the editor
        click.echo(f"{held} bounce report(s) held for review: see `newsletter bounces --held`")
    if csv_path is not None:
        rows = [r for name in names for r in database.deliveries.rows(number, name)]
        if str(csv_path) == "-":
            write_csv(rows, sys.stdout)
        else:
            with csv_path.open("w", encoding="utf-8", newline="") as handle:
                n = write_csv(rows, handle)
            click.echo(f"wrote {n} rows to {display_path(csv_path)}", err=True)


def _known_issue(settings: Settings, database: Database | None, number: int) -> None:
    """An issue with no file and nothing in the log (sent, scheduled, or a sequence step's key)
    is a mistyped number: an error naming the issues there are, not "nothing sent yet" and exit
    0. An issue whose file has since gone keeps its status while the log has it."""
    if number in list_issue_numbers(settings.issues_dir):
        return
    if database is not None and (
        database.deliveries.lists_of(number)
        or database.schedules.listing(issue=number, limit=1)
        or database.enrolments.step_of(number) is not None
    ):
        return
    issue_path(settings.issues_dir, number)  # raises: no such issue, the issues there are


def _relays(settings: Settings, database: Database, number: int, name: str) -> list[str]:
    """Which relay carried what (and holds what in doubt): shown once there are several."""
    carried = database.deliveries.by_relay(number, name)
    if len(carried) < 2 and not settings.smtp.relays:
        return []
    lines = []
    for relay, counts in carried.items():
        states = ", ".join(f"{n} {state}" for state, n in counts.items())
        lines.append(f"  relay     {printable(relay)}: {states}")
    return lines


def _scheduled(database: Database, number: int) -> list[str]:
    """The issue's scheduled sends (`newsletter schedule`): each waiting or running one, when
    (in its zone and UTC), who booked it and when; then each of the last RECENT seconds that
    did not send (missed, failed, stopped), with why."""
    schedules = database.schedules
    clock = schedules.database_time()
    lines = []
    for row in schedules.listing(issue=number, limit=1000):
        when = describe_instant(row.due_at, row.zone)
        head = f"issue {number} -> {row.list}: scheduled for {when}"
        if row.state in OPEN:
            if row.due_at > clock:
                head += f" (in {span(row.due_at - clock)})"
            booked = _moment(row.created_at)
            on = f" on {wall_clock(booked, row.zone)}" if booked is not None else ""
            lines.append(f"{head}: {row.state.value}, booked by {row.created_by}{on}")
        elif row.state in UNSENT and clock - (_moment(row.finished_at) or clock) <= RECENT:
            lines.append(f"{head}: {row.state.value}")
        else:
            continue
        lines += [f"    {line}" for line in row.outcome.split("\n") if line]
    return lines


def _moment(stamp: str | None) -> float | None:
    """An outbox time (ISO 8601) as Unix seconds."""
    try:
        return dt.datetime.fromisoformat(stamp).timestamp() if stamp else None
    except ValueError:
        return None


def _after_sending(
    database: Database, number: int, name: str, counts: dict[DeliveryStatus, int]
) -> list[str]:
    """What came back after the relay's 250 (`newsletter bounces`, and refusals at send time):
    hard bounces over the messages answered, complaints over the messages sent. Nothing before
    any message was answered."""
    answered = counts[DeliveryStatus.SENT] + counts[DeliveryStatus.REJECTED]
    if not answered:
        return []
    reports = database.bounces.counts(number, name)
    sent = counts[DeliveryStatus.SENT]
    hard, soft, complained = (reports.get(k, 0) for k in ("hard", "soft", "complaint"))
    left = database.send_figures.of(number, name).unsubscribed
    return [
        f"  bounced   {hard} ({hard / max(answered, 1):.1%} of {answered} answered)"
        + (f", and {soft} soft" if soft else ""),
        f"  complained {complained} ({complained / max(sent, 1):.2%} of {sent} sent)",
        f"  unsubscribed {left} ({left / max(sent, 1):.2%} of {sent} sent)",
    ]


def _tests(settings: Settings, database: Database, number: int, name: str) -> list[str]:
    """A staging list's tests, each its own run: when it began, why, and what it did (the
    latest one's counts are the lines above)."""
    chosen = settings.lists.get(name)
    if chosen is None or not chosen.staging:
        return []
    tests = database.test_sends.history(number, name)
    lines = []
    for test in tests:
        when = local_time(settings.newsletter.timezone, test.started_at)
        why = {"first": "", "changed": ", the message changed", "again": ", --again"}.get(
            test.reason, ""
        )
        if test.sent is None:
            done = "the counts above"
        else:
            done = f"{test.sent} of {test.recipients} sent" + (
                f", {test.outcome}" if test.outcome else ""
            )
        lines.append(f"  test {test.round:<4} at {when}{why}: {done}")
    return lines
