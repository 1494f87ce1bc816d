"""The `newsletter` command: parse arguments, load settings once, call one library function, print.

Every NewsletterError becomes a message on stderr (what is wrong, then how to fix it) and exit
code 1; nothing the user can cause ends in a traceback.
"""

from __future__ import annotations

import email
import email.policy
import sys
from collections.abc import Callable
from email.message import EmailMessage
from functools import update_wrapper
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import click

from newsletter.checks import GMAIL_CLIP, Finding, encoded_size, run_checks
from newsletter.errors import NewsletterError
from newsletter.issues import load_issue
from newsletter.message import MessageFactory
from newsletter.models import Issue, OutgoingMessage, RenderedEmail, Subscriber
from newsletter.render import render_issue
from newsletter.settings import Settings, load_settings
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
    key = signing_key(settings, allow_ephemeral=True)
    factory = MessageFactory(rendered, settings, list_name, secret=key.secret)
    sample = factory.build(
        Subscriber(
            address=settings.newsletter.sample_email,
            envelope=settings.newsletter.sample_email,
            name=settings.newsletter.sample_name,
        )
    )
    findings = run_checks(issue, rendered, sample.data)
    return Prepared(issue, rendered, sample, findings, key.ephemeral)


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
@issue_option
@sample_list_option
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Output folder (default: out/ISSUE in the project).",
)
@pass_settings
def build(settings: Settings, number: int, list_name: str, out: Path | None) -> None:
    """Render an issue: email.html, email.txt and a sample email.eml (for a sample recipient)."""
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
    from newsletter import preview as live  # starlette + uvicorn: imported only when used
    from newsletter.issues import issue_path
    from newsletter.settings import CONFIG_NAME

    if number is not None:
        issue_path(settings.issues_dir, number)  # an unknown number fails here, not in the browser
    config = click.get_current_context().find_root().obj.get("config")
    config_path = settings.root / (config.name if config else CONFIG_NAME)
    workspace = live.Workspace(config_path, settings, list_name)
    sock = live.bind_socket(host, port)
    url = live.url_of(sock, f"/issues/{number}" if number is not None else "/")
    click.echo(f"Previewing at {url}  (Ctrl-C to stop)")
    if settings.secret is None:
        click.echo("note: NEWSLETTER_SECRET is unset: the sample's unsubscribe link won't verify")
    live.serve_preview(workspace, sock, open_url=None if no_open else url)
    click.echo("Preview stopped.")


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def main() -> None:
    cli(prog_name="newsletter")
