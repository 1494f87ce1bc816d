"""The editor's commands: `new` issue, and `build`, `check` and `preview` of one."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

import click

from newsletter.checks.findingformats import (
    FORMATS,
    Format,
    github_commands,
    json_document,
    place,
    sarif_log,
    text_line,
)
from newsletter.checks.lint import Finding
from newsletter.checks.publicurl import base_url_note
from newsletter.cli.terminal import fail, pass_context, pass_settings, sample_list_option
from newsletter.config.configfile import CONFIG_NAME
from newsletter.config.settings import DEFAULT_LIST, Settings
from newsletter.context import CommandContext
from newsletter.draft import Draft, review, write_files
from newsletter.errors import IssueError, NewsletterError, Problem, display_path
from newsletter.gate import inspect_send
from newsletter.issues import issue_path, newest_issue
from newsletter.issues.skeleton import start_issue, write_skeleton
from newsletter.rendering.clip import GMAIL_CLIP

EPHEMERAL_NOTE = (
    "note: NEWSLETTER_SECRET is not set, so the sample's unsubscribe link is signed "
    "with a throwaway key and will not verify"
)


def review_issue(context: CommandContext, number: int, list_name: str) -> Draft:
    settings = context.settings
    path = issue_path(settings.issues_dir, number)
    draft = review(settings, path, list_name, dates=context.first_sent())
    if draft.ephemeral_key:
        click.echo(EPHEMERAL_NOTE, err=True)
    return draft


@click.command()
@click.option(
    "--number",
    type=click.IntRange(min=1),
    default=None,
    help="The new issue's number (default: the one after the highest in issues/).",
)
@click.option(
    "--from",
    "start_from",
    type=click.IntRange(min=1),
    default=None,
    help="Take the sections of this issue (default: the highest).",
)
@pass_settings
def new(settings: Settings, number: int | None, start_from: int | None) -> None:
    """Write the next issue file and print its path; it opens nothing.

    The file gets the next number, today's date (in [newsletter] timezone, else the
    machine's), the last issue's title with the number moved on (its subtitle, after ":" or
    " - ", left behind: it was that week's), and its sections with no items, in its format
    (Markdown or YAML). An issue that exists is never overwritten.
    """
    skeleton = start_issue(
        settings.issues_dir,
        settings.newsletter.today(),
        number=number,
        start_from=start_from,
        name=settings.newsletter.name,
        language=settings.newsletter.language,
    )
    write_skeleton(skeleton)
    click.echo(display_path(skeleton.path))
    click.echo(
        f"issue {skeleton.number}: the {len(skeleton.sections)} section(s) of issue "
        f"{skeleton.source.issue.number} ({skeleton.source.display}), with nothing in them yet",
        err=True,
    )


@click.command()
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
    help="Write the web archive (index + the published issues: [serve] publish) as static files"
    " into this folder.",
)
@pass_context
def build(
    context: CommandContext,
    number: int | None,
    list_name: str,
    out: Path | None,
    site: Path | None,
) -> None:
    """Render an issue: email.html, email.txt and a sample email.eml (for a sample recipient).

    With --site DIR, also write the web archive that `newsletter serve` shows (index.html,
    issues/N/index.html, unsubscribe/index.html) for any static host; --issue is then optional.
    An issue file that does not load is left out of it, named with its file, line and fault:
    every other page is written, and the command exits 1.
    """
    settings = context.settings
    if number is None and site is None:
        raise click.UsageError("Missing option '--issue' (or --site DIR for the web archive).")
    if number is None and out is not None:
        raise click.UsageError("--out needs --issue")
    if number is not None:
        _build_issue(context, number, list_name, out)
    if site is not None:
        from newsletter.web.site.archive import write_site

        built = write_site(settings, site, context.existing_database())
        pages = [path for path in built.written if path.suffix == ".html"]
        images = sum(1 for path in built.written if path.suffix not in (".html", ".xml"))
        click.echo(
            f"{display_path(site)}/  web archive: {len(pages)} pages"
            f" ({len(pages) - 2} issue(s), the index and how-to-unsubscribe)"
            + (f", feed.xml and {images} image(s)" if images else " and feed.xml")
        )
        if built.left_out:
            # Built, yet not what was asked for: exit 1, so a deploy step after it does not
            # publish an archive that lost a page its emails link.
            numbers = ", ".join(str(number) for number, _ in built.left_out)
            fail(
                NewsletterError(
                    "\n".join(exc.message for _, exc in built.left_out),
                    hint=f"Left out of the archive: issue(s) {numbers} (no page, index line or "
                    "feed entry; a page an earlier build wrote is left as it was). Every other "
                    "page was written. Fix the lines named above and build again.",
                )
            )
        click.echo(f"publish it at {settings.newsletter.base_url} (newsletter.base_url)")


def _build_issue(context: CommandContext, number: int, list_name: str, out: Path | None) -> None:
    settings = context.settings
    draft = review_issue(context, number, list_name)
    folder = out if out is not None else settings.root / "out" / str(number)
    for path in write_files(draft, folder):
        click.echo(f"{display_path(path)}  {path.stat().st_size / 1024:.1f} KB")
    sample = f"{settings.newsletter.sample_name} <{settings.newsletter.sample_email}>"
    click.echo(f"filled for the sample recipient {sample}; the .eml is exactly what they get")


@click.command()
@click.option(
    "--issue", "number", type=int, default=None, help="Issue number (default: the newest)."
)
@click.option(
    "--archive",
    is_flag=True,
    help="Instead of one issue: fetch every published issue's links and name the dead ones "
    "by issue and item (online; answers kept a month in .newsletter/archive-cache.json).",
)
@sample_list_option
@click.option(
    "--online/--offline",
    default=None,
    help="Also check the sender's DNS (SPF, DKIM, DMARC, MX), the unsubscribe endpoint and "
    "every link (default: [check] online).",
)
@click.option(
    "--format",
    "output",
    type=click.Choice(FORMATS),
    default="text",
    show_default=True,
    help="How findings are written: text for a terminal; json (one object per finding: rule, "
    "severity, file, line, message); github (workflow commands: annotations on a pull "
    "request's lines); sarif (a SARIF 2.1.0 log for code scanning). With json and sarif, "
    "stdout is the document alone and the summary goes to stderr.",
)
@pass_context
def check(
    context: CommandContext,
    number: int | None,
    archive: bool,
    list_name: str,
    online: bool | None,
    output: Format,
) -> None:
    """Pre-send checks of an issue (without --issue: the newest, named on the first line).
    Exit 0: no errors (warnings allowed); 1: errors.

    Warnings the issue file silences (its `silence:` key) are counted and named, not shown;
    errors are never silenced. An image without alt text is a warning; `[check] alt_text =
    "error"` makes it an error.

    Also scores the sample message with SpamAssassin (`spamassassin -L -t`, local rules) when
    it is installed: a warning above 0.0, an error from 5.0.

    A base_url readers cannot reach (loopback, or http://) is a note here, never a failure (CI
    checks without the server's base_url); a send to a list that is not staging refuses it.

    With --archive (and no --issue): the links of every issue the archive publishes, fetched
    as --online fetches them; exit 1 if any is dead.
    """
    settings = context.settings
    if archive:
        if number is not None or output != "text" or online is False:
            raise click.UsageError(
                "--archive checks every published issue's links online, as text: "
                "no --issue, --offline or --format"
            )
        # Imported here: the fetcher's HTTP client is no cost of an issue's offline check.
        from newsletter.cli.archivelinks import report_archive

        sys.exit(report_archive(settings))
    summary = output in ("json", "sarif")
    if number is None:
        number = newest_issue(settings.issues_dir)
        newest = display_path(issue_path(settings.issues_dir, number))
        click.echo(
            f"checking issue {number}, the newest ({newest}); --issue N checks another",
            err=summary,
        )
    issue_file = display_path(issue_path(settings.issues_dir, number))
    try:
        verdict = inspect_send(context, number, list_name, online=online)
    except IssueError as exc:
        if output == "text":
            raise
        # A file the checks cannot load is the first thing CI should show on its lines.
        _write_findings(output, [_problem_finding(p) for p in exc.problems], [], issue_file)
        fail(exc)
    if verdict.ephemeral_key:
        click.echo(EPHEMERAL_NOTE, err=True)
    notes = [f"note: {note}" for note in verdict.online.notes] if verdict.online else []
    silenced = f"silenced by the issue file: {', '.join(verdict.silences)}"
    if output == "text":
        for finding in verdict.findings:
            click.secho(text_line(finding), fg="red" if finding.level == "error" else "yellow")
    else:
        notes += [silenced] if verdict.silences else []
        _write_findings(output, verdict.findings, notes, issue_file)
    # The summary: after the findings on a terminal and in a CI log; on stderr when stdout
    # is a document for a program (json, sarif).
    size = verdict.html_size
    click.echo(
        f"HTML part: {size / 1024:.1f} KB encoded ({verdict.html_encoding}), "
        f"{size / GMAIL_CLIP:.0%} of Gmail's ~102 KB clipping limit",
        err=summary,
    )
    click.echo(verdict.spam_line(), err=summary)
    if verdict.online is not None:
        for note in verdict.online.notes:
            click.echo(f"note: {note}", err=summary)
        click.echo(verdict.online.summary(), err=summary)
        from newsletter.doctor.examine import examine_relays  # the SMTP client: when online

        for found in examine_relays(settings):  # several relays, or a provider's webhook
            said = f"{found.name}: {'ok' if found.ok else 'FAILED'}: {found.detail}"
            click.echo(said + ("" if found.ok else f" ({found.fix})"), err=summary)
    if verdict.silences:
        click.echo(silenced, err=summary)
    # Not a finding: CI checks with init's local base_url, or without the server's own.
    staging = settings.mailing_list(list_name).staging
    said = base_url_note(settings.newsletter.base_url, list_name, staging=staging)
    if said:
        click.echo(f"note: {said}", err=summary)
    click.echo(f"issue {number}: {verdict.tally()}", err=summary)
    if not verdict.passed:
        sys.exit(1)


def _write_findings(
    output: Format, findings: Iterable[Finding], notes: list[str], issue_file: str
) -> None:
    placed = place(findings, issue_file)
    if output == "json":
        click.echo(json_document(placed))
    elif output == "sarif":
        click.echo(sarif_log(placed))
    else:
        for line in github_commands(placed, notes, issue_file):
            click.echo(line)


def _problem_finding(problem: Problem) -> Finding:
    """A fault that keeps the issue file from loading, as a finding at its line."""
    where = f"{problem.path}:{problem.line}: " if problem.line is not None else ""
    what = f"{problem.field}: {problem.message}" if problem.field else problem.message
    line = problem.line
    return Finding("error", "issue-file", where + what, file=problem.path, line=line)


@click.command()
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
    default=DEFAULT_LIST,
    show_default=True,
    help="The list whose headers the sample message carries.",
)
@pass_settings
def preview(
    settings: Settings, number: int | None, host: str, port: int, no_open: bool, list_name: str
) -> None:
    """Serve the issues live in a browser: every save re-renders and reloads the page.

    Shows each issue as the sample recipient gets it (same pipeline as `send`), at desktop and
    mobile widths, light and dark, with its text part, sources, size and check results; the
    Mailbox page (/mailbox) shows what the capture server (`newsletter mailbox`) received.
    Ctrl-C stops it.
    """
    # starlette + uvicorn: imported only when used
    from newsletter.web.listen import bind_socket, is_loopback, url_of
    from newsletter.web.preview.app import serve_preview
    from newsletter.web.preview.workspace import Workspace

    if number is not None:
        issue_path(settings.issues_dir, number)  # an unknown number fails here, not in the browser
    config = click.get_current_context().find_root().obj.get("config")
    config_path = settings.root / (config.name if config else CONFIG_NAME)
    # Each render's outcome goes to the terminal too: the page is not always in view.
    workspace = Workspace(config_path, settings, list_name, report=click.echo)
    sock = bind_socket(host, port)
    url = url_of(sock, f"/issues/{number}" if number is not None else "/")
    click.echo(f"Previewing at {url}  (Ctrl-C to stop)")
    if not is_loopback(sock):
        click.echo("note: not on loopback: anyone who can reach this address sees the preview")
    if settings.secret is None:
        click.echo("note: NEWSLETTER_SECRET is unset: the sample's unsubscribe link won't verify")
    serve_preview(workspace, sock, open_url=None if no_open else url)
    click.echo("Preview stopped.")
