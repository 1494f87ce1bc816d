"""Sending: `send` (with its progress display); `send --at` hands over to scheduling.py."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import click

from newsletter.cli.scheduling import at_options
from newsletter.cli.subjecttests import subject_options
from newsletter.cli.terminal import (
    fail,
    issue_option,
    list_counts,
    pass_settings,
    printable,
)
from newsletter.errors import DeliveryError, display_path
from newsletter.fields import DEFAULT_LIST

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from newsletter.config.settings import Settings
    from newsletter.gate import SendVerdict
    from newsletter.importers.subscribers import ListReport
    from newsletter.models import DeliveryStatus
    from newsletter.send.job import Event
    from newsletter.send.preparation import Prepared
    from newsletter.send.testsend import TestDecision
    from newsletter.subjects.run import SubjectRequest

# The send's stack (the checks, the render, the outbox, the engine: ~0.25 s of imports on a quiet
# machine, ~1 s loaded) is imported when a send runs, not when `send --help` or a usage error
# only needs the options.


@click.command()
@issue_option
@click.option(
    "--list",
    "list_name",
    default=DEFAULT_LIST,
    show_default=True,
    help="The list to send to; `--list staging` is the test send.",
)
@click.option("--yes", is_flag=True, help="Send without asking (required without a terminal).")
@click.option(
    "--concurrency",
    type=click.IntRange(1, 64),
    default=None,
    help="SMTP connections at once (default: [send] concurrency).",
)
@click.option(
    "--rate",
    type=click.FloatRange(min=0),
    default=None,
    help="Messages per second, 0 = unlimited (default: [send] rate).",
)
@click.option(
    "--resend-unknown",
    is_flag=True,
    help="Also resend recipients whose outcome is unknown, under the same Message-ID.",
)
@click.option(
    "--retry-failed",
    is_flag=True,
    help="Also retry recipients that failed (the message could not be built, or the server"
    " refused the message itself).",
)
@click.option(
    "--processes",
    type=click.IntRange(1, 16),
    default=None,
    help="Worker processes sharing the connections (default: [send] processes).",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Send nothing: write each recipient's message as an .eml file into --out instead.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder for --dry-run (default: out/ISSUE-LIST); an earlier dry run's files are replaced.",
)
@click.option(
    "--force",
    is_flag=True,
    help="Send even though `check` finds errors (they are still shown).",
)
@click.option(
    "--again",
    is_flag=True,
    help="A test send (staging list): send it again even if the message did not change.",
)
@click.option(
    "--online/--offline",
    default=None,
    help="Run the online checks before sending too (default: [check] online).",
)
@pass_settings
@at_options
@subject_options
def send(
    settings: Settings,
    number: int,
    list_name: str,
    yes: bool,
    force: bool,
    again: bool,
    online: bool | None,
    concurrency: int | None,
    rate: float | None,
    resend_unknown: bool,
    retry_failed: bool,
    dry_run: bool,
    out: Path | None,
    processes: int | None,
    subjects: SubjectRequest | None,
) -> None:
    """Deliver an issue to every subscriber of a list over SMTP, recording each delivery.

    Runs `check` first (offline; online too with --online or [check] online) and refuses on
    an error unless --force. Sending to a list that is not a staging list asks first, showing
    the subject, the recipients, the list's rejected rows (counted, the first few named), the
    size against Gmail's clip and the spam score.

    Re-running the same command resumes: sent and rejected recipients are never sent again,
    deferred ones are retried. A test send (a `staging = true` list) goes out again when the
    message changed since the last test, or with --again; unchanged, it sends nothing.

    With --dry-run nothing is sent and nothing is logged: every recipient's message is written
    to --out as an .eml file, exactly the bytes the SMTP server would get.

    With --at TIME it is scheduled instead: checked now, started then by `newsletter worker`.

    With --subjects A B it is a subject test: a --sample of the list now, each reader one of the
    subjects; after --decide-after, `newsletter worker` sends the rest the one people clicked
    more (re-running by hand after that time does the same).

    \b
    Exit codes:
      0  every recipient sent (or skipped: unsubscribed); a test send unchanged
         since the latest test (nothing sent)
      1  error before sending, `check`'s errors included (nothing was sent)
      3  finished, but some recipients are rejected, failed, unknown or still deferred
      4  stopped (circuit breaker, quota, Ctrl-C, a fault of the delivery log): re-run
         the same command to resume
    """
    staging = settings.mailing_list(list_name).staging
    if again and not staging:
        raise click.UsageError(
            f"--again repeats a test send; {list_name!r} is not a staging list, and a real"
            " list gets each issue exactly once (re-running resumes it)"
        )
    if dry_run:
        if force or again:
            raise click.UsageError("--force and --again are for a send, not --dry-run")
        _dry_run(
            settings, number, list_name, out or settings.root / "out" / f"{number}-{list_name}"
        )
        return
    if out is not None:
        raise click.UsageError("--out is only used with --dry-run")
    from newsletter.api import Project
    from newsletter.send.job import Options

    options = Options.merged(
        settings,
        concurrency=concurrency,
        rate=rate,
        processes=processes,
        resend_unknown=resend_unknown,
        retry_failed=retry_failed,
    )
    with Project(settings) as project:  # the command's one context: one database connection
        outcome = project.send(
            number,
            list_name,
            force=force,
            again=again,
            online=online,
            ask=not yes,
            options=options,
            listener=_Terminal(
                number, list_name, force=force, base_url=settings.newsletter.base_url
            ),
            subjects=subjects,
        )
    if outcome.fault is not None:
        fail(outcome.fault, outcome.exit_code)
    if outcome.declined:
        click.echo("Nothing sent.")
    report = outcome.report
    if report is not None:
        # What reading the list found (rejected rows), if this worker planned.
        if report.list_report is not None:
            _report_list(report.list_report)
        click.echo(report.summary())
        if report.stopped:
            click.secho(f"stopped: {printable(report.stopped)}", fg="yellow", err=True)
            click.echo("hint: Re-run the same command to resume.", err=True)
        elif not report.complete:
            click.echo(f"hint: `newsletter status --issue {number} --list {list_name}`", err=True)
    sys.exit(outcome.exit_code)


class _Terminal:
    """The send's Listener on the command line: the checks as `check` words them, the test
    decision, the question on a terminal (refused without one: --yes says yes), the progress."""

    def __init__(self, number: int, list_name: str, *, force: bool, base_url: str) -> None:
        self.label = f"issue {number} -> {list_name}"
        self.force = force
        self.base_url = base_url

    def checked(self, verdict: SendVerdict) -> None:
        from newsletter.cli.gatekeeping import show_verdict

        show_verdict(verdict, force=self.force)

    def tested(self, decision: TestDecision) -> None:
        if decision.message:
            click.echo(f"{self.label}: {decision.message}")

    def phased(self, line: str) -> None:
        click.echo(line)

    def notice(self, line: str) -> None:
        click.secho(line, fg="yellow", err=True)

    def confirm(self, verdict: SendVerdict, prepared: Prepared) -> bool:
        job = prepared.job
        if not sys.stdin.isatty():
            raise DeliveryError(
                f"refusing to send issue {job.issue} to the {job.list_name!r} list without"
                " confirmation",
                hint="Re-run with --yes to confirm (no terminal to ask on).",
            )
        from newsletter.cli.gatekeeping import confirmation

        counted = prepared.survey()
        click.echo(
            confirmation(
                verdict,
                counted,
                server=prepared.server,
                sender=prepared.sender,
                base_url=self.base_url,
            )
        )
        return click.confirm("Send now?", default=False)

    def running(self, prepared: Prepared) -> _SendDisplay:
        return _SendDisplay(prepared.job.issue, prepared.job.list_name)


def _dry_run(settings: Settings, number: int, list_name: str, out: Path) -> None:
    from newsletter.context import CommandContext
    from newsletter.send import preparation

    with CommandContext(settings) as context:
        result = preparation.dry_run(context, number, list_name, out)
    if result.ephemeral_key:
        click.echo(
            "note: NEWSLETTER_SECRET is not set: unsubscribe links are signed with a throwaway key",
            err=True,
        )
    _report_list(result.list_report)
    if result.removed:
        click.echo(f"replaced {result.removed} .eml file(s) from an earlier dry run", err=True)
    click.echo(list_counts(list_name, result.list_report))
    click.echo(
        f"dry run: wrote {result.written} message(s) to {display_path(out)}/ (nothing was sent)"
    )


def _report_list(report: ListReport) -> None:
    for line in report.skipped_lines():
        click.echo(line, err=True)


class _SendDisplay:
    """A rich progress bar on a terminal (redrawn ten times a second at most); otherwise a line
    per problem and one every 5 s. A sent message costs a counter, not a redraw."""

    def __init__(self, number: int, list_name: str) -> None:
        self.label = f"issue {number} -> {list_name}"
        self.started = time.monotonic()
        self.last_line = self.started
        self.sent = 0
        self.tty = sys.stdout.isatty()
        self.progress: Progress | None = None
        self.task: TaskID | None = None
        self.counts: Mapping[DeliveryStatus, int] = {}
        from newsletter.models import DeliveryStatus  # with the send, which loaded it

        self.states = DeliveryStatus  # read per message: not an import each time

    def __enter__(self) -> _SendDisplay:
        if self.tty:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            self.progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[states]}"),
                TextColumn("{task.fields[rate]}"),
                TimeRemainingColumn(),
            )
            self.progress.start()
            # The total is the log's rows, known from the first event on.
            self.task = self.progress.add_task(self.label, total=None, states="", rate="")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self._show(time.monotonic())
            self.progress.stop()

    def __call__(self, event: Event) -> None:
        self.counts = event.counts
        if event.state == self.states.SENT:
            self.sent += 1
        else:
            reply = event.result.describe() if event.result else ""
            line = printable(f"{event.state}: {event.recipient} {reply}")
            if self.progress is not None:
                self.progress.console.print(line, markup=False, highlight=False)
            else:
                click.echo(line)
        now = time.monotonic()
        if now - self.last_line >= (0.1 if self.progress is not None else 5.0):
            self.last_line = now
            self._show(now)

    def _show(self, now: float) -> None:
        from newsletter.send.job import progress_figures, progress_line  # loaded by the send

        rate = self.sent / max(now - self.started, 1e-3)
        if self.progress is not None and self.task is not None:
            done, total, states = progress_figures(self.counts)
            self.progress.update(
                self.task, completed=done, total=total, states=states, rate=f"{rate:.0f} msg/s"
            )
        else:
            click.echo(progress_line(self.label, self.counts, rate))
