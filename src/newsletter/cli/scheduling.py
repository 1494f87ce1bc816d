"""Scheduled sends on the command line: `send --at` (booked here), `schedule` (the list) and
`schedule cancel`."""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from newsletter.cli.terminal import pass_context, printable
from newsletter.errors import ScheduleError
from newsletter.schedule.when import describe_instant, span

if TYPE_CHECKING:
    from newsletter.config.settings import Settings
    from newsletter.context import CommandContext
    from newsletter.database.schedules import Schedule

# The outbox (and with it the config's models) is imported where a schedule is read or booked:
# `send` wears this module's --at, and `send --help` should not load the database to say so.

# `send` options a scheduled send does not keep, and why (--rate and --concurrency it keeps).
NOT_KEPT = {
    "subjects": "--subjects does not go with --at: a subject test sends its sample now and"
    " books the rest itself (run `newsletter send --subjects A B` without --at)",
    "sample": "--sample goes with --subjects, which does not go with --at",
    "decide_after": "--decide-after goes with --subjects, which does not go with --at",
    "dry_run": "--at and --dry-run do not go together: a dry run writes the messages now"
    " (run `newsletter send --dry-run` alone to see them)",
    "out": "--out is for --dry-run, which does not go with --at",
    "processes": "--processes is not kept for a scheduled send: the worker's send runs in the"
    " processes of [send] processes in newsletter.toml (set it there); leave it out",
    "resend_unknown": "--resend-unknown is not kept for a scheduled send: it acts on what an"
    " earlier run left unknown, which is known only once the send has run; after it, run"
    " `newsletter send --resend-unknown` by hand",
    "retry_failed": "--retry-failed is not kept for a scheduled send: it retries what an"
    " earlier run left failed, which is known only once the send has run; after it, run"
    " `newsletter send --retry-failed` by hand",
}
F = TypeVar("F", bound=Callable[..., Any])


def at_options(func: F) -> F:
    """`send`'s --at and --timezone: with either, the send is booked (`schedule_send`) and
    `func` (the send now) is not called."""

    @functools.wraps(func)
    def wrapper(settings: Settings, /, *args: Any, **kwargs: Any) -> Any:
        at, zone = kwargs.pop("at"), kwargs.pop("zone")
        if at is None and zone is None:
            return func(settings, *args, **kwargs)
        number, list_name = kwargs["number"], kwargs["list_name"]
        schedule_send(
            settings,
            number,
            list_name,
            at,
            zone,
            yes=kwargs["yes"],
            rate=kwargs["rate"],
            concurrency=kwargs["concurrency"],
        )
        return None

    timezone = click.option(
        "--timezone",
        "zone",
        default=None,
        metavar="ZONE",
        help="The time zone of --at, e.g. Asia/Shanghai (default: [newsletter] timezone, else"
        " the machine's).",
    )
    at = click.option(
        "--at",
        default=None,
        metavar="TIME",
        help='Schedule the send instead of sending now: "2026-12-02 08:00", "today 18:00" or'
        ' "tomorrow 08:00" (in --timezone; or with an offset, "2026-12-02 08:00 +08:00"), at'
        " most 366 days ahead; the issue is checked now, `newsletter worker` starts it then,"
        " with the --rate and --concurrency given here.",
    )
    return at(timezone(wrapper))  # type: ignore[return-value]


def schedule_send(
    settings: Settings,
    number: int,
    list_name: str,
    at: str | None,
    zone: str | None,
    *,
    yes: bool,
    rate: float | None = None,
    concurrency: int | None = None,
) -> None:
    """`send --at TIME [--timezone ZONE] [--rate R] [--concurrency C]`: check the issue now,
    book the send (keeping --rate and --concurrency for it), return."""
    if at is None:
        raise click.UsageError("--timezone is the zone of --at: give --at TIME with it")
    params = click.get_current_context().params
    for name, why in NOT_KEPT.items():
        if params.get(name) not in (None, False):
            raise click.UsageError(why)
    staging = settings.mailing_list(list_name).staging
    if not staging and not yes:
        if not sys.stdin.isatty():
            raise ScheduleError(
                f"refusing to schedule issue {number} to the {list_name!r} list without"
                " confirmation",
                hint="Re-run with --yes to confirm (no terminal to ask on).",
            )
        if not click.confirm(
            f"Schedule issue {number} to the {list_name!r} list for {at}?", default=False
        ):
            click.echo("Nothing scheduled.")
            sys.exit(1)
    from newsletter.context import CommandContext
    from newsletter.schedule.booking import book_send  # the checks: only when booking

    with CommandContext(settings) as context:
        booked = book_send(context, number, list_name, at, zone, rate=rate, concurrency=concurrency)
    for warning in booked.warnings:
        click.secho(printable(str(warning)), fg="yellow")
    schedule = booked.schedule
    from newsletter.database.schedules import kept_options

    left = span(schedule.due_at - time.time())
    kept = " ".join(kept_options(schedule))
    click.echo(
        f"scheduled: issue {number} -> {list_name} at "
        f"{describe_instant(schedule.due_at, schedule.zone)}"
        f" (in {left})" + (f", sent with {kept}" if kept else "")
    )
    click.echo(
        "hint: `newsletter worker` starts it then, after checking the issue again (keep one"
        f" running); `newsletter schedule` lists, `newsletter schedule cancel --issue {number}"
        f" --list {list_name}` cancels.",
        err=True,
    )


