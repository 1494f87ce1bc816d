"""Running it for real: `doctor` (is this project ready for production?) and `deploy` (the
service files that run it)."""

from __future__ import annotations

import getpass
import json
import os
import shutil
import sys
from pathlib import Path

import click

from newsletter.cli.terminal import pass_settings, printable
from newsletter.config.settings import Settings
from newsletter.errors import display_path
from newsletter.setup.deploy import (
    Target,
    in_roots_home,
    install_commands,
    shares_tmp,
    systemd_files,
)
from newsletter.state.statefiles import private_folder, write_private


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
    signup    which lists readers may sign up to (none: /signup answers 404)
    smtp      connect, TLS, AUTH (nothing is sent); smtp.NAME: each [smtp.relays.NAME]
              (SMTP on this machine in clear, as the capture server of `newsletter
              mailbox` on port 1025, fails: production mail would not leave it)
    webhook   with [webhooks] relay: its key is set, a signed event from it was received;
              webhook.relay: a provider's key set that [webhooks] relay does not name
    spf, dkim, dmarc, mx   the sender's DNS, as `check --online` checks it
    database  reachable, migrations current, a SQLite file private (0600)
    worker    alive: its heartbeat in the outbox is recent
    mailbox   [bounces] imap logs in (nothing is read or moved), or the provider's
              webhook of [webhooks] relay is the bounce source
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


@click.group()
def deploy() -> None:
    """Write the files that run this project in production."""


@deploy.command()
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("deploy"),
    show_default=True,
    help="Folder to write the units and the Caddy site into (made if missing; replaced).",
)
@click.option(
    "--user",
    default=None,
    help="The Unix user the services run as, never root [you; as root: required].",
)
@click.option(
    "--prefix",
    default="newsletter",
    show_default=True,
    help="The files' names: PREFIX-serve.service, PREFIX.caddy, ... (one per newsletter).",
)
@pass_settings
def systemd(settings: Settings, out: Path, user: str | None, prefix: str) -> None:
    """systemd units for `serve` and `worker`, a timer (+ service) for `bounces` when [bounces]
    imap is set, and a Caddy site (TLS in front of serve at base_url's host) and Caddy's options
    (the slow clients' timeouts) to import from /etc/caddy/Caddyfile, into --out; and
    .newsletter/environment for the passwords the units read (0600, never overwritten; no
    secret is ever written into a unit). Paths are absolute: this project's root and config,
    and this `newsletter` executable.

    The services never run as root: name their user with --user (as root, you must; create it
    with `useradd --system --home-dir /nonexistent --shell /usr/sbin/nologin newsletter`). The
    units are sandboxed (no capabilities, the file system read-only but the state folder;
    `systemd-analyze security` rates them OK). It ends with the exact commands that install
    what it wrote (the timer's only when it wrote one), to run as root, and `newsletter doctor` as
    the services' user.
    """
    config = click.get_current_context().find_root().obj.get("config")
    config = config or settings.root / "newsletter.toml"
    me = getpass.getuser()
    target = Target(_command(), user or me, prefix)
    files = systemd_files(settings, config, target)
    private_folder(settings.state_dir)  # ReadWritePaths= needs it to exist
    out.mkdir(parents=True, exist_ok=True)
    for file in files:
        path = out / file.name
        if file.private:
            private_folder(path.parent)
            if path.exists():
                click.echo(f"kept {display_path(path)} (it may hold secrets)")
                continue
            write_private(path, file.text)
        else:
            path.write_text(file.text, encoding="utf-8")
        click.echo(f"wrote {display_path(path)}")
    if not settings.bounces.imap:
        click.echo(
            "no bounces timer: [bounces] imap is not set (`newsletter doctor` says what to set)"
        )
    unreachable = in_roots_home(settings, target.command)
    if unreachable is not None:
        click.echo(
            f"warning: {unreachable} is in root's home, which {target.user} cannot read: put"
            " the project in /srv/newsletter and install newsletter outside /root"
            " (docs/guide/production.md, step 1)"
        )
    shared = shares_tmp([settings.root.resolve()])
    if shared is not None:
        click.echo(
            f"warning: {shared} is under /tmp, which PrivateTmp=yes would hide from the"
            " services: the units share the machine's /tmp (move the project, to"
            " /srv/newsletter say, for a private one)"
        )
    sudo = os.geteuid() != 0
    click.echo("then, to install them" + (":" if not sudo else " (sudo: as root):"))
    for line in install_commands(files, out, target, settings, config, me=me, sudo=sudo):
        click.echo(f"  {line}")


def _command() -> tuple[str, ...]:
    """This very `newsletter` (the venv's script), else the one on PATH, else this Python
    running the package: the units must run the version that wrote them."""
    argv0 = Path(sys.argv[0])
    if argv0.name == "newsletter" and argv0.is_file():
        return (str(argv0.resolve()),)
    found = shutil.which("newsletter")
    if found:
        return (str(Path(found).resolve()),)
    return (str(Path(sys.executable).absolute()), "-m", "newsletter")
