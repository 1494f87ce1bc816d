"""The `newsletter` command: parse arguments, load settings once, call one library function, print.

Every NewsletterError becomes a message on stderr (what is wrong, then how to fix it) and exit
code 1; nothing the user can cause ends in a traceback.
"""

from __future__ import annotations

import asyncio
import email
import email.policy
import re
import sys
import time
from collections.abc import Callable
from email.message import EmailMessage
from functools import update_wrapper
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import click
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
)

from newsletter import delivery
from newsletter.checks import GMAIL_CLIP, Finding, encoded_size, run_checks
from newsletter.errors import ConfigError, DeliveryError, NewsletterError
from newsletter.issues import load_issue
from newsletter.message import MessageFactory, sample_message, write_eml_files
from newsletter.models import DeliveryStatus, Issue, OutgoingMessage, RenderedEmail
from newsletter.outbox import Outbox, write_csv
from newsletter.render import render_issue
from newsletter.settings import Settings, load_settings
from newsletter.subscribers import ListReport, address_key, check_list, read_subscribers
from newsletter.transport import Captured, describe_captured, run_mailbox
from newsletter.unsubscribe import signing_key

F = TypeVar("F", bound=Callable[..., Any])


class Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except NewsletterError as exc:
            fail(exc)


def fail(exc: NewsletterError) -> None:
    click.secho(f"error: {exc.message}", fg="red", err=True)
    if exc.hint:
        click.echo(f"hint: {exc.hint}", err=True)
    sys.exit(1)


def pass_settings(func: F) -> F:
    """Load newsletter.toml (or --config) once, on first use, and pass it as `settings`."""

    @click.pass_context
    def wrapper(ctx: click.Context, /, *args: Any, **kwargs: Any) -> Any:
        obj = ctx.ensure_object(dict)
        if "settings" not in obj:
            obj["settings"] = load_settings(obj.get("config"))
        return ctx.invoke(func, obj["settings"], *args, **kwargs)

    return update_wrapper(wrapper, func)  # type: ignore[return-value]


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Config file (default: ./newsletter.toml). Its folder is the project root.",
)
@click.version_option(package_name="newsletter")
@click.pass_context
def cli(ctx: click.Context, config: Path | None) -> None:
    """Turn an issue file into responsive email, preview it, and send it to every subscriber
    exactly once.

    \b
    The editor's day:
      newsletter preview --issue 14            look at it live in a browser
      newsletter check --issue 14              pre-send checks
      newsletter send --issue 14 --list staging   a test send
      newsletter send --issue 14               deliver to the main list
    """
    ctx.ensure_object(dict)["config"] = config


class Prepared(NamedTuple):
    issue: Issue
    rendered: RenderedEmail
    sample: OutgoingMessage
    findings: list[Finding]
    ephemeral_key: bool


def prepare(settings: Settings, number: int, list_name: str) -> Prepared:
    """The editor's view of an issue: load, render once, one sample message, the checks."""
    issue = load_issue(settings.issues_dir, number)
    rendered = render_issue(issue, settings)
    sample, ephemeral = sample_message(rendered, settings, list_name)
    findings = run_checks(issue, rendered, sample.data)
    return Prepared(issue, rendered, sample, findings, ephemeral)


def note_ephemeral(prepared: Prepared) -> None:
    if prepared.ephemeral_key:
        click.echo(
            "note: NEWSLETTER_SECRET is not set, so the sample's unsubscribe link is signed "
            "with a throwaway key and will not verify",
            err=True,
        )


issue_option = click.option("--issue", "number", type=int, required=True, help="Issue number.")
sample_list_option = click.option(
    "--list",
    "list_name",
    default="main",
    show_default=True,
    help="The list whose headers the sample message carries.",
)


