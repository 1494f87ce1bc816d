"""Welcome sequences on the command line: `sequences` (each sequence, its steps, readers at each,
the next sends due), `sequences enrol` and `sequences test`."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from newsletter.checks.findingformats import text_line
from newsletter.cli.terminal import fail, pass_context, printable
from newsletter.config.settings import DEFAULT_LIST
from newsletter.context import CommandContext
from newsletter.errors import DatabaseError
from newsletter.issues.sequencefiles import FOLDER
from newsletter.models import DeliveryStatus
from newsletter.schedule.when import describe_instant, span
from newsletter.send import coordinator
from newsletter.send.job import Options
from newsletter.sequences.overview import SequenceView, check_sequence, enrol, survey
from newsletter.sequences.testing import prepare_step_test


@click.group(invoke_without_command=True)
@pass_context
@click.pass_context
def sequences(ctx: click.Context, context: CommandContext) -> None:
    """List the welcome sequences (sequences/NAME/NN-slug.md): each step, when it goes, how
    many readers are at it, what the delivery log holds for it and when it next falls due.
    `newsletter worker` sends the steps; `newsletter status --issue KEY` shows a step's log."""
    if ctx.invoked_subcommand is not None:
        return
    settings = context.settings
    views = survey(settings, context.database)
    if not views:
        click.echo(
            f"no sequences: write {FOLDER}/welcome/01-hello.md (see docs/guide/sequences.md)"
        )
        return
    zone = settings.newsletter.timezone
    for seq in views:
        click.echo(_heading(seq))
        for step in seq.steps:
            clock = "joining" if step.from_joining else "the previous step"
            sent = ", ".join(f"{n} {s}" for s, n in step.counts.items() if n) or "none yet"
            tests = ", ".join(f"{n} {s}" for s, n in step.tests.items() if n)
            due = (
                "none waiting"
                if step.next_due is None or not step.waiting
                else f"next due {describe_instant(step.next_due, zone)}"
            )
            click.echo(
                f"  {step.name}  {printable(step.title)}  after {span(step.after)} from {clock};"
                f" key {step.key}; at this step {step.at_step}, waiting {step.waiting}, {due};"
                f" log: {sent}" + (f"; tests on staging lists: {tests}" if tests else "")
            )


def _heading(seq: SequenceView) -> str:
    lists = ", ".join(seq.lists)
    return (
        f"{seq.name} (new readers of {lists}; {seq.joined} joined,"
        f" {seq.not_started} of them with no step yet)"
    )


@sequences.command(name="enrol")
@click.argument("name")
@click.option("--list", "list_name", required=True, help="The list whose readers join.")
@pass_context
def enrol_list(context: CommandContext, name: str, list_name: str) -> None:
    """Every confirmed reader of --list joins sequence NAME at its first step (readers already
    on a list do not join by themselves: only new ones do, as they confirm). Readers in it
    already stay where they are."""
    settings = context.settings
    settings.mailing_list(list_name)
    folder = settings.resolve(Path(FOLDER))
    joined = enrol(folder, context.database, name, list_name, time.time())
    click.echo(
        f"{joined} reader(s) of {list_name} joined {name}; `newsletter worker` sends the steps"
    )


@sequences.command(name="check")
@click.argument("name")
@click.option(
    "--list",
    "list_name",
    default=DEFAULT_LIST,
    show_default=True,
    help="The list whose headers the sample carries.",
)
@pass_context
def check_steps(context: CommandContext, name: str, list_name: str) -> None:
    """Check every step of sequence NAME as `newsletter check` checks an issue (offline): the
    same render, sample message and findings. Exit 1 when a step has an error."""
    errors = 0
    for step, found in check_sequence(context.settings, name, list_name, context.first_sent()):
        click.echo(f"{step.name}: {len(found)} finding(s)")
        for finding in found:
            click.echo(f"  {text_line(finding)}")
        errors += sum(1 for f in found if f.level == "error")
    if errors:
        click.echo(f"{errors} error(s): fix them before readers join", err=True)
        sys.exit(1)


@sequences.command(name="test")
@click.argument("name")
@click.option("--step", "number", type=int, required=True, help="The step's number (its NN).")
@click.option("--list", "list_name", required=True, help="A staging list.")
@pass_context
def test_step(context: CommandContext, name: str, number: int, list_name: str) -> None:
    """Send step --step of sequence NAME to a staging list now (again at each call), as the
    worker sends it to readers."""
    settings, database = context.settings, context.database
    prepared = prepare_step_test(settings, database, name, number, list_name)
    try:
        report = coordinator.send(prepared, database, Options.merged(settings))
    except DatabaseError as exc:
        fail(exc, 4)
    parts = [f"{report.counts[s]} {s}" for s in DeliveryStatus if report.counts.get(s)]
    click.echo(f"{name} step {number} -> {list_name}: {', '.join(parts) or 'no recipients'}")
    if report.stopped:
        click.secho(f"stopped: {printable(report.stopped)}", fg="yellow", err=True)
    sys.exit(0 if report.complete else 3)
