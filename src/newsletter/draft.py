"""An issue file in; what the editor looks at out: the render, one sample message, its parts,
sizes and check findings.

`build`, `check` and the preview all show an issue through `review`, so they see the same
pipeline as `send` (issue file -> dated -> render -> one sample recipient's message) and the
sample is parsed once. The warnings the issue file silences are set apart there, so every one of
them shows what was silenced the same way. `write_files` puts a review on disk for `newsletter
build`.
"""

from __future__ import annotations

import datetime as dt
import email
import email.policy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from email.message import EmailMessage
from pathlib import Path

from newsletter.checks.ejected import check_ejected
from newsletter.checks.lint import (
    Finding,
    Silenced,
    check_tracked_host,
    encoded_size,
    note_findings,
    run_checks,
    silence_findings,
)
from newsletter.checks.markers import check_markers
from newsletter.config.settings import Settings
from newsletter.database import Database, database_exists, open_project_database
from newsletter.errors import NewsletterError
from newsletter.issues import IssueFile, list_issue_numbers, read_issue_file
from newsletter.mail.message import sample_message
from newsletter.mail.tracking import SendRendering, render_for_sending
from newsletter.models import Issue, RenderedEmail
from newsletter.rendering.render import DEFAULT_TEMPLATE_DIRS, dated, preheader_for
from newsletter.rendering.templateblocks import unhandled_blocks


@dataclass(frozen=True)
class Draft:
    """One issue as the sample recipient gets it, and what the checks say about it."""

    issue: Issue
    rendered: RenderedEmail  # its tracked links, if any, as slots (linkslots.py)
    # The render a send of this draft uploads (`rendered` and what each link slot stands for):
    # a send builds every reader's message from it, so what was checked is what is sent.
    sending: SendRendering
    message: bytes  # the sample recipient's .eml, exactly as it would be uploaded
    html: str
    text: str
    html_size: int  # the HTML part's bytes on the wire, after its transfer encoding
    html_encoding: str
    # What an inbox list shows before the email is opened.
    sender: str
    subject: str
    preheader: str
    findings: list[Finding]  # what the checks say, but for the warnings the issue silences
    silenced: list[Silenced]  # each `silence:` entry with the warnings it held back
    ephemeral_key: bool  # NEWSLETTER_SECRET unset: the sample's unsubscribe link won't verify

    @property
    def errors(self) -> int:
        return sum(1 for f in self.findings if f.level == "error")

    @property
    def warnings(self) -> int:
        return sum(1 for f in self.findings if f.level == "warning")


def review(
    settings: Settings,
    path: Path,
    list_name: str,
    *,
    source: IssueFile | None = None,
    built: Callable[[bytes], None] | None = None,
    dates: Mapping[int, dt.date] | None = None,
) -> Draft:
    """Load, render once, build the sample message for `list_name`, parse it once, check it.
    `source`: the file read already (a sequence's step, read with its own keys). `built` is
    given the sample message as soon as it exists, before the checks run (the gate feeds
    SpamAssassin, which then scores while they do). `dates`: sent_dates, if the caller has them
    (a command's context, which holds the database open: context.py)."""
    source = source if source is not None else read_issue_file(path)
    issue = source.issue
    # The email shows the date a send now would; the Draft keeps the file's own (or none).
    sending = render_for_sending(dated_for_sending(settings, issue, dates), settings, list_name)
    rendered = sending.rendered
    sample, ephemeral = sample_message(rendered, settings, list_name, sending.links)
    if built is not None:
        built(sample.data)
    message = email.message_from_bytes(sample.data, policy=email.policy.default)
    assert isinstance(message, EmailMessage)
    html_part, text_part = message.get_body(("html",)), message.get_body(("plain",))
    html = str(html_part.get_content()) if html_part else ""
    text = str(text_part.get_content()) if text_part else ""
    html_size = encoded_size(html_part) if html_part else 0
    parts = None if html_part is None or text_part is None else (html, text, html_size)
    own = unhandled_blocks(settings.templates_dir, source.block_lines, DEFAULT_TEMPLATE_DIRS)
    notes = note_findings(sorted([*source.notes, *own], key=lambda n: n.line), source.display)
    if settings.check.alt_text == "error":  # [check] alt_text: every image must be described
        notes = [replace(n, level="error") if n.code == "alt" else n for n in notes]
    findings = run_checks(issue, rendered, parts, notes, language=settings.newsletter.language)
    findings += check_tracked_host(settings)
    findings += check_ejected(settings)  # copies of the templates the package moved past
    if parts is not None:  # the templates' own leftovers: errors, shown with the others first
        findings += check_markers(settings, html)
        findings.sort(key=lambda f: f.level != "error")
    shown, silenced = silence_findings(findings, issue.silence)
    return Draft(
        issue=issue,
        rendered=rendered,
        sending=sending,
        message=sample.data,
        html=html,
        text=text,
        html_size=html_size,
        html_encoding=str(html_part["Content-Transfer-Encoding"]) if html_part else "",
        sender=str(message.get("From", "")),
        subject=str(message.get("Subject", "")),
        preheader=preheader_for(issue),
        findings=shown,
        silenced=silenced,
        ephemeral_key=ephemeral,
    )


