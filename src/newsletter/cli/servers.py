"""The long-running services: `mailbox` (the capture server), `serve` (the public site) and
`worker` (the site's mail, scheduled sends)."""

from __future__ import annotations

import asyncio
import contextlib

import click

from newsletter.cli.terminal import pass_settings, printable
from newsletter.config.settings import Settings
from newsletter.errors import ConfigError, DeliveryError, display_path
from newsletter.mail.tokens import signing_key
from newsletter.send.mailbox import Captured, describe_captured, run_mailbox


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=1025,
    show_default=True,
    help="SMTP port; 0 picks a free one (the first line names it).",
)
@click.option(
    "--bounce",
    "bounce",
    multiple=True,
    metavar="ADDRESS",
    help="Answer mail to ADDRESS with a bounce (550 5.1.1) to its sender; repeatable.",
)
@pass_settings
def mailbox(settings: Settings, host: str, port: int, bounce: tuple[str, ...]) -> None:
    """Run the local capture SMTP server: every message is stored in a Maildir under
    .newsletter/mailbox/ and printed as one line. The shipped newsletter.toml sends to it.
    With --bounce, mail to those addresses is answered with a delivery status notification
    in the same Maildir, which `newsletter bounces --maildir .newsletter/mailbox` reads.

    Its first line, printed once it listens, names the address and port it listens on. A port
    it cannot listen on (another program holds it) is one error line and exit code 1. Ctrl-C
    or SIGTERM stops it."""
    folder = settings.state_dir / "mailbox"

    def ready(bound: int) -> None:
        click.echo(
            f"Capturing mail on {host}:{bound} into {display_path(folder)}/  (Ctrl-C to stop)"
        )

    def captured(item: Captured) -> None:
        click.echo(printable(describe_captured(item)))

    asyncio.run(run_mailbox(folder, captured, host, port, ready, frozenset(bounce)))
    click.echo("Mailbox stopped.")


@click.command()
@click.option("--host", default=None, help="Address to listen on (default: [serve] host).")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Port to listen on (default: [serve] port); 0 picks a free one.",
)
@click.option(
    "--local",
    is_flag=True,
    help="Try the whole reader flow on this machine: every link of the pages and of the site's"
    " mail uses the address serve listens on instead of base_url, and serve sends the"
    " confirmations itself (no `newsletter worker`). Refused when a list that is not a staging"
    " list takes signups and [smtp] is not the capture server on loopback.",
)
@pass_settings
def serve(settings: Settings, host: str | None, port: int | None, local: bool) -> None:
    """Run the public web service: one-click unsubscribe (RFC 8058), the web archive, and the
    signup and preference pages of lists with `signup = true` (`newsletter worker` sends their
    confirmations). The archive shows only issues sent to a list that is not a staging list
    unless [serve] publish = "all" (a draft stays private). With a provider's key set
    (NEWSLETTER_WEBHOOK_SENDGRID_KEY, _RESEND_SECRET, _MAILGUN_KEY, _POSTMARK_PASSWORD; for SES
    [webhooks] ses_topics), its bounce and complaint events are taken at POST
    /webhooks/PROVIDER (the manual, "Bounces and complaints").

    Meant to run behind a TLS-terminating reverse proxy at newsletter.base_url (the manual,
    "Running it in production").
    Needs NEWSLETTER_SECRET (or the project's .newsletter/secret), the same one `send` signs
    unsubscribe links with (after changing it, put the old value in NEWSLETTER_SECRET_PREVIOUS:
    links already sent keep working). Logs
    one JSON line per request to stderr, with tokens redacted. Ctrl-C or SIGTERM stops it.

    Its first lines say where it listens and where signup is (or that it is off, and the
    setting that opens it).

    \b
    To try signup before the site is public (an https base_url mails links to the public
    host), with the capture server:
      newsletter mailbox &
      newsletter serve --local     open its /signup, then the link in .newsletter/mailbox/
    """
    # starlette + uvicorn: imported only when used
    from newsletter.web.listen import bind_socket, url_of
    from newsletter.web.site.server import serve as serve_site

    if local:
        _refuse_local(settings)
    key = signing_key(settings, allow_ephemeral=False)  # no secret: fail before binding
    sock = bind_socket(host or settings.serve.host, settings.serve.port if port is None else port)
    if not local:
        click.echo(
            f"Serving unsubscribe and archive at {url_of(sock)}"
            f" (public URL: {settings.newsletter.base_url})",
            err=True,
        )
        click.echo(_signup_line(settings), err=True)
        if not settings.newsletter.base_url.startswith("https://"):
            click.echo(
                "note: newsletter.base_url is not https://: mailbox providers use one-click "
                "unsubscribe only over HTTPS (the manual, 'Running it in production')",
                err=True,
            )
        serve_site(settings, sock)
        return
    from newsletter.worker.process import site_mail_beside  # SMTP and the outbox

    address = _reachable(url_of(sock, ""))
    public = settings.newsletter.base_url
    settings = settings.model_copy(
        update={"newsletter": settings.newsletter.model_copy(update={"base_url": address})}
    )

    def log(line: str) -> None:
        click.echo(printable(line))

    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(site_mail_beside(settings, key, log))
        except DeliveryError as exc:  # a worker holds the project's lock
            raise DeliveryError(
                f"serve --local: {exc.message}",
                hint="Stop it first: serve --local sends the site's mail itself, with the local"
                " address in its links.",
            ) from None
        click.echo(
            f"Serving the reader flow locally at {address}/ (every link and site mail uses it,"
            f" not base_url {public})",
            err=True,
        )
        click.echo(_signup_line(settings, local=True), err=True)
        click.echo(
            f"Site mail goes out from here through {settings.smtp.host}:{settings.smtp.port}"
            + (
                " (the capture server: `newsletter mailbox`)"
                if _loopback(settings.smtp.host)
                else ""
            )
            + "  (Ctrl-C to stop)",
            err=True,
        )
        serve_site(settings, sock)