@cli.command()
@click.option(
    "--issue", "number", type=int, default=None, help="Issue number (optional with --site)."
)
@sample_list_option
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Output folder (default: out/ISSUE in the project).",
)
@click.option(
    "--site",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write the web archive (index + every issue) as static files into this folder.",
)
@pass_settings
def build(
    settings: Settings, number: int | None, list_name: str, out: Path | None, site: Path | None
) -> None:
    """Render an issue: email.html, email.txt and a sample email.eml (for a sample recipient).

    With --site DIR, also write the web archive that `newsletter serve` shows (index.html,
    issues/N/index.html, unsubscribe/index.html) for any static host; --issue is then optional.
    """
    if number is None and site is None:
        raise click.UsageError("Missing option '--issue' (or --site DIR for the web archive).")
    if number is None and out is not None:
        raise click.UsageError("--out needs --issue")
    if number is not None:
        _build_issue(settings, number, list_name, out)
    if site is not None:
        from newsletter.archive import write_site

        pages = write_site(settings, site)
        click.echo(
            f"{_shown(site)}/  web archive: {len(pages)} pages"
            f" ({len(pages) - 2} issue(s), the index and how-to-unsubscribe)"
        )
        click.echo(f"publish it at {settings.newsletter.base_url} (newsletter.base_url)")


def _build_issue(settings: Settings, number: int, list_name: str, out: Path | None) -> None:
    prepared = prepare(settings, number, list_name)
    note_ephemeral(prepared)
    folder = out if out is not None else settings.root / "out" / str(number)
    folder.mkdir(parents=True, exist_ok=True)
    parsed = email.message_from_bytes(prepared.sample.data, policy=email.policy.default)
    assert isinstance(parsed, EmailMessage)
    parts = {"email.html": ("html",), "email.txt": ("plain",)}
    for name, kind in parts.items():
        body = parsed.get_body(kind)
        assert body is not None
        # The wire form has CRLF line ends; files for people to open get plain newlines.
        content = body.get_content().replace("\r\n", "\n")
        (folder / name).write_text(content, encoding="utf-8")
    (folder / "email.eml").write_bytes(prepared.sample.data)
    for name in (*parts, "email.eml"):
        path = folder / name
        click.echo(f"{_shown(path)}  {path.stat().st_size / 1024:.1f} KB")
    sample = f"{settings.newsletter.sample_name} <{settings.newsletter.sample_email}>"
    click.echo(f"filled for the sample recipient {sample}; the .eml is exactly what they get")


@cli.command()
@issue_option
@sample_list_option
@pass_settings
def check(settings: Settings, number: int, list_name: str) -> None:
    """Pre-send checks. Exit 0: no errors (warnings allowed); 1: errors."""
    prepared = prepare(settings, number, list_name)
    for finding in prepared.findings:
        click.secho(str(finding), fg="red" if finding.level == "error" else "yellow")
    parsed = email.message_from_bytes(prepared.sample.data, policy=email.policy.default)
    assert isinstance(parsed, EmailMessage)
    html_part = parsed.get_body(("html",))
    assert html_part is not None
    size = encoded_size(html_part)
    click.echo(
        f"HTML part: {size / 1024:.1f} KB encoded ({html_part['Content-Transfer-Encoding']}), "
        f"{size / GMAIL_CLIP:.0%} of Gmail's ~102 KB clipping limit"
    )
    errors = sum(f.level == "error" for f in prepared.findings)
    warnings = len(prepared.findings) - errors
    click.echo(f"issue {number}: {errors} error(s), {warnings} warning(s)")
    if errors:
        sys.exit(1)


@cli.command()
@click.option("--issue", "number", type=int, default=None, help="Open this issue's page.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8026,
    show_default=True,
    help="Port to listen on; 0 picks a free one.",
)
@click.option("--no-open", is_flag=True, help="Do not open a browser.")
@click.option(
    "--list",
    "list_name",
    default="main",
    show_default=True,
    help="The list whose headers the sample message carries.",
)
@pass_settings
def preview(
    settings: Settings, number: int | None, host: str, port: int, no_open: bool, list_name: str
) -> None:
    """Serve the issues live in a browser: every save re-renders and reloads the page.

    Shows each issue as the sample recipient gets it (same pipeline as `send`), at desktop and
    mobile widths, light and dark, with its text part, sources, size and check results.
    Ctrl-C stops it.
    """
    # starlette + uvicorn: imported only when used
    from newsletter import preview_server as server
    from newsletter.issues import issue_path
    from newsletter.preview import Workspace, bind_socket, url_of
    from newsletter.settings import CONFIG_NAME

    if number is not None:
        issue_path(settings.issues_dir, number)  # an unknown number fails here, not in the browser
    config = click.get_current_context().find_root().obj.get("config")
    config_path = settings.root / (config.name if config else CONFIG_NAME)
    # Each render's outcome goes to the terminal too: the page is not always in view.
    workspace = Workspace(config_path, settings, list_name, report=click.echo)
    sock = bind_socket(host, port)
    url = url_of(sock, f"/issues/{number}" if number is not None else "/")
    click.echo(f"Previewing at {url}  (Ctrl-C to stop)")
    if not server.is_loopback(sock):
        click.echo("note: not on loopback: anyone who can reach this address sees the preview")
    if settings.secret is None:
        click.echo("note: NEWSLETTER_SECRET is unset: the sample's unsubscribe link won't verify")
    server.serve_preview(workspace, sock, open_url=None if no_open else url)
    click.echo("Preview stopped.")


