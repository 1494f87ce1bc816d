"""Running it for real: `doctor` (is this project ready for production?)."""

from __future__ import annotations

import json

import click

from newsletter.cli.terminal import pass_settings, printable
from newsletter.settings import Settings


@click.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON object per check, for monitoring.")
@click.option(
    "--min-free",
    type=click.IntRange(0),
    default=1024,
    show_default=True,
    metavar="MIB",
    help="Free space the state folder's disk must have, in MiB.",
)
@pass_settings
def doctor(settings: Settings, as_json: bool, min_free: int) -> None:
    """Check this project for production, one line per check: OK, or what is wrong and the fix.

    \b
    secret    set, long enough, where it comes from (back it up: if it is lost, every
              unsubscribe and click link already sent stops working)
    base_url  https
    serve     answers at base_url/healthz, with this project's secret
    smtp      connect, TLS, AUTH (nothing is sent)
    spf, dkim, dmarc, mx   the sender's DNS, as `check --online` checks it
    database  reachable, migrations current, a SQLite file private (0600)
    worker    alive: its heartbeat in the outbox is recent
    mailbox   [bounces] imap logs in (nothing is read or moved)
    disk      free space under the state folder

    DNS goes through [check] nameservers and no private address is fetched unless [check]
    allow_private allows it, as in `check --online`. With --json, one line: a list of
    {"name", "ok", "detail", "fix"}. Exit code 0 only when every check passes, else 1.
    """
    from newsletter.doctor import examine  # the network clients: only when used

    found = examine(settings, min_free=min_free * 2**20)
    if as_json:
        click.echo(json.dumps([d.as_json() for d in found], ensure_ascii=False))
    else:
        width = max(len(d.name) for d in found)
        for d in found:
            if d.ok:
                click.echo(f"OK    {d.name:<{width}}  {printable(d.detail)}")
            else:
                click.secho(f"FAIL  {d.name:<{width}}  {printable(d.detail)}", fg="red")
                click.echo(f"      {'':<{width}}  fix: {printable(d.fix)}")
    failing = sum(not d.ok for d in found)
    if not as_json:
        summary = "every check passed" if not failing else f"{failing} check(s) to fix"
        click.echo(f"{len(found)} checks: {summary}", err=True)
    raise SystemExit(1 if failing else 0)