def _signup_line(settings: Settings, *, local: bool = False) -> str:
    """Where signup is (and who sends the confirmations), or that it is off and the setting
    that opens it."""
    from newsletter.links import signup_url

    open_lists = settings.signup_lists
    if open_lists:
        return (
            f"Signup ({', '.join(open_lists)}) at {signup_url(settings.newsletter.base_url)};"
            + (" this process sends" if local else " `newsletter worker` sends")
            + " the confirmations"
        )
    first = next((n for n, chosen in settings.lists.items() if not chosen.staging), "main")
    return (
        "Signup is off: no list has `signup = true`. To open /signup, set it under"
        f" [lists.{first}] in newsletter.toml and start serve again."
    )


def _refuse_local(settings: Settings) -> None:
    """`--local` mails links to this machine: never to the readers of a real list."""
    real = [n for n in settings.signup_lists if not settings.lists[n].staging]
    if real and not _loopback(settings.smtp.host):
        raise ConfigError(
            f"serve --local: [lists.{real[0]}] takes signups and [smtp] host is"
            f" {settings.smtp.host}: its confirmations would reach real inboxes with links to"
            " this machine",
            hint="Try it with the capture server (`newsletter mailbox`, then"
            " NEWSLETTER_SMTP__HOST=127.0.0.1 NEWSLETTER_SMTP__PORT=1025"
            " NEWSLETTER_SMTP__SECURITY=none newsletter serve --local), or on a staging list"
            " only (signup = true under [lists.staging], not on the real one).",
        )


def _loopback(host: str) -> bool:
    return host.strip().lower() in ("127.0.0.1", "localhost", "::1")


def _reachable(url: str) -> str:
    """A URL a browser on this machine can open: 0.0.0.0 (any address) is reached as
    127.0.0.1, :: as [::1]."""
    return url.replace("//0.0.0.0:", "//127.0.0.1:", 1).replace("//[::]:", "//[::1]:", 1)


@click.command()
@click.option(
    "--once",
    is_flag=True,
    help="Do what is due now (scheduled sends to their end), then exit (for cron or a test).",
)
@pass_settings
def worker(settings: Settings, once: bool) -> None:
    """Run the worker: it sends the site's mail (signup confirmations, welcome mails, address
    changes) within a second of the signup, and starts each scheduled send (`newsletter send
    --at`) when it falls due, after checking the issue again.

    Needs NEWSLETTER_SECRET (the links are signed with it) and the same outbox as `serve`. On
    SQLite one worker per project; with a PostgreSQL outbox run any number, on any machines:
    exactly one of them starts each scheduled send. A send whose time passed while no worker
    ran starts when one comes back, unless it is more than [schedule] grace late (then it is
    `missed`, not sent). Every 10 s it writes a heartbeat into the outbox, by which `newsletter
    doctor` knows it is alive. Prints one line per mail and per step of a send. SIGTERM or Ctrl-C
    finishes the mail in hand, stops the sends (their uploads finish) and hands them back to
    be resumed; a second one stops at once. Exit code 0 when stopped.
    """
    from newsletter.worker.process import run_worker  # SMTP and the outbox: only when used

    key = signing_key(settings, allow_ephemeral=False)

    def log(line: str) -> None:
        click.echo(printable(line))

    def ready() -> None:
        click.echo(
            f"Worker started: scheduled sends and site mail through {settings.smtp.host}:"
            f"{settings.smtp.port}  (Ctrl-C to stop)",
            err=True,
        )

    config = click.get_current_context().find_root().obj.get("config")
    run_worker(settings, key, log=log, once=once, ready=ready, config=config)
    click.echo("Worker stopped.", err=True)