@cli.command()
@click.option("--list", "list_name", default=None, help="Only this list (default: every list).")
@pass_settings
def subscribers(settings: Settings, list_name: str | None) -> None:
    """Check subscriber lists: every rejected row (file:line: field: reason), then the counts
    of valid, duplicate, invalid, unsubscribed and suppressed rows.

    Suppressed means unsubscribed through a link (the delivery log's suppression list).
    Exit 0: every row is usable; 1: some rows were rejected (they are skipped when sending).
    """
    names = [list_name] if list_name else sorted(settings.lists)
    if not names:
        raise ConfigError("no lists in the config", hint="Add a [lists.main] table with a `path`.")
    rejected = 0
    for name in names:
        path = settings.resolve(settings.mailing_list(name).path)
        suppressed: frozenset[str] = frozenset()
        if settings.database.exists():
            with Outbox(settings.database) as outbox:
                suppressed = outbox.suppressed(name)
        report = check_list(
            Path(_shown(path)),
            suppressed=suppressed,
            on_reject=lambda problem: click.echo(_printable(str(problem))),
        )
        click.echo(_list_counts(name, report))
        rejected += report.rejected_count
    if rejected:
        click.echo(f"{rejected} row(s) rejected: fix them, or they are skipped when sending")
        sys.exit(1)


# -- sending, the delivery log and the capture server ----------------------------------------

EXIT_INCOMPLETE = 3
EXIT_STOPPED = 4
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")


