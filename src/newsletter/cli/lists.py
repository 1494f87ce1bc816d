"""The editor's commands on lists: `subscribers` (its subcommands are readers.py's),
`unsubscribe`, `suppressions` and `bounces`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from newsletter.bounces.collect import collect, describe_decision
from newsletter.bounces.inbox import open_inbox
from newsletter.bounces.origin import DkimKeys
from newsletter.bounces.policy import Policy, Verdict
from newsletter.bounces.retention import expire_reports
from newsletter.cli.terminal import (
    Group,
    every_list_option,
    list_counts,
    pass_context,
    printable,
)
from newsletter.config.settings import DEFAULT_LIST, Settings, nameserver_address
from newsletter.database import EDITOR_SOURCE, Database
from newsletter.database.bounces import DISMISSED
from newsletter.database.consent import ConsentEvent
from newsletter.database.roster import Status
from newsletter.errors import ConfigError, NewsletterError, display_path
from newsletter.importers.subscribers import address_key, check_list
from newsletter.mail.tokens import signing_key

if TYPE_CHECKING:
    # Loaded when the command runs (terminal.context_passer), not by its --help.
    from newsletter.context import CommandContext


class _Subcommands(Group):
    """`subscribers`' subcommands, from readers.py, imported only when one runs."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return ["add", "remove", "import", "export", "forget", "show"]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        from newsletter.cli.readers import SUBCOMMANDS

        return SUBCOMMANDS.get(cmd_name)


@click.group(cls=_Subcommands, invoke_without_command=True)
@every_list_option
@pass_context
@click.pass_context
def subscribers(ctx: click.Context, context: CommandContext, list_name: str | None) -> None:
    """Check the lists, or (with a command) manage the subscribers in the outbox.

    Alone: every rejected row of each list's CSV (file:line: field: reason), then per list the
    counts of valid, duplicate, invalid, unsubscribed and suppressed rows, and of its
    subscribers in the outbox (confirmed, pending, left). Suppressed means unsubscribed through
    a link (the delivery log's suppression list). Exit 0: every row is usable; 1: some rows were
    rejected (they are skipped when sending).
    """
    if ctx.invoked_subcommand is not None:
        return
    settings, database = context.settings, context.existing_database()
    names = [list_name] if list_name else sorted(settings.lists)
    if not names:
        raise ConfigError("no lists in the config", hint="Add a [lists.main] table with a `path`.")
    rejected = 0
    for name in names:
        csv = settings.mailing_list(name).path
        suppressed: frozenset[str] = frozenset()
        members: dict[Status, int] = {}
        if database is not None:
            suppressed = database.suppressions.addresses(name)
            members = database.roster.counts(name)
        if csv is not None:
            report = check_list(
                Path(display_path(settings.resolve(csv))),
                suppressed=suppressed,
                on_reject=lambda problem: click.echo(printable(str(problem))),
            )
            click.echo(list_counts(name, report))
            rejected += report.rejected_count
        if members or csv is None or settings.mailing_list(name).signup:
            counts = ", ".join(f"{members.get(s, 0)} {s}" for s in Status)
            click.echo(f"{name} (subscribers in the outbox): {counts}")
    if rejected:
        click.echo(f"{rejected} row(s) rejected: fix them, or they are skipped when sending")
        sys.exit(1)


@click.command()
@click.argument("address")
@click.option(
    "--list",
    "list_name",
    default=DEFAULT_LIST,
    show_default=True,
    help="The list to remove it from.",
)
@click.option("--undo", is_flag=True, help="Send to ADDRESS again (lift any suppression).")
@pass_context
def unsubscribe(context: CommandContext, address: str, list_name: str, undo: bool) -> None:
    """Never send to ADDRESS on a list again, as if the reader had unsubscribed (source `cli`;
    unlike the reader's own, their re-subscribe button cannot lift it). --undo lifts any."""
    context.settings.mailing_list(list_name)
    try:
        key = address_key(address)
    except ValueError as exc:
        raise NewsletterError(
            f"{address!r} is not an email address: {exc}", hint="Pass the address as subscribed."
        ) from None
    database = context.database
    if undo:
        lifted = database.suppressions.remove(list_name, key)
        state = "will be sent to again" if lifted else "was not unsubscribed"
        click.echo(f"{key} {state} on {list_name!r}")
        return
    before = database.suppressions.get(list_name, key)
    if database.suppressions.add(list_name, key, EDITOR_SOURCE):
        event = ConsentEvent(list_name, key, "unsubscribe", source="cli")
        database.consent.record(event)
    if before is None:
        state = "unsubscribed"
    elif before.source == EDITOR_SOURCE:
        state = "was already unsubscribed"
    else:
        # The reader's own unsubscribe becomes the editor's: their re-subscribe cannot lift it.
        state = f"was already unsubscribed by the reader ({before.source}), now by you"
    click.echo(f"{key} {state} from {list_name!r}; later sends to it skip this address")


@click.command()
@every_list_option
@pass_context
def suppressions(context: CommandContext, list_name: str | None) -> None:
    """List the addresses never sent to again: when, list, address and how (one-click: the
    mailbox's button; web: the confirm page; cli: `newsletter unsubscribe`)."""
    if list_name is not None:
        context.settings.mailing_list(list_name)
    database = context.existing_database()
    rows = [] if database is None else database.suppressions.all(list_name)
    for row in rows:
        click.echo(f"{row.created_at}  {row.list}  {printable(row.address)}  {row.source}")
    where = f" on {list_name!r}" if list_name is not None else ""
    click.echo(f"{len(rows)} suppressed address(es){where}", err=True)


