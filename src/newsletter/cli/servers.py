"""The long-running services: `mailbox` (the capture server), `serve` (the public site) and
`worker` (the site's mail, scheduled sends)."""

from __future__ import annotations

import asyncio

import click

from newsletter.cli.terminal import pass_settings, printable
from newsletter.config.settings import Settings
from newsletter.errors import display_path
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
@pass_settings
def serve(settings: Settings, host: str | None, port: int | None) -> None:
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
    """
    # starlette + uvicorn: imported only when used
    from newsletter.web.listen import bind_socket, url_of
    from newsletter.web.site.server import serve as serve_site

    signing_key(settings, allow_ephemeral=False)  # no secret: fail before binding the port
    sock = bind_socket(host or settings.serve.host, settings.serve.port if port is None else port)
    click.echo(
        f"Serving unsubscribe and archive at {url_of(sock)}"
        f" (public URL: {settings.newsletter.base_url})",
        err=True,
    )
    if not settings.newsletter.base_url.startswith("https://"):
        click.echo(
            "note: newsletter.base_url is not https://: mailbox providers use one-click "
            "unsubscribe only over HTTPS (the manual, 'Running it in production')",
            err=True,
        )
    serve_site(settings, sock)


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