@cli.command()
@issue_option
@click.option(
    "--list",
    "list_name",
    default="main",
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
@click.option("--retry-failed", is_flag=True, help="Also retry recipients that failed.")
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
@pass_settings
def send(
    settings: Settings,
    number: int,
    list_name: str,
    yes: bool,
    concurrency: int | None,
    rate: float | None,
    resend_unknown: bool,
    retry_failed: bool,
    dry_run: bool,
    out: Path | None,
    processes: int | None,
) -> None:
    """Deliver an issue to every subscriber of a list over SMTP, recording each delivery.

    Re-running the same command resumes: sent and rejected recipients are never sent again,
    deferred ones are retried. Sending to a list that is not a staging list asks first.

    With --dry-run nothing is sent and nothing is logged: every recipient's message is written
    to --out as an .eml file, exactly the bytes the SMTP server would get.

    \b
    Exit codes:
      0  every recipient sent (or skipped: unsubscribed)
      1  error before sending (nothing was sent)
      3  finished, but some recipients are rejected, failed, unknown or still deferred
      4  stopped (circuit breaker, quota, Ctrl-C): re-run the same command to resume
    """
    if dry_run:
        _dry_run(
            settings, number, list_name, out or settings.root / "out" / f"{number}-{list_name}"
        )
        return
    if out is not None:
        raise click.UsageError("--out is only used with --dry-run")
    prepared = delivery.prepare(settings, number, list_name)
    _report_list(prepared.list_report)
    job = prepared.job
    if not prepared.staging and not yes:
        if not sys.stdin.isatty():
            raise DeliveryError(
                f"refusing to send issue {number} to the {list_name!r} list without confirmation",
                hint="Re-run with --yes to confirm (no terminal to ask on).",
            )
        click.echo(
            f"About to send issue {number} to the {list_name!r} list:\n"
            f"  recipients  {len(job.subscribers)}\n"
            f"  SMTP server {prepared.server}\n"
            f"  sender      {prepared.sender}"
        )
        if not click.confirm("Send now?", default=False):
            click.echo("Nothing sent.")
            sys.exit(1)
    base = settings.send
    options = delivery.Options(
        concurrency=concurrency or base.concurrency,
        rate=base.rate if rate is None else rate,
        rate_per_hour=base.rate_per_hour,
        max_attempts=base.max_attempts,
        retry_base=base.retry_base,
        retry_cap=base.retry_cap,
        breaker_threshold=base.breaker_threshold,
        resend_unknown=resend_unknown,
        retry_failed=retry_failed,
        processes=processes or base.processes,
    )
    with _SendDisplay(number, list_name, len(job.subscribers)) as display:
        report = delivery.send(prepared, options, display)
    click.echo(_summary(report))
    if report.stopped:
        click.secho(f"stopped: {report.stopped}", fg="yellow", err=True)
        click.echo("hint: Re-run the same command to resume.", err=True)
        sys.exit(EXIT_STOPPED)
    if not report.complete:
        click.echo(f"hint: `newsletter status --issue {number} --list {list_name}`", err=True)
        sys.exit(EXIT_INCOMPLETE)


def _dry_run(settings: Settings, number: int, list_name: str, out: Path) -> None:
    """The same issue, list and suppressions as a real send, written to files: no SMTP, no log."""
    mailing_list = settings.mailing_list(list_name)
    key = signing_key(settings, allow_ephemeral=True)
    if key.ephemeral:
        click.echo(
            "note: NEWSLETTER_SECRET is not set: unsubscribe links are signed with a throwaway key",
            err=True,
        )
    rendered = render_issue(load_issue(settings.issues_dir, number), settings)
    factory = MessageFactory(rendered, settings, list_name, secret=key.secret)
    suppressed: frozenset[str] = frozenset()
    if settings.database.exists():  # read only: a dry run never creates the delivery log
        with Outbox(settings.database) as outbox:
            suppressed = outbox.suppressed(list_name)
    report = ListReport(Path(_shown(settings.resolve(mailing_list.path))))
    stream = read_subscribers(report.path, report, suppressed=suppressed)
    written, removed = write_eml_files(factory, stream, out)
    _report_list(report)
    if removed:
        click.echo(f"replaced {removed} .eml file(s) from an earlier dry run", err=True)
    click.echo(_list_counts(list_name, report))
    click.echo(f"dry run: wrote {written} message(s) to {_shown(out)}/ (nothing was sent)")


def _list_counts(list_name: str, report: ListReport) -> str:
    counts = ", ".join(f"{n} {label}" for label, n in report.counts().items())
    return f"{list_name} ({report.path}): {counts}"


def _report_list(report: ListReport) -> None:
    for problem in report.rejected[:20]:
        click.echo(f"skipped row: {problem}", err=True)
    if report.rejected_count > 20:
        click.echo(f"... and {report.rejected_count - 20} more rows skipped", err=True)


def _summary(report: delivery.RunReport) -> str:
    counts = report.counts
    parts = [f"{counts[s]} {s}" for s in DeliveryStatus if counts[s]]
    sent = report.this_run[DeliveryStatus.SENT]
    rate = sent / report.seconds if report.seconds > 0 else 0.0
    return (
        f"issue {report.issue} -> {report.list_name}: {', '.join(parts) or 'no recipients'}"
        f" ({sent} sent by this run in {report.seconds:.1f} s, {rate:.0f} msg/s)"
    )


class _SendDisplay:
    """A rich progress bar on a terminal; otherwise a line per problem and one every 5 s."""

    def __init__(self, number: int, list_name: str, total: int) -> None:
        self.label = f"issue {number} -> {list_name}"
        self.total = total
        self.started = time.monotonic()
        self.last_line = self.started
        self.sent = 0
        self.tty = sys.stdout.isatty()
        self.progress: Progress | None = None

    def __enter__(self) -> _SendDisplay:
        if self.tty:
            self.progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[states]}"),
                TextColumn("{task.fields[rate]}"),
                TimeRemainingColumn(),
            )
            self.progress.start()
            self.task = self.progress.add_task(self.label, total=self.total, states="", rate="")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def __call__(self, event: delivery.Event) -> None:
        c = event.counts
        if event.state == DeliveryStatus.SENT:
            self.sent += 1
        now = time.monotonic()
        rate = self.sent / max(now - self.started, 1e-3)
        # The log's rows, not the list: it also holds recipients sent before they left the list.
        total = sum(c.values())
        done = sum(
            c.get(s, 0)
            for s in (
                DeliveryStatus.SENT,
                DeliveryStatus.REJECTED,
                DeliveryStatus.FAILED,
                DeliveryStatus.UNKNOWN,
                DeliveryStatus.SKIPPED,
            )
        )
        states = (
            f"sent {c.get(DeliveryStatus.SENT, 0)} deferred {c.get(DeliveryStatus.DEFERRED, 0)}"
            f" rejected {c.get(DeliveryStatus.REJECTED, 0)}"
        )
        if event.state != DeliveryStatus.SENT:
            reply = event.result.describe() if event.result else ""
            line = _printable(f"{event.state}: {event.recipient} {reply}")
            if self.progress is not None:
                self.progress.console.print(line, markup=False, highlight=False)
            else:
                click.echo(line)
        if self.progress is not None:
            self.progress.update(
                self.task, completed=done, total=total, states=states, rate=f"{rate:.0f} msg/s"
            )
        elif now - self.last_line >= 5.0:
            self.last_line = now
            click.echo(f"{self.label}: {done}/{total} done, {states}, {rate:.0f} msg/s")