@click.command()
@click.option(
    "--maildir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Read this Maildir folder instead of [bounces] imap (e.g. .newsletter/mailbox).",
)
@click.option(
    "--held", "show_held", is_flag=True, help="List the reports held for review, read nothing."
)
@click.option(
    "--accept",
    "accept",
    type=int,
    multiple=True,
    metavar="ID",
    help="Apply a held report as if proven (suppress by the policy); repeatable.",
)
@click.option(
    "--dismiss",
    "dismiss",
    type=int,
    multiple=True,
    metavar="ID",
    help="Drop a held report: it changes nothing, and its mail is filed next run; repeatable.",
)
@pass_context
def bounces(
    context: CommandContext,
    maildir: Path | None,
    show_held: bool,
    accept: tuple[int, ...],
    dismiss: tuple[int, ...],
) -> None:
    """Read bounces and complaints from the bounce mailbox ([bounces] imap, or --maildir DIR),
    record each against the send it is about and suppress by the [bounces] policy: a hard bounce
    or a complaint at once (bounced, complained), soft bounces after 3 in a row. Auto-replies
    never count; mail it does not understand stays where it was. Running it twice counts
    nothing twice.

    A report tied to its message only by a quoted Message-ID (no verified return-path tag) acts
    only when its sender is proven (the reader's own address, or their provider's mail system or
    feedback loop, DKIM-signed); otherwise it is held for review and left in the mailbox:
    --held lists those, --accept ID applies one, --dismiss ID drops it. A held report is deleted
    [privacy] held_retention_days (90) after it was held or decided."""
    settings = context.settings
    key = signing_key(settings, allow_ephemeral=True)
    secrets = key.previous if key.ephemeral else key.verifying
    if show_held or accept or dismiss:
        if maildir is not None:
            raise click.UsageError("--held, --accept and --dismiss read no mailbox: drop --maildir")
        database = context.existing_database()
        if database is None:
            if accept or dismiss:
                raise _not_held((accept + dismiss)[0])
            click.echo("0 report(s) held for review", err=True)
            return
        _expire_held(database, settings)
        _review(Policy(database, settings.bounces, secrets), show_held, accept, dismiss)
        return
    inbox = open_inbox(settings, maildir)
    if key.ephemeral:
        click.echo(
            "note: NEWSLETTER_SECRET is not set: return-path tags cannot be verified, so only"
            " reports that quote a Message-ID can be matched (and acted on only when their"
            " sender is proven)",
            err=True,
        )
    keys = DkimKeys(
        [nameserver_address(n) for n in settings.check.nameservers], settings.check.timeout
    )
    try:
        database = context.database
        _expire_held(database, settings)
        policy = Policy(database, settings.bounces, secrets, keys)
        tally = collect(inbox, policy, lambda r, d: click.echo(printable(describe_decision(r, d))))
    finally:
        inbox.close()
    counts = ", ".join(f"{tally.verdicts[v]} {v.value}" for v in Verdict if tally.verdicts[v])
    click.echo(
        f"{inbox.where}: read {tally.read} mail(s)"
        + (f": {counts}" if counts else "")
        + f"; {len(tally.suppressed)} address(es) suppressed; {tally.left} left in the mailbox"
    )
    if tally.verdicts[Verdict.HELD]:
        click.echo(
            f"{tally.verdicts[Verdict.HELD]} report(s) held for review: their sender is not"
            " proven; see `newsletter bounces --held`",
            err=True,
        )


def _expire_held(database: Database, settings: Settings) -> None:
    """The held reports past [privacy] held_retention_days deleted, and the recorded ones
    past [privacy] bounce_text_days cleared of the server's text, before any is read, as the
    worker does, so the windows hold where no worker runs."""
    for line in expire_reports(database, settings).lines(settings):
        click.echo(line, err=True)


def _review(
    policy: Policy, show_held: bool, accept: tuple[int, ...], dismiss: tuple[int, ...]
) -> None:
    """--held, --accept and --dismiss: the editor's side of the reports held for review."""
    database = policy.database
    for ident in accept:
        accepted = policy.accept(ident)
        if accepted is None:
            raise _not_held(ident)
        held, done = accepted
        row = held.delivery
        what = "; ".join(f"suppressed on {s.list} ({s.reason})" for s in done) or "recorded"
        click.echo(printable(f"accepted {ident}: {held.kind} {row.recipient}: {what}"))
    for ident in dismiss:
        if not database.bounces.decide(ident, DISMISSED):
            raise _not_held(ident)
        click.echo(f"dismissed {ident}: its mail is filed on the next `newsletter bounces`")
    if not show_held:
        return
    held_now = database.bounces.held()
    for held in held_now:
        row = held.delivery
        click.echo(
            printable(
                f"{held.id:>5}  {held.created_at[:16]}  {held.kind:<9}  {row.recipient}"
                f"  issue {row.issue} list {row.list}  from {held.sender or '?'}: {held.reason}"
            )
        )
    click.echo(
        f"{len(held_now)} report(s) held for review"
        + (": --accept ID applies one, --dismiss ID drops it" if held_now else ""),
        err=True,
    )


def _not_held(ident: int) -> NewsletterError:
    return NewsletterError(
        f"no report held for review has id {ident}",
        hint="`newsletter bounces --held` lists them with their ids.",
    )
