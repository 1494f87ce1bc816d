"""`newsletter subscribers add|remove|import|export|forget|show`: the editor's side of the
subscribers in the outbox (`newsletter subscribers` alone, the lists' report, is in lists.py)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from newsletter.cli.terminal import pass_context, printable
from newsletter.config.settings import DEFAULT_LIST, Settings
from newsletter.database.consent import ConsentEvent, ConsentLedger
from newsletter.database.roster import Roster, Status
from newsletter.errors import ExportFileError, NewsletterError, display_path
from newsletter.importers import FORMATS, read_export
from newsletter.importers.subscribers import Refusal, check_entry, fold_address
from newsletter.mail.tokens import SigningKey, signing_key
from newsletter.signup.forgetting import forget as erase
from newsletter.signup.forgetting import forgotten_test, unforget
from newsletter.signup.imports import import_export
from newsletter.signup.pending import mailbox_key
from newsletter.signup.record import EXPORT_COLUMNS, export_rows, person_record
from newsletter.spreadsheet import write_rows

list_option = click.option(
    "--list", "list_name", default=DEFAULT_LIST, show_default=True, help="The list."
)

if TYPE_CHECKING:
    # Loaded when the command runs (terminal.context_passer), not by its --help.
    from newsletter.context import CommandContext


def _address(raw: str, name: str = "") -> tuple[str, str, str]:
    """(envelope, key, name) of an address as a list row would take it; else a clear error."""
    checked = check_entry(raw, name)
    if isinstance(checked, Refusal):
        raise NewsletterError(
            f"{raw!r}: {checked.field or 'address'} {checked.reason}",
            hint="Pass the address as the person gave it (and a plain --name).",
        )
    envelope, clean = checked
    return envelope, fold_address(envelope), clean


def _key(settings: Settings) -> SigningKey:
    return signing_key(settings, allow_ephemeral=True)


@click.command()
@click.argument("address")
@click.option("--name", default="", help="The subscriber's name (the greeting uses it).")
@list_option
@pass_context
def add(context: CommandContext, address: str, name: str, list_name: str) -> None:
    """Add ADDRESS to a list as a confirmed subscriber (their consent is yours to show: it is
    recorded as the editor's, source `cli`). Someone who left comes back; someone erased on
    request (`forget`) does not, until `forget --undo`."""
    settings = context.settings
    settings.mailing_list(list_name)
    envelope, key, clean = _address(address, name)
    database = context.database
    backend = database.backend
    if forgotten_test(backend, _key(settings))(key):
        raise NewsletterError(
            f"{key} was erased on request (`newsletter subscribers forget`): not added",
            hint="If they asked to come back, run `newsletter subscribers forget --undo"
            f" {key}` first.",
        )
    with backend.transaction():
        before = Roster(backend).add(list_name, envelope, key, mailbox_key(envelope), clean, "cli")
        if before is not Status.CONFIRMED:
            ConsentLedger(backend).record(ConsentEvent(list_name, key, "add", source="cli"))
    suppressed = database.suppressions.get(list_name, key)
    state = {
        None: "added to",
        Status.PENDING: "was waiting to confirm: now confirmed on",
        Status.CONFIRMED: "was already on",
        Status.LEFT: "had left: back on",
    }[before]
    click.echo(printable(f"{key} {state} {list_name!r}"))
    if suppressed is not None:
        click.echo(
            printable(
                f"note: {key} is suppressed on {list_name!r} ({suppressed.source}): it is not"
                f" mailed until `newsletter unsubscribe {key} --list {list_name} --undo`"
            ),
            err=True,
        )


@click.command()
@click.argument("address")
@list_option
@pass_context
def remove(context: CommandContext, address: str, list_name: str) -> None:
    """Take ADDRESS off a list's subscribers in the outbox (their row stays, as `left`; the
    ledger records it). A CSV that names the address still sends to it: `newsletter
    unsubscribe` stops that too. Exit 1 if the address was not a subscriber there."""
    context.settings.mailing_list(list_name)
    _, key, _ = _address(address)
    database = context.existing_database()  # none: nobody to remove, and no log made for it
    before = None
    if database is not None:
        backend = database.backend
        with backend.transaction():
            before = Roster(backend).leave(list_name, key)
            if before not in (None, Status.LEFT):
                event = ConsentEvent(list_name, key, "unsubscribe", source="cli")
                ConsentLedger(backend).record(event)
    if before in (None, Status.LEFT):
        click.echo(printable(f"{key} is not a subscriber of {list_name!r}"), err=True)
        sys.exit(1)
    click.echo(printable(f"{key} removed from {list_name!r}"))


@click.command(name="import")
@click.argument("file", type=click.Path(path_type=Path))
@click.option(
    "--format",
    "tool",
    type=click.Choice(list(FORMATS)),
    default=None,
    help="The tool that exported FILE (default: told from its header).",
)
@list_option
@click.option(
    "--unsubscribed",
    is_flag=True,
    help="Every row is someone who unsubscribed (an export of unsubscribes whose rows do not say).",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Run the import and report its counts, then roll it back: write nothing.",
)
@pass_context
def import_(
    context: CommandContext,
    file: Path,
    tool: str | None,
    list_name: str,
    unsubscribed: bool,
    dry_run: bool,
) -> None:
    """Import another tool's export (Mailchimp's audience ZIP or CSVs, Substack's
    email_list CSV, Ghost, Buttondown, listmonk, or this tool's CSV) into a list: subscribers
    with the consent the tool recorded, and its unsubscribed, cleaned or disabled people as
    suppressions (never as recipients). Every refused row is printed as file:line: field:
    reason. All rows or none: a file damaged halfway imports nothing.

    Exit 0: no row was invalid (duplicates and the rows a tool marks erased or unconfirmed
    are refused and listed, as expected); 1: some rows were invalid (the others are in)."""
    settings = context.settings
    settings.mailing_list(list_name)
    export = read_export(file, tool, unsubscribed=unsubscribed)
    for part in export.parts:
        click.echo(printable(part.describe()), err=True)
    for skipped in export.report.skipped:
        click.echo(printable(f"skipped: {skipped}"), err=True)

    def show_refused(problem: object) -> None:
        click.echo(printable(str(problem)))

    try:
        with export:
            done = import_export(
                context.database,
                export,
                list_name,
                _key(settings),
                settings=settings,
                on_refused=show_refused,
                dry_run=dry_run,
            )
    except ExportFileError as exc:
        raise NewsletterError(exc.message + " (nothing was imported)", hint=exc.hint) from None
    report = done.report
    for warning in report.warnings:
        click.echo(printable(f"warning: {warning}"), err=True)
    if report.warning_count > len(report.warnings):
        click.echo(f"... and {report.warning_count - len(report.warnings)} more warnings", err=True)
    here = len(done.refused)
    why = [f"{n} {kind}" for kind, n in sorted(report.refused.items())]
    why += [f"{here} left or erased here"] if here else []
    refused = report.refused_count + here
    verb = "would import" if dry_run else "imported"
    click.echo(
        f"{display_path(file)} -> {list_name!r}: {report.rows} row(s): {verb}"
        f" {report.imported - here} subscriber(s) ({done.added} new, {done.updated} already"
        f" there), {report.suppressed} suppressed ({done.suppressed} new), {refused} refused"
        + (f" ({', '.join(why)})" if why else "")
    )
    if report.refused["invalid"]:
        click.echo("fix the refused rows and import the file again: rows in are kept", err=True)
        sys.exit(1)


@click.command()
@list_option
@click.option(
    "--out",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    default=Path("-"),
    show_default=True,
    help="The CSV file to write (- for standard output).",
)
@pass_context
def export(context: CommandContext, list_name: str, out: Path) -> None:
    """Write a list's subscribers in the outbox as CSV, with their consent columns
    (subscribed_at, subscribed_ip, confirmed_at, confirmed_ip, source): those who left or are
    suppressed as `unsubscribed`. Signups never confirmed are left out. `newsletter
    subscribers import --format csv` reads it back; every cell is safe for a spreadsheet."""
    context.settings.mailing_list(list_name)
    database = context.existing_database()
    written = _write(out, [] if database is None else export_rows(database, list_name))
    where = "" if str(out) == "-" else f" to {display_path(out)}"
    click.echo(f"{written} subscriber(s) of {list_name!r} exported{where}", err=True)


def _write(out: Path, rows: object) -> int:
    if str(out) == "-":
        return write_rows(EXPORT_COLUMNS, rows, sys.stdout)  # type: ignore[arg-type]
    with out.open("w", encoding="utf-8", newline="") as handle:
        return write_rows(EXPORT_COLUMNS, rows, handle)  # type: ignore[arg-type]


@click.command()
@click.argument("address")
@click.option("--yes", is_flag=True, help="Do not ask (it cannot be undone).")
@click.option("--undo", is_flag=True, help="Lift an erasure's hash: ADDRESS may be mailed again.")
@pass_context
def forget(context: CommandContext, address: str, yes: bool, undo: bool) -> None:
    """Erase everything kept about ADDRESS (GDPR Article 17): their subscriptions on every list,
    consent events, site mail, suppressions, click events, and their address in the delivery
    log. Kept: a keyed hash of the address, so they are never mailed again (a CSV that still
    names them included), and the delivery log's rows without the address, so the sends'
    counts add up. A SQLite outbox is checkpointed after, so the erased rows are not left in
    the file's or its WAL's bytes."""
    _, key, _ = _address(address)
    signing = signing_key(context.settings, allow_ephemeral=False)
    backend = context.database.backend
    if undo:
        lifted = unforget(backend, signing, key)
        click.echo(f"{key} {'may be mailed again' if lifted else 'was not forgotten'}")
        return
    if not yes:
        if not sys.stdin.isatty():
            raise NewsletterError(
                f"refusing to erase {key} without confirmation",
                hint="Re-run with --yes (no terminal to ask on).",
            )
        click.confirm(f"Erase everything kept about {key}? It cannot be undone.", abort=True)
    done = erase(backend, signing, key)
    click.echo(
        printable(
            f"{key} erased: {done.memberships} subscription(s), {done.consent_events} consent"
            f" event(s), {done.site_mail} site mail(s), {done.suppressions} suppression(s),"
            f" {done.claims} confirmation claim(s), {done.clicks} click event(s),"
            f" {done.bounce_reports} bounce report(s)"
        )
    )
    click.echo(
        f"kept: a keyed hash of the address ({done.digest[:12]}…) so it is never mailed again,"
        f" and {done.deliveries} delivery row(s) without the address (the sends' counts)"
        + (" (it was forgotten before)" if done.already else "")
    )
    if not done.settled:
        click.echo(
            "warning: the outbox's write-ahead log could not be truncated (a reader held it"
            " open): the erased data stays in its bytes until the next checkpoint; run the"
            " same forget again once `serve` and the worker are idle",
            err=True,
        )


@click.command()
@click.argument("address")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: the record to hand over.")
@pass_context
def show(context: CommandContext, address: str, as_json: bool) -> None:
    """Print everything kept about ADDRESS (GDPR Article 15): lists and status, every consent
    event (when, from where, what they agreed to), the site's mail to them, suppressions, and
    every issue sent to them. --json writes the record as one object to give the person."""
    _, key, _ = _address(address)
    database = context.existing_database()
    if database is None:
        raise NewsletterError(f"nothing is kept about {key}: there is no outbox yet")
    record = person_record(database, _key(context.settings), key)
    if as_json:
        click.echo(json.dumps(record.as_json(), ensure_ascii=False, indent=2))
        return
    if record.forgotten_at:
        click.echo(
            f"{key}: erased on request at {record.forgotten_at}: only its keyed hash is kept"
        )
    elif record.empty:
        click.echo(f"{key}: nothing is kept about this address")
    for m in record.memberships:
        click.echo(
            printable(
                f"list {m.list}: {m.status} ({m.source}) since {m.created_at}"
                + (f", confirmed {m.confirmed_at}" if m.confirmed_at else "")
                + (f", left {m.left_at}" if m.left_at else "")
                + (f", name {m.name!r}" if m.name else "")
            )
        )
    for e in record.consent:
        where = " ".join(x for x in (e.ip, e.source) if x)
        extra = f" {json.dumps(dict(e.evidence), ensure_ascii=False)}" if e.evidence else ""
        version = f" consent v{e.text_version} {e.text_hash[:12]}" if e.text_hash else ""
        click.echo(printable(f"  {e.at}  {e.list}  {e.event}  {where}{version}{extra}"[:2000]))
        if e.user_agent:
            click.echo(printable(f"      user agent: {e.user_agent}"))
    for mail in record.site_mail:
        click.echo(
            printable(
                f"  site mail {mail.id}: {mail.kind} on {mail.list}: {mail.state}"
                f" ({mail.created_at})"
            )
        )
    for list_name, source, since in record.suppressions:
        click.echo(printable(f"  suppressed on {list_name} ({source}) since {since}"))
    for sequence, list_name, step, joined in record.enrolments:
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(joined))
        click.echo(printable(f"  sequence {sequence} on {list_name}: step {step} (joined {when})"))
    for issue, list_name, state, sent, _ in record.deliveries:
        click.echo(
            printable(f"  issue {issue} to {list_name}: {state}" + (f" {sent}" if sent else ""))
        )


SUBCOMMANDS: dict[str, click.Command] = {
    "add": add,
    "remove": remove,
    "import": import_,
    "export": export,
    "forget": forget,
    "show": show,
}