def _printable(text: str) -> str:
    """Server replies go to a terminal: no control characters, no escape sequences."""
    return _CONTROL_CHARS.sub("?", text)


@cli.command()
@issue_option
@click.option("--list", "list_name", default=None, help="Only this list (default: every list).")
@click.option(
    "--csv",
    "csv_path",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    default=None,
    help="Also write every row to this CSV file (- for stdout).",
)
@click.option("--all", "show_all", is_flag=True, help="List every row that is not sent.")
@pass_settings
def status(
    settings: Settings, number: int, list_name: str | None, csv_path: Path | None, show_all: bool
) -> None:
    """Show an issue's delivery log: counts per state, then each recipient not sent with the
    server's reply."""
    if not settings.database.exists():
        click.echo(f"issue {number}: nothing sent yet (no delivery log)")
        return
    limit = None if show_all else 50
    with Outbox(settings.database) as outbox:
        names = [list_name] if list_name else outbox.lists_of(number)
        if not names:
            click.echo(f"issue {number}: nothing sent yet")
        for name in names:
            counts = outbox.counts(number, name)
            click.echo(f"issue {number} -> {name}: {sum(counts.values())} recipients")
            for state, n in counts.items():
                if n:
                    click.echo(f"  {state:<9} {n}")
            waiting = [s for s in DeliveryStatus if s != DeliveryStatus.SENT]
            rows = outbox.rows(number, name, waiting)
            for row in rows[:limit]:
                code = row.smtp_code or ""
                reply = _printable(f"{code} {row.smtp_reply}".strip())
                click.echo(f"  {row.state:<9} {_printable(row.recipient)}  {reply}")
            if limit is not None and len(rows) > limit:
                click.echo(f"  ... and {len(rows) - limit} more (--all, or --csv FILE)")
        if csv_path is not None:
            rows = [r for name in names for r in outbox.rows(number, name)]
            if str(csv_path) == "-":
                write_csv(rows, sys.stdout)
            else:
                with csv_path.open("w", encoding="utf-8", newline="") as handle:
                    n = write_csv(rows, handle)
                click.echo(f"wrote {n} rows to {_shown(csv_path)}", err=True)


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=1025, show_default=True, help="SMTP port."
)
@pass_settings
def mailbox(settings: Settings, host: str, port: int) -> None:
    """Run the local capture SMTP server: every message is stored in a Maildir under
    .newsletter/mailbox/ and printed as one line. The shipped newsletter.toml sends to it.
    Ctrl-C stops it."""
    folder = settings.state_dir / "mailbox"

    def ready(bound: int) -> None:
        click.echo(f"Capturing mail on {host}:{bound} into {_shown(folder)}/  (Ctrl-C to stop)")

    def captured(item: Captured) -> None:
        click.echo(_printable(describe_captured(item)))

    asyncio.run(run_mailbox(folder, captured, host, port, ready))
    click.echo("Mailbox stopped.")


# -- the web service and the editor's suppressions ------------------------------------------


