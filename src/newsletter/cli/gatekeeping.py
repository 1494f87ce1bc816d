"""What `send` says before it sends: a SendVerdict in; the refusal, the warnings and the
confirmation's lines out, on the terminal.

The verdict is gate.py's; this module only words it. An error refuses the send (exit 1, nothing
planned) unless --force, each error named on stderr as `check` names it. The warnings and the
tally go to stdout on every send, as `check` prints them, so a log of a `--yes` send has them.
The confirmation a real list asks for shows the subject, the list, who gets a message
(suppressed readers apart, counted), the rows of the list's CSV that get nothing (counted, the
first few with their line and reason), the encoded size against Gmail's clip, the spam score,
the server, the sender and base_url (where every link of the message points).
"""

from __future__ import annotations

import click

from newsletter.checks.findingformats import text_line
from newsletter.cli.terminal import printable
from newsletter.gate import SendVerdict
from newsletter.send.recipients import RecipientsReport

_SHOWN = 20  # findings shown in full; the rest counted (check shows them all)
_ROWS_SHOWN = 5  # rejected rows named in a confirmation; `newsletter subscribers` lists them all


def show_verdict(verdict: SendVerdict, *, force: bool) -> None:
    """The checks as a send shows them: each error on stderr, the warnings and the tally on
    stdout; with `force`, that the errors are overridden. (The refusal itself is the send's:
    pipeline.send raises CheckFailedError, which the command line prints and exits 1 on.)"""
    errors, warnings = verdict.errors, verdict.warnings
    for finding in errors[:_SHOWN]:
        click.secho(text_line(finding), fg="red", err=True)
    for finding in warnings[:_SHOWN]:
        click.secho(text_line(finding), fg="yellow")
    hidden = max(len(errors) - _SHOWN, 0) + max(len(warnings) - _SHOWN, 0)
    if hidden:
        click.echo(f"... and {hidden} more (`newsletter check --issue {verdict.number}`)")
    if verdict.online is not None and verdict.online.skipped:
        click.echo(verdict.online.summary())
    click.echo(f"check: issue {verdict.number}: {verdict.tally()}")
    if errors and force:
        click.secho(
            f"warning: --force: sending issue {verdict.number} despite {len(errors)} error(s)",
            fg="yellow",
            err=True,
        )


def confirmation(
    verdict: SendVerdict, counted: RecipientsReport, *, server: str, sender: str, base_url: str
) -> str:
    """The lines a real send shows before asking. base_url is among them: every link of the
    message starts with it, for good, once the editor says yes."""
    skipped = counted.suppressed
    recipients = f"{counted.recipients}" + (
        f" ({skipped} more unsubscribed: skipped)" if skipped else ""
    )
    warned = len(verdict.warnings)
    checks = verdict.tally() + (" (shown above)" if warned or verdict.errors else "")
    return (
        f"About to send issue {verdict.number} to the {verdict.list_name!r} list:\n"
        f"  subject     {printable(verdict.subject)}\n"
        f"  recipients  {recipients}\n"
        f"{_rejected_lines(counted, verdict.list_name)}"
        f"  HTML part   {verdict.size_line()}\n"
        f"  spam        {verdict.spam_line()}\n"
        f"  checks      {checks}\n"
        f"  SMTP server {server}\n"
        f"  sender      {sender}\n"
        f"  base_url    {printable(base_url)} (every unsubscribe and archive link)"
    )


def _rejected_lines(counted: RecipientsReport, list_name: str) -> str:
    """The CSV's rows that get no message, before the editor says yes: a typo in an address
    is found now, not in the report after the send (empty when every row is good)."""
    total = counted.rejected_count
    if not total:
        return ""
    lines = [f"  rejected    {total} row(s) of {counted.path} get nothing:\n"]
    lines += [f"    {printable(str(problem))}\n" for problem in counted.rejected[:_ROWS_SHOWN]]
    if total > _ROWS_SHOWN:
        more = total - _ROWS_SHOWN
        lines.append(f"    ... and {more} more (`newsletter subscribers --list {list_name}`)\n")
    return "".join(lines)