def dated_for_sending(
    settings: Settings, issue: Issue, dates: Mapping[int, dt.date] | None = None
) -> Issue:
    """`issue` with the date its readers see: its own `date:`, else the day it first went to a
    subscriber list, else today (what a send started now shows; a resumed send keeps the day
    of its first message). `dates`: sent_dates, if the caller has them already."""
    if dates is not None:
        return dated(issue, dates.get(issue.number) or settings.newsletter.today())
    try:
        first = sent_dates(settings).get(issue.number)
    except NewsletterError:
        # The log is out of reach (a PostgreSQL server the editor's machine cannot see): date
        # it as if sent now; a real send stops at the log anyway.
        first = None
    return dated(issue, first or settings.newsletter.today())


def sent_dates(
    settings: Settings, *, include_staging: bool = False, database: Database | None = None
) -> dict[int, dt.date]:
    """The day each issue first went to a subscriber list (staging sends count only if asked),
    in the newsletter's time zone (a digest sent at 07:00 in Beijing is dated that day, not the
    day before as in UTC), from the delivery log: `outbox` if the caller holds it open (serve),
    else opened for this; read only: where nothing was sent there is no log to create."""
    if database is None:
        if not database_exists(settings.database_target):
            return {}
        with open_project_database(settings) as opened:
            return sent_dates(settings, include_staging=include_staging, database=opened)
    lists = [n for n, chosen in settings.lists.items() if include_staging or not chosen.staging]
    first = database.deliveries.first_sent(lists)
    day = settings.newsletter.date_of
    return {issue: day(dt.datetime.fromisoformat(when)) for issue, when in first.items()}


def published_issues(settings: Settings, sent: dict[int, dt.date] | None = None) -> list[int]:
    """The issues the archive lists: every file, or with `[serve] publish = "sent"` only those
    sent to a subscriber list (`sent`: sent_dates, if the caller has them already)."""
    numbers = list_issue_numbers(settings.issues_dir)
    if settings.serve.publish == "sent":
        sent = sent_dates(settings) if sent is None else sent
        numbers = [n for n in numbers if n in sent]
    return numbers


def write_files(draft: Draft, folder: Path) -> list[Path]:
    """email.html, email.txt and email.eml in `folder`; the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    # The wire form has CRLF line ends; files for people to open get plain newlines.
    for name, content in (("email.html", draft.html), ("email.txt", draft.text)):
        path = folder / name
        path.write_text(content.replace("\r\n", "\n"), encoding="utf-8")
        written.append(path)
    eml = folder / "email.eml"
    eml.write_bytes(draft.message)
    return [*written, eml]