@cli.command()
@click.option("--host", default=None, help="Address to listen on (default: [serve] host).")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Port to listen on (default: [serve] port); 0 picks a free one.",
)
@pass_settings
def serve(settings: Settings, host: str | None, port: int | None) -> None:
    """Run the public web service: one-click unsubscribe (RFC 8058) and the web archive.

    Meant to run behind a TLS-terminating reverse proxy at newsletter.base_url (see README).
    Needs NEWSLETTER_SECRET, the same one `send` signs unsubscribe links with. Logs one JSON
    line per request to stderr, with tokens redacted. Ctrl-C or SIGTERM stops it.
    """
    from newsletter import serve as service  # starlette + uvicorn: imported only when used
    from newsletter.preview import bind_socket, url_of

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
            "unsubscribe only over HTTPS (see README, Running it in production)",
            err=True,
        )
    service.serve(settings, sock)


@cli.command()
@click.argument("address")
@click.option(
    "--list", "list_name", default="main", show_default=True, help="The list to remove it from."
)
@click.option("--undo", is_flag=True, help="Send to ADDRESS again (lift any suppression).")
@pass_settings
def unsubscribe(settings: Settings, address: str, list_name: str, undo: bool) -> None:
    """Never send to ADDRESS on a list again, as if the reader had unsubscribed (source `cli`;
    unlike the reader's own, their re-subscribe button cannot lift it). --undo lifts any."""
    settings.mailing_list(list_name)
    try:
        key = address_key(address)
    except ValueError as exc:
        raise NewsletterError(
            f"{address!r} is not an email address: {exc}", hint="Pass the address as subscribed."
        ) from None
    with Outbox(settings.database) as outbox:
        if undo:
            lifted = outbox.unsuppress(list_name, key)
            state = "will be sent to again" if lifted else "was not unsubscribed"
            click.echo(f"{key} {state} on {list_name!r}")
            return
        added = outbox.suppress(list_name, key, "cli")
    state = "unsubscribed" if added else "was already unsubscribed"
    click.echo(f"{key} {state} from {list_name!r}; later sends to it skip this address")


@cli.command()
@click.option("--list", "list_name", default=None, help="Only this list (default: every list).")
@pass_settings
def suppressions(settings: Settings, list_name: str | None) -> None:
    """List the addresses never sent to again: when, list, address and how (one-click: the
    mailbox's button; web: the confirm page; cli: `newsletter unsubscribe`)."""
    if list_name is not None:
        settings.mailing_list(list_name)
    if not settings.database.exists():
        rows = []
    else:
        with Outbox(settings.database) as outbox:
            rows = outbox.suppressions(list_name)
    for row in rows:
        click.echo(f"{row.created_at}  {row.list}  {_printable(row.address)}  {row.source}")
    where = f" on {list_name!r}" if list_name is not None else ""
    click.echo(f"{len(rows)} suppressed address(es){where}", err=True)


@cli.command()
@click.option(
    "--maildir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Read this Maildir folder instead of [bounces] imap (e.g. .newsletter/mailbox).",
)
@pass_settings
def bounces(settings: Settings, maildir: Path | None) -> None:
    """Read bounces and complaints from the bounce mailbox ([bounces] imap, or --maildir DIR),
    record each against the send it is about and suppress by the [bounces] policy: a hard bounce
    or a complaint at once (bounced, complained), soft bounces after 3 in a row. Auto-replies
    never count; mail it does not understand stays where it was. Running it twice counts
    nothing twice."""
    from newsletter.bounces.collect import collect, describe
    from newsletter.bounces.inbox import open_inbox
    from newsletter.bounces.policy import Policy, Verdict

    key = signing_key(settings, allow_ephemeral=True)
    inbox = open_inbox(settings, maildir)
    if key.ephemeral:
        click.echo(
            "note: NEWSLETTER_SECRET is not set: return-path tags cannot be verified, so only"
            " reports that quote a Message-ID can be matched",
            err=True,
        )
    try:
        with Outbox(settings.database) as outbox:
            policy = Policy(outbox, settings.bounces, None if key.ephemeral else key.secret)
            tally = collect(inbox, policy, lambda r, d: click.echo(_printable(describe(r, d))))
    finally:
        inbox.close()
    counts = ", ".join(f"{tally.verdicts[v]} {v.value}" for v in Verdict if tally.verdicts[v])
    click.echo(
        f"{inbox.where}: read {tally.read} mail(s)"
        + (f": {counts}" if counts else "")
        + f"; {len(tally.suppressed)} address(es) suppressed; {tally.left} left in the mailbox"
    )


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def main() -> None:
    cli(prog_name="newsletter")