@click.group(invoke_without_command=True)
@click.option("--issue", "number", type=int, default=None, help="Only this issue's schedules.")
@click.option("--all", "show_all", is_flag=True, help="Every schedule (default: the last 50).")
@pass_context
def schedule(context: CommandContext, number: int | None, show_all: bool) -> None:
    """List the scheduled sends: issue, list, when (in its zone and UTC), state, the workers
    that started it, the --rate and --concurrency it keeps, and its outcome. Waiting ones
    first, by time; then the latest ended.

    \b
    States:
      due        waiting for its time (`newsletter worker` starts it), or for a send of
                 the same issue and list begun by hand to end (looked at again each poll)
      started    a worker runs the send now
      done       the send ran to its end (its summary line; `newsletter status` for more),
                 or it was sent by hand before its time (then nothing was started)
      failed     not sent: the issue failed its check, or the send refused to start
      stopped    the send stopped (breaker, quota, rates): resume with `newsletter send`
      missed     no worker ran within [schedule] grace after its time: not sent
      cancelled  `newsletter schedule cancel`

    Schedule with `newsletter send --issue N --at TIME`.
    """
    if click.get_current_context().invoked_subcommand is not None:
        return
    database = context.existing_database()
    if database is None:
        click.echo("no scheduled sends (no outbox yet)")
        return
    schedules = database.schedules
    rows = schedules.listing(issue=number, limit=1_000_000 if show_all else 50)
    clock = schedules.database_time()
    if not rows:
        click.echo("no scheduled sends" + (f" of issue {number}" if number is not None else ""))
    for row in rows:
        click.echo(_line(row, clock))
        for line in row.outcome.split("\n") if row.outcome else ():
            click.echo(f"    {printable(line)}")


def _line(row: Schedule, clock: float) -> str:
    from newsletter.database.schedules import OPEN, kept_options

    when = describe_instant(row.due_at, row.zone)
    if row.state in OPEN and row.due_at > clock:
        when += f", in {span(row.due_at - clock)}"
    who = f"started by {row.started_by}" if row.started_by else f"booked by {row.created_by}"
    kept = " ".join(kept_options(row))
    who += f"; sent with {kept}" if kept else ""
    return printable(f"issue {row.issue} -> {row.list}  {when}  {row.state.value}  ({who})")


@schedule.command()
@click.option("--issue", "number", type=int, required=True, help="Issue number.")
@click.option("--list", "list_name", default=None, help="Only this list (default: every list).")
@pass_context
def cancel(context: CommandContext, number: int, list_name: str | None) -> None:
    """Cancel a scheduled send that has not started. A started one is a send under way: stop
    its worker, or let it finish."""
    database = context.existing_database()
    if database is None:
        raise ScheduleError(f"issue {number} has no scheduled send (no outbox yet)")
    from newsletter.schedule.booking import booked_by

    schedules = database.schedules
    cancelled = schedules.cancel(number, list_name, booked_by())
    running = [
        s
        for s in schedules.listing(issue=number, limit=1000)
        if s.state.value == "started" and list_name in (None, s.list)
    ]
    for row in cancelled:
        click.echo(
            f"cancelled: issue {row.issue} -> {row.list} ({describe_instant(row.due_at, row.zone)})"
        )
    if running:
        names = ", ".join(s.list for s in running)
        click.echo(f"not cancelled: issue {number} -> {names}: the send has started", err=True)
    if not cancelled:
        target = f" to {list_name!r}" if list_name else ""
        raise ScheduleError(
            f"issue {number}{target} has no scheduled send waiting to be cancelled",
            hint="`newsletter schedule` lists the scheduled sends.",
        )
